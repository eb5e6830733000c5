/**
 * Speech segments from Silero VAD's per-chunk probabilities, as the
 * silero-vad package's `get_speech_timestamps` finds them: speech starts at
 * a chunk at or above `threshold`, ends after `minSilenceMs` of chunks below
 * `threshold − 0.15`, segments shorter than `minSpeechMs` are dropped, and
 * each is widened by `padMs` on both sides (not past its neighbours).
 *
 * @module
 */

/** A stretch of speech, in seconds. */
export interface SpeechSegment {
  /** When speech starts, in seconds from the stream's start. */
  start: number;
  /** When it ends. */
  end: number;
}

/** Options of `speechSegments` (the silero-vad package's defaults). */
export interface SegmentOptions {
  /** Probability at which speech starts (0.5). */
  threshold?: number;
  /** Shortest speech kept, in ms (250). */
  minSpeechMs?: number;
  /** Silence that ends speech, in ms (100). */
  minSilenceMs?: number;
  /** Padding on each side, in ms (30). */
  padMs?: number;
}

/**
 * The speech segments of a stream whose chunks of `chunkSize` samples at
 * `sampleRate` had the speech probabilities `probs`.
 *
 * @example
 * ```ts ignore
 * const segments = speechSegments(await vad.probabilities(audio), 512, 16000);
 * // [{ start: 0.51, end: 1.73 }, …]
 * ```
 */
export function speechSegments(
  probs: ArrayLike<number>,
  chunkSize: number,
  sampleRate: number,
  options: SegmentOptions = {},
): SpeechSegment[] {
  const threshold = options.threshold ?? 0.5;
  const negThreshold = Math.max(threshold - 0.15, 0.01);
  const chunkMs = 1000 * chunkSize / sampleRate;
  const minSpeech = (options.minSpeechMs ?? 250) / chunkMs;
  const minSilence = (options.minSilenceMs ?? 100) / chunkMs;
  const found: [number, number][] = []; // in chunks, end exclusive
  let start = -1, silentSince = -1;
  for (let i = 0; i < probs.length; i++) {
    const p = probs[i];
    if (start < 0) {
      if (p >= threshold) start = i;
      continue;
    }
    if (p >= threshold) silentSince = -1;
    else if (p < negThreshold) {
      if (silentSince < 0) silentSince = i;
      if (i + 1 - silentSince >= minSilence) {
        if (silentSince - start >= minSpeech) found.push([start, silentSince]);
        start = silentSince = -1;
      }
    }
  }
  if (start >= 0 && probs.length - start >= minSpeech) found.push([start, probs.length]);
  const pad = (options.padMs ?? 30) / 1000;
  const seconds = chunkSize / sampleRate, total = probs.length * seconds;
  return found.map(([s, e], k) => {
    const prevEnd = k > 0 ? found[k - 1][1] * seconds : 0;
    const nextStart = k + 1 < found.length ? found[k + 1][0] * seconds : total;
    return {
      start: Math.max(s * seconds - pad, (prevEnd + s * seconds) / 2, 0),
      end: Math.min(e * seconds + pad, (e * seconds + nextStart) / 2, total),
    };
  });
}

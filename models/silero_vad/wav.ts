/**
 * A small WAV reader for `examples/vad.ts` and the Silero VAD tests: RIFF
 * files of PCM (8, 16, 24 or 32-bit integers) or IEEE float (32 or 64-bit)
 * samples, any channel count (mixed down to mono), and a linear resampler to
 * the 16 kHz Silero VAD takes (espeak-ng writes 22,050 Hz).
 *
 * @module
 */

/** A decoded WAV file, mixed down to one channel. */
export interface Wav {
  /** Samples per second. */
  sampleRate: number;
  /** Channels in the file (the samples are their mean). */
  channels: number;
  /** The samples, in [-1, 1]. */
  samples: Float32Array;
}

/** Why a file is not a WAV this reader takes. */
export class WavError extends Error {
  /** Builds it from the reason. */
  constructor(reason: string) {
    super(`WAV: ${reason}`);
    this.name = "WavError";
  }
}

/**
 * Decodes a WAV file's bytes.
 *
 * @example
 * ```ts ignore
 * const wav = readWav(await Deno.readFile("speech.wav"));
 * const audio = resample(wav.samples, wav.sampleRate, 16000);
 * ```
 */
export function readWav(bytes: Uint8Array): Wav {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") {
    throw new WavError("not a RIFF/WAVE file");
  }
  let format = 0, channels = 0, sampleRate = 0, bits = 0;
  let data: Uint8Array | null = null;
  for (let at = 12; at + 8 <= bytes.length;) {
    const id = tag(at);
    // espeak-ng writes 0xffffffff as the data size when it streams to stdout: up to the end.
    let size = view.getUint32(at + 4, true);
    if (at + 8 + size > bytes.length) size = bytes.length - at - 8;
    if (id === "fmt ") {
      if (size < 16) throw new WavError(`a fmt chunk of ${size} bytes`);
      format = view.getUint16(at + 8, true);
      channels = view.getUint16(at + 10, true);
      sampleRate = view.getUint32(at + 12, true);
      bits = view.getUint16(at + 22, true);
      // WAVE_FORMAT_EXTENSIBLE: the real format is the sub-format GUID's first two bytes.
      if (format === 0xfffe && size >= 26) format = view.getUint16(at + 32, true);
    } else if (id === "data") {
      data = bytes.subarray(at + 8, at + 8 + size);
    }
    at += 8 + size + (size & 1);
  }
  if (channels === 0 || sampleRate === 0) throw new WavError("no fmt chunk");
  if (data === null) throw new WavError("no data chunk");
  const width = bits / 8;
  const read = sampleReader(format, bits);
  const frames = Math.floor(data.length / (width * channels));
  const d = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const samples = new Float32Array(frames);
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read(d, (i * channels + c) * width);
    samples[i] = sum / channels;
  }
  return { sampleRate, channels, samples };
}

/** How one sample of `format` (1 PCM, 3 float) and `bits` is read, as a number in [-1, 1]. */
function sampleReader(format: number, bits: number): (d: DataView, at: number) => number {
  if (format === 1 && bits === 8) return (d, at) => (d.getUint8(at) - 128) / 128;
  if (format === 1 && bits === 16) return (d, at) => d.getInt16(at, true) / 32768;
  if (format === 1 && bits === 24) {
    return (d, at) => ((d.getUint8(at + 2) << 24 | d.getUint16(at, true) << 8) >> 8) / 8388608;
  }
  if (format === 1 && bits === 32) return (d, at) => d.getInt32(at, true) / 2147483648;
  if (format === 3 && bits === 32) return (d, at) => d.getFloat32(at, true);
  if (format === 3 && bits === 64) return (d, at) => d.getFloat64(at, true);
  throw new WavError(`format ${format} with ${bits}-bit samples (PCM 8/16/24/32, float 32/64)`);
}

/** `samples` at `from` Hz resampled to `to` Hz by linear interpolation. */
export function resample(samples: Float32Array, from: number, to: number): Float32Array {
  if (from === to) return samples;
  const n = Math.floor(samples.length * to / from);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const x = i * from / to, k = Math.floor(x), f = x - k;
    const a = samples[k], b = samples[Math.min(k + 1, samples.length - 1)];
    out[i] = a + (b - a) * f;
  }
  return out;
}

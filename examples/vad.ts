/**
 * Voice activity detection with Silero VAD, imported from its ONNX file with
 * `importONNX` (`models/silero_vad/`): reads a WAV file, or synthesizes
 * speech with espeak-ng (sentences with silences between), runs the model
 * chunk by chunk (32 ms each, its state carried from one to the next) and
 * prints the speech segments it finds with their times.
 *
 * ```sh
 * deno run --allow-read=.weights --allow-run=espeak-ng examples/vad.ts [--device auto|webgpu|cpu] [--model NAME] [--gap SECONDS]
 * deno run --allow-read=.weights,talk.wav examples/vad.ts talk.wav
 * ```
 *
 * The model files are not in the repository; get them once with
 * `bash tools/fetch_weights.sh` (the silero-vad wheel's ONNX files into
 * `.weights/silero-vad/`). `--model` picks one (default `silero_vad`; also
 * `silero_vad_16k_op15`, `silero_vad_half`, `silero_vad_op18_ifless`,
 * `silero_vad_openvino_16k`). Without a file, espeak-ng (Debian's
 * `espeak-ng` package) speaks three sentences with `--gap` seconds (default
 * 1) of silence before, between and after, and the example prints when each
 * was spoken beside what the model found.
 *
 * @module
 */

import { readWav, resample, SileroVAD, speechSegments } from "../models.ts";
import { chooseDevice, DEVICE_CHOICES } from "./_choose_device.ts";

const USAGE =
  "usage: deno run --allow-read=.weights --allow-run=espeak-ng examples/vad.ts [--device auto|webgpu|cpu] [--model NAME] [--gap SECONDS] [file.wav]";
const RATE = 16000;
const SENTENCES = [
  "Voice activity detection finds the parts of a recording where someone speaks.",
  "This model runs in relaxvm, imported from its ONNX file.",
  "Silence in between is not speech.",
];

/** `--flag value` from the arguments (removed from them), or `fallback`. */
function option(args: string[], flag: string, fallback: string): string {
  const at = args.indexOf(flag);
  if (at < 0) return fallback;
  const value = args[at + 1];
  if (value === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
  args.splice(at, 2);
  return value;
}

/** `text` spoken by espeak-ng, at 16 kHz. */
async function speak(text: string): Promise<Float32Array> {
  let output;
  try {
    output = await new Deno.Command("espeak-ng", { args: ["--stdout", text], stdout: "piped" })
      .output();
  } catch (e) {
    throw new Error(
      `espeak-ng did not run (${
        (e as Error).message
      }): install it (apt-get install espeak-ng) and allow it (--allow-run=espeak-ng), or give a WAV file`,
    );
  }
  if (!output.success) throw new Error(`espeak-ng exited with ${output.code}`);
  const wav = readWav(output.stdout);
  return resample(wav.samples, wav.sampleRate, RATE);
}

/** The sentences with `gap` seconds of silence around each; when each is heard (seconds). */
async function synthesize(gap: number): Promise<{ audio: Float32Array; spoken: number[][] }> {
  const pieces: Float32Array[] = [];
  const spoken: number[][] = [];
  let at = Math.round(gap * RATE);
  for (const s of SENTENCES) {
    const voice = await speak(s);
    // Where the voice is audible: espeak-ng's own leading and trailing quiet left out.
    const loud = (x: number) => Math.abs(x) > 0.01;
    const first = voice.findIndex(loud), last = voice.findLastIndex(loud);
    spoken.push([(at + first) / RATE, (at + last + 1) / RATE]);
    pieces.push(voice);
    at += voice.length + Math.round(gap * RATE);
  }
  const audio = new Float32Array(at);
  let k = Math.round(gap * RATE);
  for (const p of pieces) {
    audio.set(p, k);
    k += p.length + Math.round(gap * RATE);
  }
  return { audio, spoken };
}

const seconds = (t: number) => t.toFixed(2);

if (import.meta.main) {
  const args = [...Deno.args];
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const choice = option(args, "--device", "auto");
  if (!(DEVICE_CHOICES as readonly string[]).includes(choice)) {
    console.error(`--device ${choice}: not one of ${DEVICE_CHOICES.join(", ")}\n${USAGE}`);
    Deno.exit(2);
  }
  const name = option(args, "--model", "silero_vad");
  const gap = Number(option(args, "--gap", "1"));
  const file = args[0];
  const model = new URL(`../.weights/silero-vad/${name}.onnx`, import.meta.url);
  try {
    await Deno.stat(model);
  } catch {
    console.error(`${model.pathname} is missing: get it with bash tools/fetch_weights.sh`);
    Deno.exit(1);
  }

  let audio: Float32Array;
  let spoken: number[][] = [];
  if (file !== undefined) {
    const wav = readWav(await Deno.readFile(file));
    audio = resample(wav.samples, wav.sampleRate, RATE);
    console.log(
      `audio: ${file}, ${wav.channels} channel(s) at ${wav.sampleRate} Hz, ${
        seconds(audio.length / RATE)
      } s`,
    );
  } else {
    ({ audio, spoken } = await synthesize(gap));
    console.log(
      `audio: ${SENTENCES.length} sentences by espeak-ng, ${gap} s of silence around each, ${
        seconds(audio.length / RATE)
      } s at 16 kHz`,
    );
    spoken.forEach(([a, b], i) =>
      console.log(`  spoken   ${seconds(a)}–${seconds(b)} s  "${SENTENCES[i]}"`)
    );
  }

  const device = await chooseDevice(choice);
  using vad = await SileroVAD.create(model, { device });
  const started = performance.now();
  const probs = await vad.probabilities(audio);
  const ms = performance.now() - started;
  const segments = speechSegments(probs, vad.chunkSize, RATE);
  console.log(
    `speech segments (${name}, ${probs.length} chunks of 32 ms in ${(ms / 1000).toFixed(2)} s):`,
  );
  for (const s of segments) console.log(`  segment  ${seconds(s.start)}–${seconds(s.end)} s`);
  if (segments.length === 0) console.log("  (none)");
}

/**
 * Silero VAD (models/silero_vad, the silero-vad wheel's ONNX files imported
 * with `importONNX`) on the CPU against onnxruntime (`_silero_vad_checks.ts`),
 * and `examples/vad.ts` end to end: the segments it prints cover the spans
 * espeak-ng spoke. The WebGPU run is `webgpu/silero_vad_suite.ts`. Ignored
 * with a message without the model files, the onnx venv or espeak-ng.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { cpu } from "../mod.ts";
import { speechSegments } from "../models/silero_vad/segments.ts";
import { defineSileroTests, ignoreSilero } from "./_silero_vad_checks.ts";

const ignore = ignoreSilero();
defineSileroTests(
  "cpu",
  () => Promise.resolve(cpu()),
  (name, fn) => Deno.test({ name, ignore, fn }),
);

Deno.test({
  name: "examples/vad.ts: the speech segments it prints cover the sentences espeak-ng spoke",
  ignore,
  fn: async () => {
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-prompt",
        "--allow-read=.weights",
        "--allow-run=espeak-ng",
        "examples/vad.ts",
        "--device",
        "cpu",
      ],
      cwd: new URL("../", import.meta.url),
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(stdout);
    assertEquals(code, 0, new TextDecoder().decode(stderr));
    const spans = (kind: string) =>
      [...out.matchAll(new RegExp(`^  ${kind} +([\\d.]+)–([\\d.]+) s`, "gm"))]
        .map((m) => [Number(m[1]), Number(m[2])]);
    const spoken = spans("spoken"), found = spans("segment");
    assertEquals(spoken.length, 3, out);
    assertEquals(found.length, spoken.length, `one segment per sentence:\n${out}`);
    for (const [i, [a, b]] of spoken.entries()) {
      const [s, e] = found[i];
      // Each sentence inside its segment, give or take one 32 ms chunk; no segment in a silence.
      assert(
        s <= a + 0.032 && e >= b - 0.032,
        `sentence ${a}–${b} s, segment ${s}–${e} s:\n${out}`,
      );
      assert(s > (spoken[i - 1]?.[1] ?? 0) && e < (spoken[i + 1]?.[0] ?? Infinity), out);
    }
  },
});

Deno.test("speechSegments: starts at the threshold, ends after the silence, drops short bursts", () => {
  // 32 ms chunks: 10 silent, 20 speech, 10 silent, 3 speech (96 ms, under 250), 10 silent.
  const probs = [
    ...Array(10).fill(0.05),
    ...Array(20).fill(0.9),
    ...Array(10).fill(0.05),
    ...Array(3).fill(0.9),
    ...Array(10).fill(0.05),
  ];
  const segments = speechSegments(probs, 512, 16000, { padMs: 0 });
  assertEquals(segments.length, 1);
  assertEquals(segments[0].start, 10 * 0.032);
  assertEquals(segments[0].end, 30 * 0.032);
});

/**
 * all-MiniLM-L6-v2 with its real weights against its own reference stack:
 * `minilm_test.ts` runs these checks on the CPU, `webgpu/minilm_suite.ts` on
 * WebGPU. The reference (`testdata/minilm/`, made once by
 * `tools/minilm_reference.sh` with sentence-transformers on PyTorch) holds
 * 220 sentences in many languages and lengths, their token ids and their
 * embeddings.
 *
 * The weights are not in the repository: `tools/fetch_weights.sh` downloads
 * and converts them (CI runs it). Without them the tests are ignored with a
 * message saying so, or fail when `RELAXVM_REQUIRE_WEIGHTS=1` (`_weights.ts`).
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import type { Device } from "../mod.ts";
import { MINILM_L6 } from "../models/minilm/config.ts";
import { cosine, MiniLMSession } from "../models/minilm/session.ts";
import {
  ignoreWithoutWeights as ignoreWithoutModelWeights,
  requireWeights as requireModelWeights,
  weightsDir,
} from "./_weights.ts";

/** Where `tools/fetch_minilm.ts` puts the converted model. */
export const MINILM_DIR = weightsDir("all-MiniLM-L6-v2");

const FILES = ["tensor-cache.json", "tokenizer.json"];

/** Tolerances the issue sets, per embedding. */
export const MIN_COSINE = 0.99999, MAX_ABS_DIFF = 1e-4;

/** Whether the tests that need the weights are ignored (see `_weights.ts`). */
export function ignoreWithoutWeights(): boolean {
  return ignoreWithoutModelWeights("all-MiniLM-L6-v2", MINILM_DIR, FILES);
}

/** Throws, saying how to get them, when the weights are absent. */
export function requireWeights(): void {
  requireModelWeights("all-MiniLM-L6-v2", MINILM_DIR, FILES);
}

/** The committed reference. */
export interface MiniLMReference {
  sentences: string[];
  ids: number[][];
  embeddings: Float32Array[];
}

/** Reads `testdata/minilm/`. */
export async function readReference(): Promise<MiniLMReference> {
  const dir = new URL("../testdata/minilm/", import.meta.url);
  const json = JSON.parse(await Deno.readTextFile(new URL("reference.json", dir)));
  const bytes = await Deno.readFile(new URL("embeddings.bin", dir));
  const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const D = MINILM_L6.hidden;
  assertEquals(all.length, json.sentences.length * D, "embeddings.bin: one row per sentence");
  return {
    sentences: json.sentences,
    ids: json.ids,
    embeddings: Array.from(
      { length: json.sentences.length },
      (_, i) => all.slice(i * D, (i + 1) * D),
    ),
  };
}

/** The worst agreement over a set of embeddings. */
export interface Agreement {
  minCosine: number;
  maxAbsDiff: number;
}

/** Asserts each embedding within the tolerances of its reference; returns the worst figures. */
export function assertEmbeddings(
  actual: readonly Float32Array[],
  expected: readonly Float32Array[],
  sentences: readonly string[],
): Agreement {
  assertEquals(actual.length, expected.length, "embeddings");
  let minCosine = 1, maxAbsDiff = 0;
  actual.forEach((a, i) => {
    const e = expected[i];
    assertEquals(a.length, e.length, `embedding ${i}: length`);
    const c = cosine(a, e);
    let diff = 0;
    for (let j = 0; j < a.length; j++) diff = Math.max(diff, Math.abs(a[j] - e[j]));
    const what = `sentence ${i} ${JSON.stringify(sentences[i].slice(0, 60))}`;
    assert(c >= MIN_COSINE, `${what}: cosine ${c} < ${MIN_COSINE}`);
    assert(diff <= MAX_ABS_DIFF, `${what}: max abs diff ${diff} > ${MAX_ABS_DIFF}`);
    minCosine = Math.min(minCosine, c);
    maxAbsDiff = Math.max(maxAbsDiff, diff);
  });
  return { minCosine, maxAbsDiff };
}

/** Registers one check. */
export type RegisterTest = (name: string, fn: () => Promise<void>) => void;

/** The checks every device runs. */
export function defineMiniLMTests(
  deviceName: string,
  getDevice: () => Promise<Device>,
  register: RegisterTest,
): void {
  register(
    `${deviceName}: minilm embeds 220 sentences as sentence-transformers does (cosine ≥ 0.99999, max abs diff ≤ 1e-4)`,
    async () => {
      requireWeights();
      const ref = await readReference();
      const session = await MiniLMSession.create(MINILM_DIR, { device: await getDevice() });
      try {
        const start = performance.now();
        const embeddings = await session.embedTokens(ref.ids, 32);
        const seconds = (performance.now() - start) / 1000;
        const { minCosine, maxAbsDiff } = assertEmbeddings(
          embeddings,
          ref.embeddings,
          ref.sentences,
        );
        console.log(
          `minilm ${deviceName}: ${ref.sentences.length} sentences in ${seconds.toFixed(1)} s, ` +
            `min cosine ${minCosine}, max abs diff ${maxAbsDiff.toExponential(2)}`,
        );
      } finally {
        session.dispose();
      }
    },
  );
}

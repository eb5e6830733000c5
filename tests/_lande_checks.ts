/**
 * lande's trained network as a tensor-cache model (`models/lande/`) against
 * lande itself (npm `lande` 1.0.10, the package whose weights it loads):
 * `lande_test.ts` runs these checks on the CPU, `webgpu/lande_suite.ts` on
 * WebGPU. The texts are the 220 sentences of the MiniLM reference (26
 * languages and scripts, empty and whitespace-only ones included).
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- the reference implementation, used by tests only
import lande from "npm:lande@1.0.10";
import { assert, assertEquals } from "@std/assert";
import type { Device } from "../mod.ts";
import { LandeSession } from "../models/lande/session.ts";
import {
  ignoreWithoutWeights as ignoreWithoutModelWeights,
  requireWeights as requireModelWeights,
  weightsDir,
} from "./_weights.ts";

/** Where `tools/fetch_lande.ts` puts the converted network. */
export const LANDE_DIR = weightsDir("lande");
const FILES = ["tensor-cache.json", "lande.json"];

/**
 * Largest difference allowed between a probability and lande's. lande's
 * logits reach 1557 in magnitude for these texts, where float32's spacing
 * is 1.2e-4, and both sides keep float32 activations but sum in different
 * orders (the GPU in float32 throughout): a logit can move by a few 1e-4,
 * and a probability p by about p(1 − p) times that. Float64 arithmetic lands
 * between lande and relaxvm (0.5422152 where lande gives 0.5422059 and
 * relaxvm on the CPU 0.5422210, for the worst text seen there).
 */
export const TOLERANCE = 2e-4;

/** Whether the tests that need the network are ignored (see `_weights.ts`). */
export function ignoreWithoutLande(): boolean {
  return ignoreWithoutModelWeights("lande", LANDE_DIR, FILES);
}

/** The texts: the MiniLM reference sentences. */
async function texts(): Promise<string[]> {
  const url = new URL("../testdata/minilm/reference.json", import.meta.url);
  return JSON.parse(await Deno.readTextFile(url)).sentences;
}

/** Registers the check for one device. */
export function defineLandeTests(
  deviceName: string,
  getDevice: () => Promise<Device>,
  register: (name: string, fn: () => Promise<void>) => void,
): void {
  register(
    `${deviceName}: lande's network in the VM gives lande's own probabilities for 220 texts`,
    async () => {
      requireModelWeights("lande", LANDE_DIR, FILES);
      const all = await texts();
      const session = await LandeSession.create(LANDE_DIR, { device: await getDevice() });
      try {
        const ours = await session.detect(all);
        let worst = 0;
        all.forEach((text, i) => {
          const theirs = lande(text);
          const what = `text ${i} ${JSON.stringify(text.slice(0, 40))}`;
          assertEquals(ours[i].length, theirs.length, what);
          const mine = new Map(ours[i]);
          for (const [lang, p] of theirs) {
            const diff = Math.abs(mine.get(lang)! - p);
            assert(diff <= TOLERANCE, `${what}: ${lang} ${mine.get(lang)} vs lande's ${p}`);
            worst = Math.max(worst, diff);
          }
          // The same answer, unless lande's top two are closer than the tolerance.
          if (theirs[0][1] - theirs[1][1] > 2 * TOLERANCE) {
            assertEquals(ours[i][0][0], theirs[0][0], what);
          }
        });
        console.log(
          `lande ${deviceName}: ${all.length} texts, max probability diff ${
            worst.toExponential(2)
          }`,
        );
      } finally {
        session.dispose();
      }
    },
  );
}

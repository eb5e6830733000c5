/**
 * The decoder's correctness checks, run on every device: `gpt_model_test.ts`
 * registers them for the CPU, `webgpu/gpt_suite.ts` for WebGPU. The VM's
 * logits are compared with `ReferenceGPT` (plain TypeScript, float64, the
 * same weights) after a prefill and after each of 8 greedy decode steps, for
 * prompts of 1, 7 and 64 tokens, all on one VM built from one executable.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import type { Device, Executable } from "../mod.ts";
import { TINY } from "../models/gpt/config.ts";
import { buildGPT } from "../models/gpt/program.ts";
import { argmax, GPTSession, pick } from "../models/gpt/session.ts";
import { makeWeights } from "../models/gpt/weights.ts";
import { ReferenceGPT } from "./_gpt_reference.ts";

/** Registers one check. */
export type RegisterTest = (name: string, fn: () => Promise<void>) => void;

/** Relative and absolute tolerance of a logit: `|a - e| <= RTOL·|e| + ATOL`. */
export const RTOL = 1e-3, ATOL = 1e-5;

/** Prompt lengths the issue names. */
export const PROMPT_LENGTHS = [1, 7, 64];

/** A deterministic prompt of `n` tokens. */
export function prompt(n: number, salt = 0): number[] {
  return Array.from({ length: n }, (_, i) => (i * 37 + 11 + salt * 101) % TINY.vocab);
}

/** Asserts every logit within `RTOL`/`ATOL` of the reference; returns the largest error seen. */
export function assertLogits(actual: Float32Array, expected: Float64Array, what: string): number {
  assertEquals(actual.length, expected.length, `${what}: logits`);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    const err = Math.abs(actual[i] - expected[i]);
    assert(
      err <= RTOL * Math.abs(expected[i]) + ATOL,
      `${what}: logit ${i} is ${actual[i]}, the reference ${expected[i]}`,
    );
    worst = Math.max(worst, err);
  }
  return worst;
}

let shared: Executable | undefined;
/** The tiny decoder's executable, built once per process and shared by every session. */
export function tinyExecutable(): Executable {
  return shared ??= buildGPT(TINY);
}

/**
 * Runs the prefill of each prompt length and 8 greedy decode steps on
 * `session` and on the reference, checking the logits of each; returns the
 * greedy tokens of each run.
 */
export async function checkAgainstReference(session: GPTSession): Promise<number[][]> {
  const ref = new ReferenceGPT(TINY, makeWeights(TINY, 1));
  const runs: number[][] = [];
  for (const n of PROMPT_LENGTHS) {
    session.reset();
    ref.reset();
    const tokens = prompt(n);
    let expected = ref.forward(tokens);
    assertLogits(await session.prefill(tokens), expected, `prefill of ${n}`);
    const generated: number[] = [];
    for (let step = 0; step < 8; step++) {
      const next = argmax(expected);
      generated.push(next);
      expected = ref.forward([next]);
      assertLogits(await session.decode(next), expected, `prompt ${n}, decode step ${step + 1}`);
    }
    assertEquals(session.position, n + 8);
    runs.push(generated);
  }
  return runs;
}

/** Registers the checks for `deviceName`; `getDevice` is called inside each test. */
export function defineGPTTests(
  deviceName: string,
  getDevice: () => Promise<Device>,
  register: RegisterTest,
): void {
  const sessions = new Map<Device, Promise<GPTSession>>();
  const sessionOn = (device: Device) => {
    let s = sessions.get(device);
    if (s === undefined) {
      s = GPTSession.create(TINY, { device, executable: tinyExecutable() });
      sessions.set(device, s);
    }
    return s;
  };
  const test = (name: string, fn: (session: GPTSession) => Promise<void>) =>
    register(
      `${deviceName}: gpt ${name}`,
      async () => await fn(await sessionOn(await getDevice())),
    );

  test("logits match the reference after prefill and 8 decode steps, prompts of 1, 7 and 64 tokens, one VM", async (s) => {
    const runs = await checkAgainstReference(s);
    // The three runs reuse one VM: its memory pool serves them without growing.
    const before = s.vm.memory_stats(s.device).allocatedBytes;
    s.reset();
    await s.prefill(prompt(64));
    for (const t of runs[2]) await s.decode(t);
    assertEquals(s.vm.memory_stats(s.device).allocatedBytes, before);
  });

  test("decode_n generates greedily the tokens the token-by-token path generates", async (s) => {
    for (const n of [1, 7]) {
      s.reset();
      const expected = await s.generate(prompt(n, 1), 9);
      s.reset();
      const first = argmax(await s.prefill(prompt(n, 1)));
      assertEquals(first, expected[0]);
      const rest = await s.decodeN(first, 8);
      assertEquals([first, ...rest], expected, `prompt of ${n}`);
      assertEquals(s.position, n + 8);
      // The caches hold the same rows: the next step's logits agree with the host path's.
      const after = await s.decode(rest[7]);
      s.reset();
      await s.prefill(prompt(n, 1));
      let logits: Float32Array = new Float32Array(0);
      for (const t of [first, ...rest]) logits = await s.decode(t);
      assertEquals(argmax(after), argmax(logits));
    }
  });

  test("decode_n samples with top-p on the device as the host sampler does", async (s) => {
    const uniforms = [0.12, 0.55, 0.93, 0.31, 0.74, 0.22, 0.86, 0.47, 0.63];
    for (const [temperature, topP] of [[0.8, 0.9], [1.2, 1]]) {
      s.reset();
      let i = 0;
      const expected = await s.generate(prompt(7, 2), 9, {
        temperature,
        topP,
        random: () => uniforms[i++],
      });
      s.reset();
      const logits = await s.prefill(prompt(7, 2));
      const first = pick(logits, { temperature, topP, random: () => uniforms[0] });
      const rest = await s.decodeN(first, 8, { temperature, topP, uniforms: uniforms.slice(1) });
      assertEquals([first, ...rest], expected, `temperature ${temperature}, top_p ${topP}`);
    }
  });

  test("a prompt past the context is refused before anything runs", async (s) => {
    s.reset();
    await s.prefill(prompt(TINY.context - 2));
    let error: unknown;
    try {
      await s.decodeN(1, 3);
    } catch (e) {
      error = e;
    }
    assert(error instanceof RangeError && error.message.includes("context of 128"), `${error}`);
    assertEquals(s.position, TINY.context - 2);
    await s.decodeN(1, 2); // exactly full
    assertEquals(s.position, TINY.context);
  });
}

/**
 * `GPTSession`: the host side of the decoder, what an application calls.
 * It loads the weights through the program's `load_params` (a tensor cache,
 * as a compiled model's weights are loaded), creates the KV caches once,
 * and runs `prefill`, `decode` and `decode_n` on one VM. Generation loops
 * (`generate`) sample on the host from the logits of each step, one read
 * back per token, or on the device with `decode_n`, one read back per N
 * tokens.
 *
 * @module
 */

import {
  type AttentionKVCache,
  type Device,
  type Executable,
  getGlobalFunc,
  type NDArray,
  preferredDevice,
  tensor,
  VirtualMachine,
} from "../../mod.ts";
import type { GPTConfig } from "./config.ts";
import { buildGPT } from "./program.ts";
import { encodeWeights, makeWeights, publishInMemory } from "./weights.ts";

/** Options of `GPTSession.create`. */
export interface GPTSessionOptions {
  /**
   * Where the model runs; default `preferredDevice()`: WebGPU on a hardware adapter, the CPU on a
   * software one (slower than the CPU kernels) or none.
   */
  device?: Device;
  /** The executable; default `buildGPT(config)` (build it once to share it between sessions). */
  executable?: Executable;
  /** A tensor cache to load (URL or path); default: the seeded weights, published in memory. */
  weights?: string;
  /** Seed of the generated weights (when `weights` is absent); default 1. */
  seed?: number;
  /** The VM's dispatch mode; default `"interpret"`. */
  mode?: "interpret" | "compiled";
}

/** How `generate` picks each next token from the logits. */
export interface SamplingOptions {
  /** 0 (default): greedy. Otherwise logits are divided by it before top-p sampling. */
  temperature?: number;
  /** Nucleus mass for top-p sampling; default 1 (plain sampling). */
  topP?: number;
  /** The random numbers in [0, 1), one per token; default `Math.random`. */
  random?: () => number;
}

/**
 * A model loaded on a device, with its KV caches and the number of tokens they hold.
 *
 * @example Generate greedily from a prompt of token ids (the weights are seeded random numbers)
 * ```ts
 * import { argmax, GPTSession, TINY } from "@relaxvm/relaxvm/models";
 * import { assertEquals } from "@std/assert";
 *
 * const session = await GPTSession.create(TINY);
 * let logits = await session.prefill([1, 2, 3]);
 * const generated: number[] = [];
 * for (let i = 0; i < 4; i++) {
 *   generated.push(argmax(logits));
 *   logits = await session.decode(generated[i]);
 * }
 * assertEquals(generated.length, 4);
 * session.dispose();
 * ```
 */
export class GPTSession {
  /** The configuration. */
  readonly config: GPTConfig;
  /** The VM running the program. */
  readonly vm: VirtualMachine;
  /** Where the model runs. */
  readonly device: Device;
  readonly #params: NDArray[];
  readonly #caches: AttentionKVCache[];
  #position = 0;

  private constructor(
    config: GPTConfig,
    vm: VirtualMachine,
    params: NDArray[],
    caches: AttentionKVCache[],
  ) {
    this.config = config;
    this.vm = vm;
    this.device = vm.devices[0];
    this.#params = params;
    this.#caches = caches;
  }

  /** Builds (or takes) the executable, loads the weights on `device` and creates the caches. */
  static async create(config: GPTConfig, options: GPTSessionOptions = {}): Promise<GPTSession> {
    const device = options.device ?? (await preferredDevice()).device;
    const ex = options.executable ?? buildGPT(config);
    let url = options.weights, revoke = () => {};
    let granted = url === undefined ? [] : [url];
    if (url === undefined) {
      const published = publishInMemory(
        await encodeWeights(config, makeWeights(config, options.seed ?? 1)),
      );
      url = published.url;
      granted = published.urls;
      revoke = published.revoke;
    }
    // The program loads its weights itself: the VM grants it exactly where they are.
    const mode = options.mode ?? "interpret";
    const vm = new VirtualMachine(ex, device, { mode, tensorCacheRoots: granted });
    try {
      const params = await vm.invoke("load_params", url, device.deviceType, device.id) as NDArray[];
      const caches = await vm.invoke("create_kv_caches") as AttentionKVCache[];
      return new GPTSession(config, vm, params, caches);
    } finally {
      revoke();
    }
  }

  /** Tokens in the KV caches: the position of the next token. */
  get position(): number {
    return this.#position;
  }

  /** Empties the KV caches (their memory is kept) to start a new sequence. */
  reset(): void {
    getGlobalFunc("vm.builtin.attention_kv_cache_array_clear")!(this.#caches);
    this.#position = 0;
  }

  /** Runs `tokens` after the cached ones; resolves to the logits of the last one. */
  async prefill(tokens: readonly number[]): Promise<Float32Array> {
    using logits = await this.prefillOnDevice(tokens);
    return await logits.data() as Float32Array;
  }

  /** `prefill`, leaving the logits `[1, vocab]` on the device (the caller disposes them). */
  async prefillOnDevice(tokens: readonly number[]): Promise<NDArray> {
    this.#reserve(tokens.length);
    using ids = tensor(Int32Array.from(tokens), { dtype: "int32" });
    const [logits] = await this.vm.invoke("prefill", ids, this.#caches, this.#params) as [NDArray];
    this.#position += tokens.length;
    return logits;
  }

  /** Runs one more token; resolves to its logits. */
  async decode(token: number): Promise<Float32Array> {
    using logits = await this.decodeOnDevice(token);
    return await logits.data() as Float32Array;
  }

  /** `decode`, leaving the logits `[1, vocab]` on the device (the caller disposes them). */
  async decodeOnDevice(token: number): Promise<NDArray> {
    this.#reserve(1);
    using id = tensor([token], { dtype: "int32" });
    const [logits] = await this.vm.invoke("decode", id, this.#caches, this.#params) as [NDArray];
    this.#position += 1;
    return logits;
  }

  /**
   * Generates `n` tokens after `token` in one VM call (`decode_n`): each is
   * chosen on the device and fed to the next step there; only the `n` ids
   * are read back. `uniforms` (n numbers in [0, 1); default `Math.random()`)
   * drive top-p sampling when `temperature` is not 0.
   */
  async decodeN(
    token: number,
    n: number,
    { temperature = 0, topP = 1, uniforms }: {
      temperature?: number;
      topP?: number;
      uniforms?: readonly number[];
    } = {},
  ): Promise<Int32Array> {
    this.#reserve(n);
    const u = uniforms ?? Array.from({ length: n }, () => (temperature === 0 ? 0 : Math.random()));
    if (u.length !== n) throw new RangeError(`decodeN: ${u.length} uniforms for ${n} tokens`);
    using id = tensor([token], { dtype: "int32" });
    using samples = tensor(Float32Array.from(u), { device: this.device });
    const [ids] = await this.vm.invoke(
      "decode_n",
      id,
      this.#caches,
      this.#params,
      samples,
      temperature,
      topP,
    ) as [NDArray];
    this.#position += n;
    try {
      return await ids.data() as Int32Array;
    } finally {
      ids.dispose();
    }
  }

  /**
   * Prefills `prompt`, then generates `n` tokens, choosing each on the host
   * from the logits of the step before (one read back per token), and calls
   * `onToken` with each as it comes. Resolves to the generated ids.
   */
  async generate(
    prompt: readonly number[],
    n: number,
    sampling: SamplingOptions = {},
    onToken?: (id: number) => void,
  ): Promise<number[]> {
    const out: number[] = [];
    let logits = await this.prefill(prompt);
    for (let i = 0; i < n; i++) {
      const id = pick(logits, sampling);
      out.push(id);
      onToken?.(id);
      if (i + 1 < n) logits = await this.decode(id);
    }
    return out;
  }

  /**
   * Releases the caches and parameters held for the session, and the VM it made: the VM's tensor
   * cache holds the weights (and, on the CPU, their copies in the kernels' memory) until then.
   */
  dispose(): void {
    for (const c of this.#caches) c.dispose();
    for (const p of this.#params) p.dispose();
    this.vm.dispose();
  }

  #reserve(tokens: number): void {
    if (this.#position + tokens > this.config.context) {
      throw new RangeError(
        `${this.config.name}: ${this.#position} cached + ${tokens} new tokens exceed the context of ${this.config.context}`,
      );
    }
  }
}

/** The index of the largest logit (the lowest index among equals). */
export function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/**
 * The next token from one row of logits: greedy at temperature 0, else
 * `sample_top_p_from_prob` over `softmax(logits / temperature)` (TVM's
 * sampling builtins, run on the host).
 */
export function pick(logits: Float32Array, sampling: SamplingOptions = {}): number {
  const temperature = sampling.temperature ?? 0;
  if (temperature === 0) return argmax(logits);
  using probs = tensor(logits.slice(), { shape: [1, logits.length] });
  getGlobalFunc("vm.builtin.apply_softmax_with_temperature")!(probs, temperature);
  const u = (sampling.random ?? Math.random)();
  return getGlobalFunc("vm.builtin.sample_top_p_from_prob")!(
    probs,
    sampling.topP ?? 1,
    u,
  ) as number;
}

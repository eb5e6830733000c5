/**
 * The decoder of models/gpt as an ONNX graph, from the same weight arrays,
 * for onnxruntime: what a user exporting this model from PyTorch would
 * hand to onnxruntime-web. One graph does prefill and decode: it runs `n`
 * tokens after the `past` cached ones, with past keys and values as inputs
 * and present ones (past + this call's) as outputs.
 *
 * The model's math exactly as models/gpt/program.ts writes it: token plus
 * position embedding; per block `LayerNormalization` (ε from the config),
 * q/k/v projections, attention over the cache scaled by 1/√head size with
 * the causal mask, output projection, residual, `LayerNormalization`, MLP
 * with the exact (erf) GELU, residual; the final layer norm of the last
 * position and the tied output projection through the token embedding.
 * Every linear is `Gemm(x, W, b, transB = 1)` on the weight as stored,
 * `[out, in]`, so the tied embedding is one initializer read by both
 * `Gather` and the last `Gemm`. (`linearOp = "MatMul"` writes each linear
 * as PyTorch's exporter does for 3-D inputs instead, `MatMul` by a
 * transposed copy and `Add`: slower in onnxruntime-web here, kept to show
 * it.) GELU is written as PyTorch exports it, `x · 0.5 · (1 + erf(x /
 * √2))`, the pattern onnxruntime's optimizer fuses into one Gelu.
 *
 * Inputs: `tokens`, `positions` (int64 `[n]`), `mask` (float `[n, past +
 * n]`, 0 where query i may see key j, -1e9 where not), `past_key_<l>`,
 * `past_value_<l>` (`[heads, past, head size]`). Outputs: `logits` `[1,
 * vocab]` and `present_key_<l>`, `present_value_<l>` (`[heads, past + n,
 * head size]`).
 *
 * @module
 */

import { type GPTConfig, headSize } from "../models/gpt/config.ts";
import { BlockParam, layerBase, paramSpecs } from "../models/gpt/weights.ts";
import {
  type Attribute,
  ElemType,
  type Field,
  Float,
  floatTensor,
  int64Tensor,
  model,
  node,
  valueInfo,
} from "./_onnx_writer.ts";

/** The ONNX model of `c` with `weights` (in cache order, models/gpt/weights.ts). */
export function gptOnnxModel(
  c: GPTConfig,
  weights: readonly Float32Array[],
  linearOp: "Gemm" | "MatMul" = "Gemm",
): Uint8Array {
  const specs = paramSpecs(c);
  if (weights.length !== specs.length) throw new RangeError("one array per parameter expected");
  const H = c.heads, Dh = headSize(c), D = c.dModel;
  const nodes: Field[][] = [];
  const initializers: Field[][] = [];
  const used = new Set<number>();
  let fresh = 0;
  /** Appends a node; returns its (first) output's name. */
  const op = (type: string, inputs: string[], attrs: Record<string, Attribute> = {}) => {
    const out = `t${fresh++}`;
    nodes.push(node(type, inputs, [out], attrs));
    return out;
  };
  const scalar = (name: string, v: number) => {
    initializers.push(floatTensor(name, [], new Float32Array([v])));
    return name;
  };
  const ints = (name: string, v: number[]) => {
    initializers.push(int64Tensor(name, [v.length], v));
    return name;
  };
  /** Parameter `i` as stored; its initializer is written once, if some node reads it. */
  const w = (i: number) => {
    if (!used.has(i)) initializers.push(floatTensor(`w${i}`, specs[i].shape, weights[i]));
    used.add(i);
    return `w${i}`;
  };
  const transposed = new Set<number>();
  /** `x Wᵀ + b`: one Gemm on W as stored, or MatMul by a transposed copy (`wT<i>`) and Add. */
  const linear = (x: string, wi: number, bi: number | null) => {
    if (linearOp === "Gemm") {
      return op("Gemm", bi === null ? [x, w(wi)] : [x, w(wi), w(bi)], { transB: 1 });
    }
    if (!transposed.has(wi)) {
      transposed.add(wi);
      const [rows, cols] = specs[wi].shape, t = new Float32Array(rows * cols), src = weights[wi];
      for (let r = 0; r < rows; r++) {
        for (let k = 0; k < cols; k++) t[k * rows + r] = src[r * cols + k];
      }
      initializers.push(floatTensor(`wT${wi}`, [cols, rows], t));
    }
    const y = op("MatMul", [x, `wT${wi}`]);
    return bi === null ? y : op("Add", [y, w(bi)]);
  };
  const layerNorm = (x: string, gamma: number) =>
    op("LayerNormalization", [x, w(gamma), w(gamma + 1)], { axis: -1, epsilon: new Float(c.eps) });

  const headsShape = ints("heads_shape", [-1, H, Dh]);
  const flatShape = ints("flat_shape", [-1, D]);
  const scale = scalar("scale", 1 / Math.sqrt(Dh));
  const sqrt2 = scalar("sqrt2", Math.SQRT2), one = scalar("one", 1), half = scalar("half", 0.5);
  /** `[n, D]` → `[H, n, Dh]`. */
  const heads = (t: string) =>
    op("Transpose", [op("Reshape", [t, headsShape])], { perm: [1, 0, 2] });

  let x = op("Add", [op("Gather", [w(0), "tokens"]), op("Gather", [w(1), "positions"])]);
  const outputs: Field[][] = [valueInfo("logits", [1, c.vocab])];
  const inputs: Field[][] = [
    valueInfo("tokens", ["n"], ElemType.int64),
    valueInfo("positions", ["n"], ElemType.int64),
    valueInfo("mask", ["n", "total"]),
  ];
  for (let l = 0; l < c.layers; l++) {
    const p = layerBase(l);
    const h = layerNorm(x, p + BlockParam.ln1Gamma);
    const q = heads(linear(h, p + BlockParam.wq, p + BlockParam.bq));
    const k = heads(linear(h, p + BlockParam.wk, p + BlockParam.bk));
    const v = heads(linear(h, p + BlockParam.wv, p + BlockParam.bv));
    nodes.push(node("Concat", [`past_key_${l}`, k], [`present_key_${l}`], { axis: 1 }));
    nodes.push(node("Concat", [`past_value_${l}`, v], [`present_value_${l}`], { axis: 1 }));
    for (const kind of ["key", "value"]) {
      inputs.push(valueInfo(`past_${kind}_${l}`, [H, "past", Dh]));
      outputs.push(valueInfo(`present_${kind}_${l}`, [H, "total", Dh]));
    }
    const keysT = op("Transpose", [`present_key_${l}`], { perm: [0, 2, 1] });
    const scores = op("Add", [op("Mul", [op("MatMul", [q, keysT]), scale]), "mask"]);
    const attended = op("MatMul", [op("Softmax", [scores], { axis: -1 }), `present_value_${l}`]);
    const merged = op("Reshape", [op("Transpose", [attended], { perm: [1, 0, 2] }), flatShape]);
    x = op("Add", [x, linear(merged, p + BlockParam.wo, p + BlockParam.bo)]);
    const up = linear(
      layerNorm(x, p + BlockParam.ln2Gamma),
      p + BlockParam.wFc,
      p + BlockParam.bFc,
    );
    const erf = op("Add", [op("Erf", [op("Div", [up, sqrt2])]), one]);
    const act = op("Mul", [op("Mul", [up, erf]), half]);
    x = op("Add", [x, linear(act, p + BlockParam.wProj, p + BlockParam.bProj)]);
  }
  const last = op("Slice", [
    x,
    ints("last_start", [-1]),
    ints("last_end", [2 ** 30]),
    ints("axis0", [0]),
  ]);
  const h = layerNorm(last, specs.length - 2);
  nodes.push(node("Identity", [linear(h, 0, null)], ["logits"]));
  return model({ name: `gpt_${c.name}`, nodes, initializers, inputs, outputs });
}

/** The additive causal mask of `n` queries after `past` cached keys, `[n, past + n]`. */
export function causalMask(n: number, past: number): Float32Array {
  const total = past + n;
  return Float32Array.from(
    { length: n * total },
    (_, e) => e % total > Math.floor(e / total) + past ? -1e9 : 0,
  );
}

/** How `OrtGPT.create` configures onnxruntime-web. */
export interface OrtGPTOptions {
  /** WebAssembly threads (`ort.env.wasm.numThreads`); default 1. */
  threads?: number;
  /** `graphOptimizationLevel`; default `"all"`. */
  optimization?: "disabled" | "basic" | "extended" | "all";
  /** How each linear is written (see `gptOnnxModel`); default `"Gemm"`. */
  linearOp?: "Gemm" | "MatMul";
}

/** The ONNX decoder in an onnxruntime session, with its KV caches. */
export class OrtGPT {
  readonly config: GPTConfig;
  // deno-lint-ignore no-explicit-any -- the peers are untyped (bench/_peer.ts)
  readonly #ort: any;
  // deno-lint-ignore no-explicit-any
  readonly #session: any;
  // deno-lint-ignore no-explicit-any
  #caches: any[] = [];
  #position = 0;

  // deno-lint-ignore no-explicit-any
  private constructor(config: GPTConfig, ort: any, session: any) {
    this.config = config;
    this.#ort = ort;
    this.#session = session;
    this.reset();
  }

  /**
   * A session of onnxruntime-web (`ort`, already imported) on the
   * WebAssembly execution provider. Deno's `Worker` is put back afterwards:
   * onnxruntime-web replaces it.
   */
  static async create(
    // deno-lint-ignore no-explicit-any
    ort: any,
    config: GPTConfig,
    weights: readonly Float32Array[],
    options: OrtGPTOptions = {},
  ): Promise<OrtGPT> {
    ort.env.wasm.numThreads = options.threads ?? 1;
    ort.env.logLevel = "error";
    const worker = globalThis.Worker;
    const session = await ort.InferenceSession.create(
      gptOnnxModel(config, weights, options.linearOp),
      {
        executionProviders: ["wasm"],
        graphOptimizationLevel: options.optimization ?? "all",
      },
    );
    globalThis.Worker = worker;
    return new OrtGPT(config, ort, session);
  }

  /** Tokens in the caches. */
  get position(): number {
    return this.#position;
  }

  /** Empties the KV caches. */
  reset(): void {
    const c = this.config;
    const empty = () =>
      new this.#ort.Tensor("float32", new Float32Array(0), [c.heads, 0, headSize(c)]);
    this.#caches = Array.from({ length: 2 * c.layers }, empty);
    this.#position = 0;
  }

  /** Runs `tokens` after the cached ones; returns the last position's logits. */
  async forward(tokens: readonly number[]): Promise<Float32Array> {
    const ort = this.#ort, n = tokens.length, past = this.#position;
    const feeds: Record<string, unknown> = {
      tokens: new ort.Tensor("int64", BigInt64Array.from(tokens, BigInt), [n]),
      positions: new ort.Tensor(
        "int64",
        BigInt64Array.from({ length: n }, (_, i) => BigInt(past + i)),
        [n],
      ),
      mask: new ort.Tensor("float32", causalMask(n, past), [n, past + n]),
    };
    for (let l = 0; l < this.config.layers; l++) {
      feeds[`past_key_${l}`] = this.#caches[2 * l];
      feeds[`past_value_${l}`] = this.#caches[2 * l + 1];
    }
    const r = await this.#session.run(feeds);
    for (let l = 0; l < this.config.layers; l++) {
      this.#caches[2 * l] = r[`present_key_${l}`];
      this.#caches[2 * l + 1] = r[`present_value_${l}`];
    }
    this.#position += n;
    return await r.logits.getData() as Float32Array;
  }
}

/**
 * Sampling and logits processing from TVM's `lm_support.cc`: the steps an
 * LLM's decode loop runs on the host between two model calls. They read
 * float32 tensors (a GPU tensor is read back first, so those calls wait for
 * the GPU) and compute in float32 as TVM does (every intermediate rounded
 * with `Math.fround`), so they pick the same token for the same inputs.
 * The penalties and the softmax change their CPU tensor in place.
 *
 * ```text
 * sample_top_p_from_logits(logits, temperature, top_p, uniform) -> index
 * sample_top_p_from_prob(prob, top_p, uniform) -> index
 * multinomial_from_uniform(prob[batch, V], uniform[batch, 1]) -> indices[batch, 1]
 * apply_repetition_penalty(logits, token_ids, penalty)                      in place
 * apply_presence_and_frequency_penalty(logits, ids, freqs, presence, freq)  in place
 * apply_softmax_with_temperature(logits, temperature)                       in place
 * ```
 *
 * Ties between equal logits or probabilities go to the lower index (TVM's
 * `std::sort` leaves their order unspecified).
 *
 * @module
 */

import { cpu } from "../../devices/cpu_device.ts";
import { NDArray } from "../../devices/ndarray.ts";
import type { TypedArray } from "../../ground/dtype.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { checkWritable, tensorArg } from "../validate.ts";
import { runningLimit, withHostScratch } from "../host_scratch.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const samplingBuiltins = new BuiltinTable("Sampling", import.meta.url);

const f32 = Math.fround;

function numberArg(v: unknown, what: string, who: string): number {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  throw new TypeError(`${who}: ${what} must be a number, got ${describe(v)}`);
}

/** A tensor's elements on the host: a view on the CPU, a read-back copy from a GPU. */
function hostValues<T>(t: NDArray, use: (values: TypedArray) => T): T | Promise<T> {
  return t.device.kind === "cpu" ? use(t.cpuView()) : t.data().then(use);
}

/** The last axis of a tensor whose other axes are all 1 (one distribution). */
function singleRow(t: NDArray, who: string): number {
  if (t.shape.length === 0 || t.shape.slice(0, -1).some((d) => d !== 1)) {
    throw new RangeError(
      `${who}: expected one row (every axis but the last of extent 1), got shape [${
        t.shape.join(", ")
      }]`,
    );
  }
  return t.shape[t.shape.length - 1];
}

function onCpu(t: NDArray, who: string, what: string): void {
  if (t.device.kind !== "cpu") {
    throw new TypeError(`${who}: ${what} must be on the CPU (it is changed in place), got ${t}`);
  }
}

/** Indices 0..n-1 of `values` sorted by value, largest first, ties by index. */
function sortedDescending(values: ArrayLike<number>, keep: (i: number) => boolean): number[] {
  const order: number[] = [];
  for (let i = 0; i < values.length; i++) if (keep(i)) order.push(i);
  return order.sort((a, b) => values[b] - values[a] || a - b);
}

samplingBuiltins.add(
  "vm.builtin.sample_top_p_from_logits",
  (logits: unknown, temperature: unknown, topP: unknown, uniform: unknown) => {
    const who = "sample_top_p_from_logits";
    const t = tensorArg(logits, "logits", who, "float32");
    const v = singleRow(t, who);
    const temp = numberArg(temperature, "temperature", who);
    const p = numberArg(topP, "top_p", who), u = numberArg(uniform, "uniform", who);
    // The sort and its two arrays of numbers: about 32 bytes an element (issue 18: 4.4 GB).
    const limit = runningLimit();
    return hostValues(t, (values) =>
      withHostScratch(32 * v, who, () => {
        const order = sortedDescending(values.subarray(0, v) as Float32Array, () => true);
        if (temp < 1e-6) return order[0];
        const scale = f32(1 / temp), max = values[order[0]] as number;
        const e = order.map((i) => f32(Math.exp(f32(f32((values[i] as number) - max) * scale))));
        let sum = 0;
        for (const x of e) sum = f32(sum + x);
        let cum = 0, nucleus = 0;
        const cums = e.map((x) => {
          const prob = f32(x / sum);
          if (cum < p) nucleus = f32(nucleus + prob);
          cum = f32(cum + prob);
          return cum;
        });
        for (let k = 0; k < order.length; k++) if (u < f32(cums[k] / nucleus)) return order[k];
        if (u <= cums[0]) return order[0];
        throw new RangeError(`${who}: uniform sample ${u} is beyond the distribution`);
      }, limit));
  },
  {
    signature: "(logits, temperature, top_p, uniform) → index",
    summary:
      "Samples a token index from one row of float32 logits: softmax at `temperature` over the logits sorted largest first, keep the smallest prefix whose mass reaches `top_p` (the nucleus), and return the first index whose cumulative probability, renormalized to the nucleus, exceeds `uniform` (a random number in [0, 1) the caller draws). A temperature below 1e-6 returns the argmax.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not a float32 tensor, arguments not numbers), `RangeError` (more than one row; `uniform` beyond the distribution, e.g. 1).",
    tvm: "vm.builtin.sample_top_p_from_logits (lm_support.cc)",
  },
);

samplingBuiltins.add(
  "vm.builtin.sample_top_p_from_prob",
  (prob: unknown, topP: unknown, uniform: unknown) => {
    const who = "sample_top_p_from_prob";
    const t = tensorArg(prob, "prob", who, "float32");
    const v = singleRow(t, who);
    const p = numberArg(topP, "top_p", who), u = numberArg(uniform, "uniform", who);
    const limit = runningLimit();
    return hostValues(t, (all) =>
      withHostScratch(24 * v, who, () => {
        const values = all.subarray(0, v) as Float32Array;
        const attempt = (cutoff: number): number => {
          const order = sortedDescending(values, (i) => values[i] >= cutoff);
          if (order.length === 0) return -1;
          if (u < values[order[0]] / p) return order[0];
          let cum = 0, nucleus = 0;
          const stored = order.map((i) => values[i]);
          for (let k = 0; k < order.length && cum < p; k++) {
            nucleus = f32(nucleus + values[order[k]]);
            cum = f32(cum + values[order[k]]);
            stored[k] = cum;
          }
          if (cum < p && cutoff !== 0) return -1; // not enough mass above the cutoff
          for (let k = 0; k < order.length; k++) if (u < f32(stored[k] / nucleus)) return order[k];
          return order[order.length - 1];
        };
        const first = p < 1 ? attempt(f32(p / 1024)) : -1;
        const found = first >= 0 ? first : attempt(0);
        if (found >= 0) return found;
        throw new RangeError(
          values.every(Number.isNaN)
            ? `${who}: every probability is NaN, cannot sample`
            : `${who}: cannot sample from the given probabilities`,
        );
      }, limit));
  },
  {
    signature: "(prob, top_p, uniform) → index",
    summary:
      "Samples a token index from one row of float32 probabilities (say, from `apply_softmax_with_temperature`) with nucleus (top-p) sampling and the caller's random number `uniform` in [0, 1). As TVM, it first tries only the probabilities of at least `top_p / 1024` and returns the argmax at once when `uniform < max / top_p`; NaN probabilities never qualify.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not a float32 tensor), `RangeError` (more than one row; every probability NaN).",
    tvm: "vm.builtin.sample_top_p_from_prob (lm_support.cc)",
  },
);

samplingBuiltins.add("vm.builtin.multinomial_from_uniform", (prob: unknown, uniform: unknown) => {
  const who = "multinomial_from_uniform";
  const pt = tensorArg(prob, "prob", who, "float32");
  const ut = tensorArg(uniform, "uniform", who, "float32");
  if (pt.shape.length === 0) throw new RangeError(`${who}: prob must have at least one axis`);
  const batch = pt.shape.length === 1 ? 1 : pt.shape[0];
  const v = pt.shape[pt.shape.length - 1];
  if (batch * v !== pt.size || ut.size !== batch) {
    throw new RangeError(
      `${who}: expected prob [batch, V] and uniform [batch, 1], got [${pt.shape.join(", ")}] and [${
        ut.shape.join(", ")
      }]`,
    );
  }
  // Allocated before any wait, so the running VM's allocator counts it.
  const out = NDArray.empty([batch, 1], "int64", cpu());
  const sample = (p: TypedArray, u: TypedArray) => {
    const indices = out.cpuView() as BigInt64Array;
    for (let b = 0; b < batch; b++) {
      let cum = 0, index = 0;
      for (let j = 0; j < v; j++) {
        index = j;
        cum = f32(cum + (p[b * v + j] as number));
        if (cum > (u[b] as number)) break;
      }
      indices[b] = BigInt(index);
    }
    return out;
  };
  if (pt.device.kind === "cpu" && ut.device.kind === "cpu") {
    return sample(pt.cpuView(), ut.cpuView());
  }
  return Promise.all([pt.data(), ut.data()]).then(([p, u]) => sample(p, u));
}, {
  signature: "(prob, uniform) → int64 CPU tensor [batch, 1]",
  summary:
    "For each row `b` of float32 probabilities `prob[batch, V]`, the first index whose cumulative probability exceeds `uniform[b, 0]` (strictly), or `V - 1` when none does. Returns a new int64 CPU tensor of shape `[batch, 1]`, wherever the inputs live.",
  dtypes: ["float32"],
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not float32 tensors), `RangeError` (shapes that do not pair one uniform sample with each row).",
  tvm: "vm.builtin.multinomial_from_uniform (lm_support.cc)",
});

samplingBuiltins.add(
  "vm.builtin.apply_repetition_penalty",
  (logits: unknown, tokenIds: unknown, penalty: unknown) => {
    const who = "apply_repetition_penalty";
    const l = tensorArg(logits, "logits", who, "float32");
    const ids = tensorArg(tokenIds, "token_ids", who, "int32");
    const factor = numberArg(penalty, "penalty", who);
    onCpu(l, who, "logits");
    onCpu(ids, who, "token_ids");
    checkWritable(l, who, "logits");
    const values = l.cpuView(), idView = ids.cpuView();
    const n = ids.shape.length === 0 ? 1 : ids.shape[ids.shape.length - 1];
    for (let i = 0; i < n; i++) {
      const t = tokenIndex(idView[i] as number, values.length, who);
      const x = values[t] as number;
      values[t] = x <= 0 ? x * factor : x / factor;
    }
    return null;
  },
  {
    signature: "(logits, token_ids, penalty) → null (logits changed in place)",
    summary:
      "For each token id in the int32 tensor `token_ids` (its last axis), in place: a logit `<= 0` is multiplied by `penalty`, a positive one divided by it (an id listed twice is penalized twice). Returns null.",
    dtypes: ["float32", "int32"],
    devices: ["cpu"],
    errors:
      "`TypeError` (logits not float32, ids not int32, either not on the CPU, logits a constant of the executable), `RangeError` (an id outside the logits).",
    tvm: "vm.builtin.apply_repetition_penalty (lm_support.cc); TVM does not check the ids' range",
  },
);

samplingBuiltins.add(
  "vm.builtin.apply_presence_and_frequency_penalty",
  (logits: unknown, tokenIds: unknown, tokenFreqs: unknown, presence: unknown, freq: unknown) => {
    const who = "apply_presence_and_frequency_penalty";
    const l = tensorArg(logits, "logits", who, "float32");
    const ids = tensorArg(tokenIds, "token_ids", who, "int32");
    const freqs = tensorArg(tokenFreqs, "token_freqs", who, "int32");
    const presencePenalty = numberArg(presence, "presence_penalty", who);
    const frequencyPenalty = numberArg(freq, "frequency_penalty", who);
    for (const [t, what] of [[l, "logits"], [ids, "token_ids"], [freqs, "token_freqs"]] as const) {
      onCpu(t, who, what);
    }
    checkWritable(l, who, "logits");
    const n = ids.shape.length === 0 ? 1 : ids.shape[ids.shape.length - 1];
    if (freqs.size < n) {
      throw new RangeError(`${who}: ${n} token ids but ${freqs.size} frequencies`);
    }
    const values = l.cpuView(), idView = ids.cpuView(), freqView = freqs.cpuView();
    for (let i = 0; i < n; i++) {
      const t = tokenIndex(idView[i] as number, values.length, who);
      values[t] = (values[t] as number) -
        ((freqView[i] as number) * frequencyPenalty + presencePenalty);
    }
    return null;
  },
  {
    signature:
      "(logits, token_ids, token_freqs, presence_penalty, frequency_penalty) → null (logits changed in place)",
    summary:
      "For each position `i` of the int32 tensors' last axis, in place: `logits[ids[i]] -= freqs[i] * frequency_penalty + presence_penalty` (OpenAI's definition). Returns null.",
    dtypes: ["float32", "int32"],
    devices: ["cpu"],
    errors:
      "`TypeError` (dtypes, not on the CPU, logits a constant of the executable), `RangeError` (an id outside the logits; fewer frequencies than ids).",
    tvm: "vm.builtin.apply_presence_and_frequency_penalty (lm_support.cc)",
  },
);

function tokenIndex(id: number, size: number, who: string): number {
  if (id < 0 || id >= size) {
    throw new RangeError(`${who}: token id ${id} is outside the ${size} logits`);
  }
  return id;
}

samplingBuiltins.add(
  "vm.builtin.apply_softmax_with_temperature",
  (logits: unknown, temperature: unknown) => {
    const who = "apply_softmax_with_temperature";
    const l = tensorArg(logits, "logits", who, "float32");
    onCpu(l, who, "logits");
    checkWritable(l, who, "logits");
    const inv = f32(1 / numberArg(temperature, "temperature", who));
    const values = l.cpuView() as Float32Array;
    const v = l.shape.length === 0 ? 1 : l.shape[l.shape.length - 1];
    for (let row = 0; row + v <= values.length && v > 0; row += v) {
      let m = -Infinity, d = 0;
      for (let i = row; i < row + v; i++) {
        const x = f32(values[i] * inv), previous = m;
        m = Math.max(m, x);
        d = d * f32(Math.exp(f32(previous - m))) + f32(Math.exp(f32(x - m)));
      }
      for (let i = row; i < row + v; i++) {
        values[i] = f32(Math.exp(f32(f32(values[i] * inv) - m))) / d;
      }
    }
    return null;
  },
  {
    signature: "(logits, temperature) → null (logits changed in place)",
    summary:
      "Replaces each row (last axis) of the float32 CPU tensor `logits` with `softmax(logits / temperature)`, in place, with TVM's one-pass (online) softmax in float32. Returns null. Deviations from TVM, which agree with it on ordinary logits: the running maximum starts at -Infinity where TVM starts at FLT_MIN (1.18e-38), so rows of very negative logits (below about -87) stay exact instead of losing precision or becoming NaN; and every row is normalized, where TVM treats the tensor as one row.",
    dtypes: ["float32"],
    devices: ["cpu"],
    errors: "`TypeError` (not float32, not on the CPU, a constant of the executable).",
    tvm: "vm.builtin.apply_softmax_with_temperature (lm_support.cc)",
  },
);

/**
 * Templates for choosing tokens on the GPU, so a decode loop can feed a
 * token to the next step without reading anything back: `argmax` along an
 * axis, and top-p (nucleus) sampling over rows of logits with a uniform
 * sample per row supplied by the host.
 *
 * Top-p without sorting. The CPU reference (kernels/cpu/sampling.ts) sorts
 * the weights `w_i = exp((x_i - max) / T)`; here one workgroup per row
 * finds the same elements by bisection over the weights' values (the bit
 * patterns of non-negative floats are ordered as the floats):
 *
 * 1. the row maximum and its first index (NaN skipped), and `Z = Σ w`;
 *    TVM's shortcut returns the maximum when `u < p_max / top_p`;
 * 2. the nucleus: the largest weight `τ` with `mass(w ≥ τ) ≥ top_p · Z`;
 *    the nucleus is everything above `τ` plus as many elements equal to `τ`
 *    (in index order) as it takes to reach `top_p · Z`;
 * 3. the sample: with `t = u · mass(nucleus)`, the largest weight `τ'` with
 *    `mass(w ≥ τ') > t`; the answer is the `j`-th element equal to `τ'` in
 *    index order, `j = ⌊(t - mass(w > τ')) / τ'⌋ + 1` (1 without ties).
 *
 * Each bisection takes 31 halvings of `[0, bits(1.0)]`, each a workgroup
 * sum. The weights are written to a scratch buffer once and re-read from
 * it; each thread only ever reads the elements it wrote, so no barrier is
 * needed for them. Loop counts do not depend on data, so every barrier is
 * in uniform control flow. Sums are float32 in a different order from the
 * CPU's, so a sample whose `u` falls within rounding of a boundary between
 * two tokens may differ between the devices; everywhere else they agree.
 *
 * @module
 */

import {
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";
import { groupReduceSource, isNanSource } from "./workgroup_reduce.ts";

/**
 * WGSL: `fn better(a, ia, b, ib) -> bool`, whether `(b, ib)` beats `(a, ia)`
 * for argmax: larger, or equal and earlier; with `nanWins`, NaN beats every
 * number (NumPy), else NaN never wins.
 */
function betterSource(type: string, nanWins: boolean): string {
  const nan = type === "f32";
  const rule = !nan
    ? "b > a || (b == a && ib < ia)"
    : nanWins
    ? "(is_nan(b) && (!is_nan(a) || ib < ia)) || (!is_nan(a) && (b > a || (b == a && ib < ia)))"
    : "!is_nan(b) && (is_nan(a) || b > a || (b == a && ib < ia))";
  return `fn better(a: ${type}, ia: u32, b: ${type}, ib: u32) -> bool { return ${rule}; }\n`;
}

/** WGSL: `fn groupArgmax(v, i, lid) -> u32` (the winning index) over a workgroup. */
function groupArgmaxSource(type: string): string {
  return `var<workgroup> argVals: array<${type}, ${WORKGROUP_SIZE}>;
var<workgroup> argIdx: array<u32, ${WORKGROUP_SIZE}>;
fn groupArgmax(v: ${type}, i: u32, lid: u32) -> u32 {
  argVals[lid] = v;
  argIdx[lid] = i;
  workgroupBarrier();
  for (var s = ${WORKGROUP_SIZE / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s && better(argVals[lid], argIdx[lid], argVals[lid + s], argIdx[lid + s])) {
      argVals[lid] = argVals[lid + s];
      argIdx[lid] = argIdx[lid + s];
    }
    workgroupBarrier();
  }
  let r = argIdx[0];
  workgroupBarrier();
  return r;
}
`;
}

/** Sizes and element offsets of one argmax. */
export interface ArgmaxArgs {
  /** `x` viewed as `[outer, n, inner]`, reduced over `n` (> 0). */
  outer: number;
  n: number;
  inner: number;
  /** WGSL type of `x`. */
  type: "f32" | "i32" | "u32";
  /** Element offsets of x and the output. */
  offsets: readonly [number, number];
}

/** `out[o, i] = argmax_j x[o, j, i]`, one workgroup per output; bindings x, out (i32). */
export function argmaxProgram({ outer, n, inner, type, offsets }: ArgmaxArgs): Program {
  return {
    key: `argmax:${type}`,
    source: () =>
      storage(0, "x", type, false) + storage(1, "out", "i32", true) +
      uniformStruct(["outputs", "n", "inner", "offX", "offOut"], 2) + isNanSource() +
      betterSource(type, true) + groupArgmaxSource(type) + mainHeader(WORKGROUP_SIZE) + `
  let o = wg;
  if (o >= u.outputs) { return; }
  let base = u.offX + (o / u.inner) * u.n * u.inner + o % u.inner;
  var best = x[base];
  var at = 0u;
  for (var j = lid; j < u.n; j += ${WORKGROUP_SIZE}u) {
    let v = x[base + j * u.inner];
    if (j == lid || better(best, at, v, j)) {
      best = v;
      at = j;
    }
  }
  // Threads without an element bid the first one, which never beats a real bid.
  let winner = groupArgmax(best, at, lid);
  if (lid == 0u) { out[u.offOut + o] = i32(winner); }
}
`,
    inputs: 1,
    uniforms: new Uniforms().u32s([outer * inner, n, inner, ...offsets]).words(),
    workgroups: outer * inner,
  };
}

/** Sizes, parameters and element offsets of one top-p sampling. */
export interface SampleTopPArgs {
  /** Rows of logits, and their length. */
  rows: number;
  V: number;
  /** Below 1e-6: the first maximal logit. */
  temperature: number;
  /** Nucleus mass, in (0, 1]. */
  topP: number;
  /** Element offsets of the logits, the uniforms, the output and the scratch (`rows · V` floats). */
  offsets: readonly [number, number, number, number];
}

/** Top-p sampling; bindings logits, uniform, out (i32), scratch (f32, written). */
export function sampleTopPProgram(args: SampleTopPArgs): Program {
  const { rows, V, temperature, topP, offsets } = args;
  const greedy = temperature < 1e-6;
  return {
    key: "sample_top_p",
    source: sampleTopPSource,
    inputs: 2,
    outputs: 2,
    uniforms: new Uniforms()
      .u32s([rows, V, ...offsets, greedy ? 1 : 0])
      .f32(greedy ? 1 : Math.fround(1 / temperature))
      .f32(topP)
      .words(),
    workgroups: rows,
  };
}

function sampleTopPSource(): string {
  return storage(0, "x", "f32", false) + storage(1, "uni", "f32", false) +
    storage(2, "out", "i32", true) + storage(3, "w", "f32", true) +
    uniformStruct(["rows", "V", "offX", "offU", "offOut", "offW", "greedy", "invT", "topP"], 4) +
    isNanSource() + betterSource("f32", false) + groupArgmaxSource("f32") +
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n" +
    groupReduceSource("f32", WORKGROUP_SIZE, "groupSum", "add") + `
var<private> base: u32;
var<private> wBase: u32;
/** Mass of the weights at least tau (strict: above tau), summed over the workgroup. */
fn mass(tau: f32, strict: bool, lid: u32) -> f32 {
  var s = 0.0;
  for (var j = lid; j < u.V; j += ${WORKGROUP_SIZE}u) {
    let v = w[wBase + j];
    if (v > tau || (!strict && v == tau)) { s += v; }
  }
  return groupSum(s, lid);
}
/** Number of weights equal to tau, over the workgroup. */
fn ties(tau: f32, lid: u32) -> f32 {
  var s = 0.0;
  for (var j = lid; j < u.V; j += ${WORKGROUP_SIZE}u) { if (w[wBase + j] == tau) { s += 1.0; } }
  return groupSum(s, lid);
}
/** The largest bit pattern tau in [0, bits(1.0)] with mass(>= tau) >= goal (strict: >). */
fn search(goal: f32, strict: bool, lid: u32) -> f32 {
  var lo = 0u;
  var hi = 0x3f800000u;
  for (var it = 0u; it < 31u; it++) {
    let mid = (lo + hi + 1u) / 2u;
    let m = mass(bitcast<f32>(mid), false, lid);
    if (lo < hi) {
      if (m > goal || (!strict && m == goal)) { lo = mid; } else { hi = mid - 1u; }
    }
  }
  return bitcast<f32>(lo);
}
/** The index of the k-th (1-based) weight equal to tau, in index order (thread 0 only). */
fn nth(tau: f32, k: f32) -> u32 {
  var seen = 0.0;
  var last = 0u;
  for (var j = 0u; j < u.V; j++) {
    if (w[wBase + j] == tau) {
      seen += 1.0;
      last = j;
      if (seen >= k) { break; }
    }
  }
  return last;
}
` + mainHeader(WORKGROUP_SIZE) + `
  let row = wg;
  if (row >= u.rows) { return; }
  base = u.offX + row * u.V;
  wBase = u.offW + row * u.V;
  let invT = bitcast<f32>(u.invT);
  let topP = bitcast<f32>(u.topP);
  // 1. The maximum (NaN never wins; every thread's first bid is a real element).
  var best = x[base];
  var at = 0u;
  for (var j = lid; j < u.V; j += ${WORKGROUP_SIZE}u) {
    let v = x[base + j];
    if (j == lid || better(best, at, v, j)) {
      best = v;
      at = j;
    }
  }
  let top = groupArgmax(best, at, lid);
  let maxv = x[base + top];
  let valid = !is_nan(maxv);
  var result = top;
  // Branches on uniforms only, so the barriers inside stay in uniform control flow.
  if (u.greedy == 0u) {
    for (var j = lid; j < u.V; j += ${WORKGROUP_SIZE}u) {
      let v = x[base + j];
      w[wBase + j] = select(exp((v - maxv) * invT), 0.0, is_nan(v) || !valid);
    }
    // nth() below reads every thread's weights.
    storageBarrier();
    let Z = mass(0.0, false, lid);
    let uu = uni[u.offU + row];
    // 2. The nucleus: everything above tauP, and needP tied elements at tauP.
    var tauP = 0.0;
    var needP = 1.0;
    var nucleus = Z;
    if (topP < 1.0) {
      let goal = topP * Z;
      tauP = search(goal, false, lid);
      let gtP = mass(tauP, true, lid);
      let tiesP = ties(tauP, lid);
      needP = clamp(ceil((goal - gtP) / tauP), 1.0, max(tiesP, 1.0));
      nucleus = gtP + needP * tauP;
    }
    // 3. The sample.
    let t = uu * nucleus;
    let tauS = search(t, true, lid);
    let gtS = mass(tauS, true, lid);
    let tiesS = ties(tauS, lid);
    var k = clamp(floor((t - gtS) / tauS) + 1.0, 1.0, max(tiesS, 1.0));
    if (topP < 1.0 && tauS == tauP) { k = min(k, needP); }
    // The weight of the maximum is exp(0) = 1: TVM's shortcut is u < (1 / Z) / top_p.
    if (lid == 0u && valid && !(uu * topP * Z < 1.0)) { result = nth(tauS, k); }
  }
  if (lid == 0u) { out[u.offOut + row] = select(0, i32(result), valid); }
}

`;
}

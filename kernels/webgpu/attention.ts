/**
 * The attention templates (float32): the causal mask, and fused scaled
 * dot-product attention in one dispatch per call, in two variants that both
 * use an online softmax (as FlashAttention does): a running maximum `m`, a
 * running sum `l` of `exp(s - m)` and a running output, rescaled by
 * `exp(m_old - m_new)` whenever the maximum grows, so no score row is ever
 * stored whole and neither `Tk` nor memory limits the length.
 *
 * - Per thread (`threadSource`): each query row is one thread, which keeps
 *   its query and its output row (head sizes up to 128) in registers and
 *   walks its keys alone. No barriers and no workgroup memory; neighbouring
 *   threads are neighbouring queries of one head and read the same keys.
 * - Per workgroup (`groupSource`): each query row is a workgroup of 64
 *   threads, which takes the keys 64 at a time, one per thread: scores,
 *   tree reductions for the chunk's maximum and the sum of its weights, then
 *   each thread adds the weighted values of its output columns (every 64th)
 *   to the output row, which holds the running total. For few rows on a
 *   hardware GPU (a decode step: one query per head) and any head size.
 *
 * `attentionPerThread` chooses. Keys a causal row cannot see are never read;
 * where `D` and the offsets of `q` and `k` are multiples of 4 the scores read
 * `vec4`s, and the per-thread variant reads `v` and writes the output as
 * `vec4`s where `Dv` and their offsets allow. The uniformity rules of
 * `workgroup_reduce.ts` hold: the workgroup variant's chunk loop bounds
 * depend only on the workgroup id and uniforms.
 *
 * @module
 */

import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";
import type { AttentionGeometry } from "../attention_layout.ts";
import { groupReduceSource, isNanSource, nanMaxSource, NEG_INF_F32 } from "./workgroup_reduce.ts";

/** Shapes, options and element offsets of one attention call. */
export interface AttentionArgs {
  /** Where the rows of q, k, v and the output are (either layout). */
  geometry: AttentionGeometry;
  /** Scale of the scores. */
  scale: number;
  /** Query `i` sees keys `j <= i + causalOffset`; null: every key. */
  causalOffset: number | null;
  /** Element offsets of q, k, v and the output. */
  offsets: readonly [number, number, number, number];
  /** One thread per query row (`threadSource`) rather than a workgroup (`groupSource`). */
  perThread: boolean;
}

/** The largest head size the per-thread variant keeps in registers. */
const THREAD_MAX_D = 128;

/**
 * Whether a call gives each query row a thread rather than a workgroup:
 * when there are rows enough to fill workgroups of them (a prefill), and on
 * a fallback (software) adapter always. A software adapter such as Mesa
 * llvmpipe runs a workgroup's threads as SIMD loops on one CPU core, so the
 * workgroup variant's barriers cost more than its parallelism brings
 * (measured there, 6 heads × 64: a decode step over 256 keys 1.9 ms → 1.0,
 * over 2048 keys 9.9 → 2.7; a 64-token prefill 44 ms with the workgroup
 * variant's first version, 2.7 per thread). On a hardware GPU a decode step
 * has one query per head, and one thread walking every key alone would
 * leave the GPU idle. Head sizes above `THREAD_MAX_D` always use workgroups.
 */
export function attentionPerThread(
  rows: number,
  D: number,
  Dv: number,
  fallbackAdapter: boolean,
): boolean {
  return (rows >= WORKGROUP_SIZE || fallbackAdapter) && D <= THREAD_MAX_D && Dv <= THREAD_MAX_D;
}

/** Fused attention; bindings q, k, v, out. */
export function attentionProgram(args: AttentionArgs): Program {
  const { geometry: g, scale, causalOffset, offsets, perThread } = args;
  const { Tq, Tk, D, Dv } = g;
  const rows = g.batches * g.heads * Tq;
  const [offQ, offK, offV, offOut] = offsets;
  // q·k in vec4s when D and both offsets allow; v and out too (per-thread variant only).
  const qk4 = D % 4 === 0 && offQ % 4 === 0 && offK % 4 === 0;
  const vo4 = perThread && Dv % 4 === 0 && offV % 4 === 0 && offOut % 4 === 0;
  const qkLanes = qk4 ? 4 : 1, voLanes = vo4 ? 4 : 1;
  const fields = [
    "rows",
    "Tq",
    "Tk",
    "Dqk",
    "Dv",
    "offQ",
    "offK",
    "offV",
    "offOut",
    "causal",
    "offset",
    "scale",
    "H",
    ...["q", "k", "v", "o"].flatMap((t) => [`${t}B`, `${t}H`, `${t}T`]),
  ];
  const header = (qkType: string, voType: string) =>
    storage(0, "q", qkType, false) + storage(1, "k", qkType, false) +
    storage(2, "v", voType, false) + storage(3, "out", voType, true) +
    uniformStruct(fields, 4) + isNanSource() + nanMaxSource("maxNaN") +
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n" +
    `fn total(a: ${qkType}) -> f32 { return ${qk4 ? "a.x + a.y + a.z + a.w" : "a"}; }\n`;
  const qkType = qk4 ? "vec4<f32>" : "f32", voType = vo4 ? "vec4<f32>" : "f32";
  return {
    key: `attention:${perThread ? "thread" : "group"}:${qkType}:${voType}`,
    source: () =>
      header(qkType, voType) + (perThread ? threadSource(qkType, voType) : groupSource(qkType)),
    inputs: 3,
    uniforms: new Uniforms()
      .u32s([rows, Tq, Tk, D / qkLanes, Dv / voLanes, offQ / qkLanes, offK / qkLanes])
      .u32s([offV / voLanes, offOut / voLanes])
      .u32(causalOffset === null ? 0 : 1)
      .u32(causalOffset ?? 0)
      .f32(scale)
      .u32(g.heads)
      .u32s(g.q.map((x) => x / qkLanes))
      .u32s(g.k.map((x) => x / qkLanes))
      .u32s(g.v.map((x) => x / voLanes))
      .u32s(g.out.map((x) => x / voLanes))
      .words(),
    workgroups: perThread ? groupsFor(rows, WORKGROUP_SIZE) : rows,
  };
}

/** WGSL locating a row's query, keys, values and output, and its number of keys. */
const LOCATE = `
  let i = row % u.Tq;
  let head = (row / u.Tq) % u.H;
  let batch = row / (u.Tq * u.H);
  let qo = u.offQ + batch * u.qB + head * u.qH + i * u.qT;
  let ko = u.offK + batch * u.kB + head * u.kH;
  let vo = u.offV + batch * u.vB + head * u.vH;
  let oo = u.offOut + batch * u.oB + head * u.oH + i * u.oT;
  let scale = bitcast<f32>(u.scale);
  var keys = u.Tk;
  if (u.causal != 0u) { keys = min(u.Tk, i + u.offset + 1u); }
`;

/**
 * One workgroup per query row (few rows: a decode step). Keys go in chunks
 * of one per thread; per chunk, tree reductions give the maximum and the sum
 * of the weights, and each thread adds the weighted values of its columns
 * (every 64th) to the output row, which holds the running total.
 */
function groupSource(qkType: string): string {
  return groupReduceSource("f32", WORKGROUP_SIZE, "groupMax", "maxNaN") +
    groupReduceSource("f32", WORKGROUP_SIZE, "groupSum", "add") +
    `var<workgroup> weights: array<f32, ${WORKGROUP_SIZE}>;\n` + mainHeader(WORKGROUP_SIZE) + `
  let row = wg;
  if (row >= u.rows) { return; }${LOCATE}
  var m = ${NEG_INF_F32};
  var l = 0.0;
  for (var c0 = 0u; c0 < keys; c0 += ${WORKGROUP_SIZE}u) {
    let n = min(${WORKGROUP_SIZE}u, keys - c0);
    var s = ${NEG_INF_F32};
    if (lid < n) {
      let kr = ko + (c0 + lid) * u.kT;
      var a = ${qkType}(0.0);
      for (var d = 0u; d < u.Dqk; d++) { a += q[qo + d] * k[kr + d]; }
      s = total(a) * scale;
    }
    let mNew = maxNaN(m, groupMax(s, lid));
    let e = select(0.0, exp(s - mNew), lid < n);
    weights[lid] = e;
    // The sum's barriers also make every weight visible to every thread.
    let alpha = exp(m - mNew);
    l = l * alpha + groupSum(e, lid);
    for (var d = lid; d < u.Dv; d += ${WORKGROUP_SIZE}u) {
      var acc = 0.0;
      var vj = vo + c0 * u.vT + d;
      for (var j = 0u; j < n; j++) {
        acc += weights[j] * v[vj];
        vj += u.vT;
      }
      if (c0 == 0u) { out[oo + d] = acc; } else { out[oo + d] = out[oo + d] * alpha + acc; }
    }
    m = mNew;
    // The next chunk overwrites the weights.
    workgroupBarrier();
  }
  for (var d = lid; d < u.Dv; d += ${WORKGROUP_SIZE}u) { out[oo + d] = out[oo + d] / l; }
}
`;
}

/**
 * One thread per query row (many rows: a prefill). The row's query and its
 * running output stay in registers while the thread walks its keys with an
 * online softmax: no barriers, no workgroup memory, and neighbouring threads
 * (neighbouring queries of one head) read the same key and value rows.
 */
function threadSource(qkType: string, voType: string): string {
  const qLen = THREAD_MAX_D / (qkType === "f32" ? 1 : 4);
  const vLen = THREAD_MAX_D / (voType === "f32" ? 1 : 4);
  return mainHeader(WORKGROUP_SIZE) + `
  let row = wg * ${WORKGROUP_SIZE}u + lid;
  if (row >= u.rows) { return; }${LOCATE}
  var qr: array<${qkType}, ${qLen}>;
  for (var d = 0u; d < u.Dqk; d++) { qr[d] = q[qo + d]; }
  var acc: array<${voType}, ${vLen}>;
  var m = ${NEG_INF_F32};
  var l = 0.0;
  for (var j = 0u; j < keys; j++) {
    let kr = ko + j * u.kT;
    var a = ${qkType}(0.0);
    for (var d = 0u; d < u.Dqk; d++) { a += qr[d] * k[kr + d]; }
    let s = total(a) * scale;
    let mNew = maxNaN(m, s);
    let alpha = exp(m - mNew);
    let p = exp(s - mNew);
    l = l * alpha + p;
    let vr = vo + j * u.vT;
    for (var d = 0u; d < u.Dv; d++) { acc[d] = acc[d] * alpha + p * v[vr + d]; }
    m = mNew;
  }
  for (var d = 0u; d < u.Dv; d++) { out[oo + d] = acc[d] / l; }
}
`;
}

/** Element counts and offsets of one causal mask. */
export interface CausalMaskArgs {
  /** Elements of the tensor. */
  size: number;
  /** Rows and columns of the last two axes. */
  m: number;
  /** Columns. */
  n: number;
  /** Column `j` of row `i` is masked where `j > i + offset`. */
  offset: number;
  /** Element offsets of the input and the output. */
  offsets: readonly [number, number];
}

/** The causal mask; bindings x, out. */
export function causalMaskProgram({ size, m, n, offset, offsets }: CausalMaskArgs): Program {
  // Offsets beyond these bounds mask the same elements, and the clamped one fits an i32.
  const clamped = Math.max(-m, Math.min(n, offset));
  return {
    key: "causal_mask",
    source: () =>
      storage(0, "x", "f32", false) + storage(1, "out", "f32", true) +
      uniformStruct(["size", "m", "n", "offset", "offX", "offOut"], 2) +
      mainHeader(WORKGROUP_SIZE) +
      `
  let t = wg * ${WORKGROUP_SIZE}u + lid;
  if (t >= u.size) { return; }
  let j = t % u.n;
  let i = (t / u.n) % u.m;
  let masked = i32(j) > i32(i) + bitcast<i32>(u.offset);
  out[u.offOut + t] = select(x[u.offX + t], ${NEG_INF_F32}, masked);
}
`,
    inputs: 1,
    uniforms: new Uniforms().u32s([size, m, n, clamped, ...offsets]).words(),
    workgroups: groupsFor(size, WORKGROUP_SIZE),
  };
}

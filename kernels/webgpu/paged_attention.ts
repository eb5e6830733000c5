/**
 * The WebGPU templates of paged attention (float32), two dispatches per call:
 *
 * ```text
 * append   one thread per (token, KV head, feature): K and V from the fused qkv to
 *          the token's slot in the pages
 * attend   one thread per (token, query head): an online softmax (running maximum,
 *          sum and output, as kernels/webgpu/attention.ts's per-thread variant) over
 *          the keys of its sequence up to it, read from the pages through the slots
 * ```
 *
 * The attend dispatch has two forms. Where the head size and the offsets of qkv, the
 * pages and the output are multiples of 4, it is generated for the head size: the
 * query and the running output are `D / 4` named `vec4`s (registers), and keys and
 * values are read a `vec4` at a time. Otherwise the query and output are arrays
 * indexed in loops, read a float at a time. The software adapter (Mesa llvmpipe)
 * reads a storage buffer lane by lane in a loop, once per load whatever its width,
 * and keeps an array indexed at run time in memory: the `vec4` form makes a quarter
 * of the loads and none of the array traffic.
 *
 * The batch's layout goes up once per call as one u32 buffer, `seqs`: for each token
 * `t`, `seqs[2t]` is where its sequence's slots start in it and `seqs[2t + 1]` the
 * keys it sees (its position + 1); the slots follow. The append's writes are visible to
 * the attend dispatch after it (dispatches in one encoder run in order).
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
import type { PagedAttentionBatch } from "../kernel_backend.ts";
import { NEG_INF_F32 } from "./workgroup_reduce.ts";

/** The largest head size a thread keeps in registers. */
export const PAGED_MAX_HEAD_DIM = 128;

/** `seqs` for `batch`: per token its slot base and its number of keys, then the slots. */
export function pagedAttentionMeta(batch: PagedAttentionBatch): Uint32Array {
  const { rowIndptr, slotIndptr, slots } = batch;
  const T = rowIndptr[rowIndptr.length - 1];
  const seqs = new Uint32Array(2 * T + slots.length);
  for (let s = 0; s + 1 < rowIndptr.length; s++) {
    const rows = rowIndptr[s + 1] - rowIndptr[s];
    const past = slotIndptr[s + 1] - slotIndptr[s] - rows;
    for (let r = 0; r < rows; r++) {
      const t = rowIndptr[s] + r;
      seqs[2 * t] = 2 * T + slotIndptr[s];
      seqs[2 * t + 1] = past + r + 1;
    }
  }
  seqs.set(slots, 2 * T);
  return seqs;
}

const FIELDS = ["total", "rows", "H", "KH", "D", "P", "fused", "offQKV", "offPages", "offOut"];

/** Element offsets of qkv, the pages and the output. */
export type PagedOffsets = readonly [number, number, number];

function uniforms(batch: PagedAttentionBatch, T: number, offsets: PagedOffsets, scale: number) {
  const { numQoHeads: H, numKvHeads: KH, headDim: D, pageSize: P } = batch;
  return new Uniforms()
    .u32s([T * KH * D, T * H, H, KH, D, P, H + 2 * KH, ...offsets])
    .f32(scale)
    .words();
}

/** Writes each token's K and V to its slot; bindings qkv, seqs, pages (written). */
export function pagedAppendProgram(
  batch: PagedAttentionBatch,
  T: number,
  offsets: PagedOffsets,
): Program {
  return {
    key: "paged_attention:append",
    source: () =>
      storage(0, "qkv", "f32", false) + storage(1, "seqs", "u32", false) +
      storage(2, "pages", "f32", true) + uniformStruct([...FIELDS, "scale"], 3) +
      mainHeader(WORKGROUP_SIZE) + `
  let e = wg * ${WORKGROUP_SIZE}u + lid;
  if (e >= u.total) { return; }
  let d = e % u.D;
  let kh = (e / u.D) % u.KH;
  let t = e / (u.D * u.KH);
  let slot = seqs[seqs[2u * t] + seqs[2u * t + 1u] - 1u];
  let page = slot / u.P;
  let kAt = u.offPages + ((page * 2u * u.KH + kh) * u.P + slot % u.P) * u.D + d;
  let src = u.offQKV + (t * u.fused + u.H + kh) * u.D + d;
  pages[kAt] = qkv[src];
  pages[kAt + u.KH * u.P * u.D] = qkv[src + u.KH * u.D];
}
`,
    inputs: 2,
    uniforms: uniforms(batch, T, offsets, 1),
    workgroups: groupsFor(T * batch.numKvHeads * batch.headDim, WORKGROUP_SIZE),
  };
}

/** Whether the attend dispatch can take its `vec4` form (see the module's comment). */
export function pagedAttendVec4(batch: PagedAttentionBatch, offsets: PagedOffsets): boolean {
  return batch.headDim % 4 === 0 && offsets.every((o) => o % 4 === 0);
}

/**
 * Both attend forms' start: one thread a (token, query head) row, its query
 * head `h`, token `t`, key-value head `kh`, and the scale.
 */
const ATTEND_ROW = `
  let row = wg * ${WORKGROUP_SIZE}u + lid;
  if (row >= u.rows) { return; }
  let h = row % u.H;
  let t = row / u.H;
  let kh = h / (u.H / u.KH);
  let scale = bitcast<f32>(u.scale);
`;

/** Attention of each (token, query head); bindings qkv, pages, seqs, out. */
export function pagedAttendProgram(
  batch: PagedAttentionBatch,
  T: number,
  offsets: PagedOffsets,
  scale: number,
): Program {
  if (pagedAttendVec4(batch, offsets)) return pagedAttendVec4Program(batch, T, offsets, scale);
  const M = PAGED_MAX_HEAD_DIM;
  return {
    key: "paged_attention:attend",
    source: () =>
      storage(0, "qkv", "f32", false) + storage(1, "pages", "f32", false) +
      storage(2, "seqs", "u32", false) + storage(3, "out", "f32", true) +
      uniformStruct([...FIELDS, "scale"], 4) + mainHeader(WORKGROUP_SIZE) + ATTEND_ROW +
      `  let qo = u.offQKV + (t * u.fused + h) * u.D;
  var qr: array<f32, ${M}>;
  for (var d = 0u; d < u.D; d++) { qr[d] = qkv[qo + d]; }
  var acc: array<f32, ${M}>;
  var m = ${NEG_INF_F32};
  var l = 0.0;
  let base = seqs[2u * t];
  let keys = seqs[2u * t + 1u];
  for (var j = 0u; j < keys; j++) {
    let slot = seqs[base + j];
    let kr = u.offPages + (((slot / u.P) * 2u * u.KH + kh) * u.P + slot % u.P) * u.D;
    var a = 0.0;
    for (var d = 0u; d < u.D; d++) { a += qr[d] * pages[kr + d]; }
    let s = a * scale;
    let mNew = max(m, s);
    let alpha = exp(m - mNew);
    let p = exp(s - mNew);
    l = l * alpha + p;
    let vr = kr + u.KH * u.P * u.D;
    for (var d = 0u; d < u.D; d++) { acc[d] = acc[d] * alpha + p * pages[vr + d]; }
    m = mNew;
  }
  let oo = u.offOut + row * u.D;
  for (var d = 0u; d < u.D; d++) { out[oo + d] = acc[d] / l; }
}
`,
    inputs: 3,
    uniforms: uniforms(batch, T, offsets, scale),
    workgroups: groupsFor(T * batch.numQoHeads, WORKGROUP_SIZE),
  };
}

/** `D / 4` lines of `f(i)`. */
function perVec4(D: number, f: (i: number) => string): string {
  return Array.from({ length: D / 4 }, (_, i) => `  ${f(i)}\n`).join("");
}

/** The attend dispatch generated for head size `D` (a multiple of 4), reading `vec4`s. */
function pagedAttendVec4Program(
  batch: PagedAttentionBatch,
  T: number,
  offsets: PagedOffsets,
  scale: number,
): Program {
  const D = batch.headDim;
  const sum = Array.from({ length: D / 4 }, (_, i) => `dot(q${i}, pages[kr + ${i}u])`).join(" + ");
  return {
    key: `paged_attention:attend:vec4:d${D}`,
    source: () =>
      storage(0, "qkv", "vec4<f32>", false) + storage(1, "pages", "vec4<f32>", false) +
      storage(2, "seqs", "u32", false) + storage(3, "out", "vec4<f32>", true) +
      uniformStruct([...FIELDS, "scale"], 4) + mainHeader(WORKGROUP_SIZE) + ATTEND_ROW +
      `  // Offsets in vec4s: D and every offset are multiples of 4.
  let qo = (u.offQKV + (t * u.fused + h) * u.D) / 4u;
${perVec4(D, (i) => `let q${i} = qkv[qo + ${i}u];`)}${
        perVec4(D, (i) => `var acc${i} = vec4<f32>(0.0);`)
      }  var m = ${NEG_INF_F32};
  var l = 0.0;
  let base = seqs[2u * t];
  let keys = seqs[2u * t + 1u];
  let vOff = u.KH * u.P * u.D / 4u;
  for (var j = 0u; j < keys; j++) {
    let slot = seqs[base + j];
    let kr = (u.offPages + (((slot / u.P) * 2u * u.KH + kh) * u.P + slot % u.P) * u.D) / 4u;
    let s = (${sum}) * scale;
    let mNew = max(m, s);
    let alpha = exp(m - mNew);
    let p = exp(s - mNew);
    l = l * alpha + p;
    let vr = kr + vOff;
${perVec4(D, (i) => `  acc${i} = acc${i} * alpha + p * pages[vr + ${i}u];`)}    m = mNew;
  }
  let oo = (u.offOut + row * u.D) / 4u;
${perVec4(D, (i) => `out[oo + ${i}u] = acc${i} / l;`)}}
`,
    inputs: 3,
    uniforms: uniforms(batch, T, offsets, scale),
    workgroups: groupsFor(T * batch.numQoHeads, WORKGROUP_SIZE),
  };
}

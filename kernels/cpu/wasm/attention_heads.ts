/**
 * Fused attention on the WebAssembly path: each head's q, k and v rows are
 * copied into the calling thread's scratch (rows padded with zeros to a
 * multiple of four), attention_module.ts's `attention` computes the head's
 * output rows there, and they are copied out.
 *
 * The copies are the price: `K` and `V` cross into WebAssembly memory once
 * per call, and the kernel does `Tq` query rows of work over them. Where a
 * head's key rows are contiguous (`"BHSD"`) each head is one copy per
 * operand; where they are strided (`"BSHD"`, a KV cache's layout) and the
 * head size is a multiple of four, K and V are copied a whole batch at a
 * time and the kernel steps over the other heads' values. Either way even a
 * decode step gains (one query over 128 and 1024 keys of a BSHD cache:
 * 2.0× and 1.6×, bench/cpu_rows_bench.ts). Copying strided rows one at a
 * time (head sizes not a multiple of four) lost on a decode step (0.61× and
 * 0.36× when it was the only strided path), so `"auto"` mode leaves those
 * calls to TypeScript below `ATTENTION_WASM_MIN_QUERIES` query rows.
 *
 * @module
 */

import type { AttentionGeometry } from "../../attention_layout.ts";
import { cpuKernelMode, SCRATCH_BASE_BYTES, scratchFor, scratchView } from "./runtime.ts";
import { rowsKernels } from "./rows.ts";

/** Below this many flops (`2 · Tq · Tk · (D + Dv)` over all heads) attention stays in TypeScript in `"auto"` mode. */
export const ATTENTION_WASM_MIN_FLOPS = 64 * 1024;
/** Below this many query rows, attention copied row by row stays in TypeScript in `"auto"` mode (see above). */
export const ATTENTION_WASM_MIN_QUERIES = 4;
/** The most scratch one head may take (bytes): far below resident.ts's region at 512 MiB. */
const MAX_SCRATCH_BYTES = 256 * 2 ** 20;

const BASE = SCRATCH_BASE_BYTES / 4;
const up4 = (n: number) => Math.ceil(n / 4) * 4;

/** Copies `rows` rows of `width` values, `stride` apart from `from`, to rows `padded` apart at `at`. */
function copyRows(
  src: Float32Array,
  from: number,
  stride: number,
  rows: number,
  width: number,
  view: Float32Array,
  at: number,
  padded: number,
): void {
  if (stride === width && width === padded) {
    view.set(src.subarray(from, from + rows * width), at);
    return;
  }
  for (let r = 0; r < rows; r++, from += stride, at += padded) {
    view.set(src.subarray(from, from + width), at);
  }
}

/**
 * Fused attention of every head of `g` into `ov` (see
 * kernels/cpu/attention.ts for the semantics); false, having written
 * nothing, where the TypeScript kernel should run instead.
 */
export function wasmAttention(
  qv: Float32Array,
  kv: Float32Array,
  vv: Float32Array,
  ov: Float32Array,
  g: AttentionGeometry,
  scale: number,
  causalOffset: number | null,
): boolean {
  const { Tq, Tk, D, Dv } = g;
  if (Tq === 0 || Tk === 0 || D === 0 || Dv === 0) return false;
  if (causalOffset !== null && !Number.isInteger(causalOffset)) return false;
  const Dp = up4(D), Dvp = up4(Dv);
  // Strided rows of a head size that is a multiple of four ("BSHD", a KV cache): K and V are
  // copied a whole batch at a time, every head's rows where they lie, and the kernel steps
  // over the other heads' values. Otherwise each head is packed, row by row where strided.
  const strided = g.k[2] !== D || g.v[2] !== Dv;
  const whole = strided && Dp === D && Dvp === Dv;
  const rowByRow = strided && !whole;
  if (cpuKernelMode() === "auto" && rowByRow && Tq < ATTENTION_WASM_MIN_QUERIES) return false;
  const kBlock = whole ? Tk * g.k[2] : Tk * Dp, vBlock = whole ? Tk * g.v[2] : Tk * Dvp;
  const qAt = BASE, kAt = qAt + Tq * Dp, vAt = kAt + kBlock, oAt = vAt + vBlock;
  const sAt = oAt + Tq * Dvp, end = sAt + up4(Tk) + 4;
  if (end * 4 > MAX_SCRATCH_BYTES) return false;
  const flops = 2 * g.batches * g.heads * Tq * Tk * (D + Dv);
  const found = rowsKernels(flops, ATTENTION_WASM_MIN_FLOPS);
  if (found === null) return false;
  const [space, e] = found;
  const first = scratchFor(space, end * 4);
  if (first === null) return false;
  let view = first;
  // Zero the padding lanes once: rows copied in write only their first D (Dv) values.
  if (Dp !== D || Dvp !== Dv) view.fill(0, qAt, oAt);
  const causal = causalOffset === null ? 0 : 1;
  // An offset past every key is every key; keep it an int32 for the kernel.
  const offset = causalOffset === null ? 0 : Math.max(-Tq - 1, Math.min(Tk, causalOffset));
  const kStride = (whole ? g.k[2] : Dp) * 4, vStride = (whole ? g.v[2] : Dvp) * 4;
  for (let b = 0; b < g.batches; b++) {
    if (whole) {
      view.set(kv.subarray(b * g.k[0], b * g.k[0] + kBlock), kAt);
      view.set(vv.subarray(b * g.v[0], b * g.v[0] + vBlock), vAt);
    }
    for (let h = 0; h < g.heads; h++) {
      copyRows(qv, b * g.q[0] + h * g.q[1], g.q[2], Tq, D, view, qAt, Dp);
      let kp = kAt, vp = vAt;
      if (whole) {
        kp += h * g.k[1];
        vp += h * g.v[1];
      } else {
        copyRows(kv, b * g.k[0] + h * g.k[1], g.k[2], Tk, D, view, kAt, Dp);
        copyRows(vv, b * g.v[0] + h * g.v[1], g.v[2], Tk, Dv, view, vAt, Dvp);
      }
      e.attention(
        qAt * 4,
        kp * 4,
        vp * 4,
        oAt * 4,
        sAt * 4,
        Tq,
        Tk,
        Dp,
        Dvp,
        scale,
        causal,
        offset,
        kStride,
        vStride,
      );
      view = scratchView(space, 0);
      const oBase = b * g.out[0] + h * g.out[1], oStride = g.out[2];
      if (oStride === Dv && Dvp === Dv) {
        ov.set(view.subarray(oAt, oAt + Tq * Dv), oBase);
      } else {
        for (let i = 0; i < Tq; i++) {
          ov.set(view.subarray(oAt + i * Dvp, oAt + i * Dvp + Dv), oBase + i * oStride);
        }
      }
    }
  }
  return true;
}

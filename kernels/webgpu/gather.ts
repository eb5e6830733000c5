/**
 * Data-movement templates that copy 32-bit words regardless of dtype: the
 * `take` gather and the row copy behind `concat`. Moving a float32, an int32
 * or four bytes of a uint8 tensor is the same word copy, so both bind their
 * tensors as `array<u32>` (or `array<vec4<u32>>` when rows, offsets and
 * strides are whole multiples of four words) and work for any dtype whose
 * rows are whole words; callers fall back to `copyBlock` where they are not.
 *
 * @module
 */

import type { TakeMode } from "../kernel_backend.ts";
import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";

/** WGSL mapping an `i32` index into `[0, n)` by `mode` (see `TakeMode`). */
const MAP_INDEX: Readonly<Record<TakeMode, string>> = {
  // Negative indices count from the end; anything still outside the axis is clamped, as
  // indices in GPU memory cannot be checked before the kernel runs.
  fast: "var i = v; if (i < 0) { i += n; } return u32(clamp(i, 0, n - 1));",
  clip: "return u32(clamp(v, 0, n - 1));",
  // Unsigned remainders only: on Mesa llvmpipe an i32 `%` of a negative value gave the
  // remainder of its u32 bits (`-1 % 3` was 0, not -1). A negative v maps to
  // n - 1 - ((-v - 1) mod n).
  wrap: "let un = u32(n);\n  if (v >= 0) { return u32(v) % un; }\n" +
    "  return un - 1u - u32(-(v + 1)) % un;",
};

/** Word offsets and sizes of one `take`. */
export interface TakeArgs {
  /** How indices map into the axis. */
  mode: TakeMode;
  /** Number of output words (all of `out`). */
  words: number;
  /** Words per gathered row (`inner` elements). */
  rowWords: number;
  /** Number of indices. */
  m: number;
  /** Length of the gathered axis (> 0). */
  n: number;
  /** Word offset of `x`, element offset of the indices, word offset of `out`. */
  offsets: readonly [number, number, number];
}

/** `out[o, t, c] = x[o, map(idx[t]), c]` over words; bindings x, indices (i32), out. */
export function takeProgram({ mode, words, rowWords, m, n, offsets }: TakeArgs): Program {
  const [offX, offIdx, offOut] = offsets;
  const vec4 = rowWords % 4 === 0 && offX % 4 === 0 && offOut % 4 === 0;
  const lanes = vec4 ? 4 : 1;
  const unit = vec4 ? "vec4<u32>" : "u32";
  const units = words / lanes;
  return {
    key: `take:${mode}:${vec4 ? "vec4" : "u32"}`,
    source: () =>
      storage(0, "x", unit, false) + storage(1, "idx", "i32", false) +
      storage(2, "out", unit, true) +
      uniformStruct(["units", "rowUnits", "m", "n", "offX", "offIdx", "offOut"], 3) +
      `fn mapIndex(v: i32) -> u32 {\n  let n = i32(u.n);\n  ${MAP_INDEX[mode]}\n}\n` +
      mainHeader(WORKGROUP_SIZE) + `
  let t = wg * ${WORKGROUP_SIZE}u + lid;
  if (t >= u.units) { return; }
  let c = t % u.rowUnits;
  let r = t / u.rowUnits;
  let row = mapIndex(idx[u.offIdx + r % u.m]);
  out[u.offOut + t] = x[u.offX + ((r / u.m) * u.n + row) * u.rowUnits + c];
}
`,
    inputs: 2,
    uniforms: new Uniforms()
      .u32s([units, rowWords / lanes, m, n, offX / lanes, offIdx, offOut / lanes])
      .words(),
    workgroups: groupsFor(units, WORKGROUP_SIZE),
  };
}

/** Word offsets and sizes of a row copy. */
export interface RowCopyArgs {
  /** Number of rows. */
  rows: number;
  /** Words per row. */
  rowWords: number;
  /** Word offset of the source (its rows are contiguous). */
  srcOffset: number;
  /** Word offset of the first destination row. */
  dstOffset: number;
  /** Words from one destination row to the next. */
  dstStride: number;
}

/** Copies contiguous rows into strided rows of another buffer; bindings src, out. */
export function rowCopyProgram(args: RowCopyArgs): Program {
  const { rows, rowWords, srcOffset, dstOffset, dstStride } = args;
  const vec4 = [rowWords, srcOffset, dstOffset, dstStride].every((w) => w % 4 === 0);
  const lanes = vec4 ? 4 : 1;
  const unit = vec4 ? "vec4<u32>" : "u32";
  const units = (rows * rowWords) / lanes;
  return {
    key: `row_copy:${vec4 ? "vec4" : "u32"}`,
    source: () =>
      storage(0, "src", unit, false) + storage(1, "out", unit, true) +
      uniformStruct(["units", "rowUnits", "srcOff", "dstOff", "dstStride"], 2) +
      mainHeader(WORKGROUP_SIZE) + `
  let t = wg * ${WORKGROUP_SIZE}u + lid;
  if (t >= u.units) { return; }
  out[u.dstOff + (t / u.rowUnits) * u.dstStride + t % u.rowUnits] = src[u.srcOff + t];
}
`,
    inputs: 1,
    uniforms: new Uniforms()
      .u32s([units, rowWords / lanes, srcOffset / lanes, dstOffset / lanes, dstStride / lanes])
      .words(),
    workgroups: groupsFor(units, WORKGROUP_SIZE),
  };
}

/**
 * Layout arithmetic shared by the CPU and WebGPU kernels of `strided_slice`
 * and `concat`: where a slice's window starts and how it steps, and where
 * each input of a concatenation lands in the output, in elements.
 *
 * @module
 */

import type { NDArray } from "../devices/ndarray.ts";
import { contiguousStrides } from "./broadcast.ts";

/** A strided window of a contiguous tensor, in its elements. */
export interface SliceWindow {
  /** The offset of the window's first element. */
  offset: number;
  /** The element stride of each axis of the window (negative walks backwards). */
  strides: number[];
}

/**
 * The window `x[start[d] + i·step[d], …]` of a contiguous tensor of `shape`.
 *
 * @example
 * ```ts
 * import { sliceWindow } from "./indexing_layout.ts";
 * import { assertEquals } from "@std/assert";
 *
 * // Columns 3, 1 of every row of a [2, 4] tensor: x[:, 3:0:-2].
 * assertEquals(sliceWindow([2, 4], [0, 3], [1, -2]), { offset: 3, strides: [4, -2] });
 * ```
 */
export function sliceWindow(
  shape: readonly number[],
  start: readonly number[],
  step: readonly number[],
): SliceWindow {
  const own = contiguousStrides(shape);
  let offset = 0;
  for (let d = 0; d < shape.length; d++) offset += start[d] * own[d];
  return { offset, strides: own.map((s, d) => s * step[d]) };
}

/** Where the inputs of a concatenation go, in elements. */
export interface ConcatLayout {
  /** The product of the axes before the concatenation axis. */
  outer: number;
  /** The output's row: the elements after one outer index. */
  outRow: number;
  /** Each input's row length. */
  rows: number[];
  /** Where each input's row starts within the output row. */
  starts: number[];
}

/**
 * The layout of `out = concat(inputs, axis)`: every tensor is
 * `[outer, row]` around the axis, and the output row is the inputs' rows
 * side by side.
 */
export function concatLayout(
  inputs: readonly NDArray[],
  axis: number,
  out: NDArray,
): ConcatLayout {
  let outer = 1;
  for (let d = 0; d < axis; d++) outer *= out.shape[d];
  let inner = 1;
  for (let d = axis + 1; d < out.shape.length; d++) inner *= out.shape[d];
  const rows: number[] = [], starts: number[] = [];
  let at = 0;
  for (const x of inputs) {
    starts.push(at);
    rows.push(x.shape[axis] * inner);
    at += x.shape[axis] * inner;
  }
  return { outer, outRow: at, rows, starts };
}

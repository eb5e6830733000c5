/**
 * The indexing operators `vm.op.take`, `vm.op.strided_slice` and
 * `vm.op.concat`, with TVM Relax's names and semantics (`relax.op.take`,
 * `relax.op.strided_slice`, `relax.op.concat`; NumPy's rules for negative
 * indices and clamping). As everywhere in `vm.op.*`, tensors come first and
 * shapes, immediates and constants after them:
 *
 * | call | result |
 * | --- | --- |
 * | `take(x, indices, axis?, mode?)` | `x` gathered along `axis` by int32 or int64 `indices` of any shape: `x.shape` with axis `axis` replaced by `indices.shape`. `axis` is an `imm` (negative counts from the end); absent or null: `x` is read flattened, as NumPy does (TVM requires a 1-D `x` then, which is the same). `mode` is a string: `"fast"` (default), `"clip"` or `"wrap"` (see below). |
 * | `strided_slice(x, axes, begin, end, strides?)` | a contiguous copy of `x[begin:end:stride]` on each axis of `axes`; the other axes whole. `axes`, `begin`, `end`, `strides` are shapes (`ShapeTuple` or `number[]`) of equal length; `strides` absent: all 1. Negative `begin`/`end` count from the end of the axis, out-of-range values clamp (Python's `slice.indices`); a negative stride walks backwards; stride 0 is an error. |
 * | `concat(tensors, axis?)` | the tensors of a tuple (a VM tuple from `vm.builtin.make_tuple`, or an array) laid one after another along `axis` (an `imm`, default 0, negative counts from the end). Same dtype, device and rank; equal sizes on every other axis. |
 *
 * Take modes (TVM's): `"fast"` accepts indices in `[-n, n)` (negative ones
 * count from the end). Where the indices are in CPU memory they are checked
 * before anything runs and an index outside that range is a `RangeError`;
 * indices in GPU memory cannot be checked without a read back, so the GPU
 * kernel clamps them into the axis instead (a wrong index gives a wrong row,
 * never a read outside the tensor). `"clip"` clamps every index into
 * `[0, n)` (negative ones become 0); `"wrap"` takes it modulo `n`. TVM's
 * `"nan"` mode is not supported.
 *
 * `take` on a GPU tensor accepts indices in CPU memory (a token id sampled
 * on the host, say): they are checked, mapped by the mode, uploaded as a
 * temporary and gathered on the GPU; the result is on the GPU. Index
 * dtypes: int32 and int64. int64 indices already in GPU memory are narrowed
 * to int32 there first (their low 32 bits) and then mapped as above.
 *
 * Errors: `TypeError` (wrong kind of value or dtype), `RangeError` (shapes,
 * axes, indices), messages starting with the operator name.
 *
 * @example Embedding lookup: rows of a [V, D] table
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const take = getGlobalFunc("vm.op.take")!;
 * using table = tensor([[0, 1], [10, 11], [20, 21]]);
 * using ids = tensor([2, 0, -1], { dtype: "int32" });
 * using rows = take(table, ids, 0) as NDArray;
 * assertEquals(rows.shape, [3, 2]);
 * assertEquals([...rows.dataSync()], [20, 21, 0, 1, 20, 21]);
 * ```
 *
 * @example Slicing and concatenating along the sequence axis
 * ```ts
 * import { getGlobalFunc, type NDArray, shape, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const slice = getGlobalFunc("vm.op.strided_slice")!;
 * const concat = getGlobalFunc("vm.op.concat")!;
 * using x = tensor([[1, 2, 3, 4], [5, 6, 7, 8]]);
 * using last2 = slice(x, shape(1), shape(-2), shape(1 << 30)) as NDArray;
 * assertEquals([...last2.dataSync()], [3, 4, 7, 8]);
 * using reversed = slice(x, [1], [-1], [-5], [-1]) as NDArray;
 * assertEquals([...reversed.dataSync()], [4, 3, 2, 1, 8, 7, 6, 5]);
 * using both = concat([x, last2], 1) as NDArray;
 * assertEquals(both.shape, [2, 6]);
 * assertEquals([...both.dataSync()], [1, 2, 3, 4, 3, 4, 5, 6, 7, 8, 7, 8]);
 * ```
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { tupleFields } from "../../ground/tuple.ts";
import type { Device } from "../../devices/device.ts";
import { BuiltinTable } from "../builtin_table.ts";
import type { TakeMode } from "../../kernels/kernel_backend.ts";
import { formatShape } from "../../kernels/broadcast.ts";
import { mapIndex } from "../../kernels/cpu/take.ts";
import {
  checkArgCount,
  checkSameDevice,
  checkSameDType,
  launch,
  normalizeAxis,
  reshapedView,
} from "./operator_arguments.ts";
import { describe } from "../describe.ts";
import { checkDims, tensorArg } from "../validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const indexingBuiltins = new BuiltinTable("Indexing operators", import.meta.url);

/** Every packed function name this module registers. */
export const INDEXING_OPERATOR_NAMES: readonly string[] = [
  "vm.op.take",
  "vm.op.strided_slice",
  "vm.op.broadcast_to",
  "vm.op.concat",
];

/** Dtypes `take` accepts for its indices. */
const INDEX_DTYPES: readonly TensorDType[] = ["int32", "int64"];
const TAKE_MODES: readonly TakeMode[] = ["fast", "clip", "wrap"];

/** An integer immediate argument; `fallback` when absent or null. */
function intArg(op: string, value: unknown, role: string, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new TypeError(`${op}: ${role} must be an integer, got ${describe(value)}`);
  }
  return value;
}

/** A list of integers given as a ShapeTuple or a number[]. */
function intList(op: string, value: unknown, role: string): readonly number[] {
  // A ShapeTuple (what a program's constants are) checked its integers when it was made.
  if (value instanceof ShapeTuple) return value.dims;
  const list = value !== null && typeof value === "object" && Symbol.iterator in value
    ? [...(value as Iterable<unknown>)]
    : undefined;
  if (list === undefined || !list.every((v) => typeof v === "number" && Number.isSafeInteger(v))) {
    throw new TypeError(
      `${op}: ${role} must be a ShapeTuple or an array of integers, got ${describe(value)}`,
    );
  }
  return list as number[];
}

// ------------------------------------------------------------------ take

/**
 * Checks `fast`-mode indices in CPU memory: each must lie in `[-n, n)`.
 * Reads through `Number()`, so int64 indices need no change here.
 */
function checkIndices(op: string, indices: NDArray, axis: number, n: number): void {
  const values = indices.readView() as ArrayLike<number | bigint>;
  if (values instanceof Int32Array) {
    // The common case in one typed pass (a convolution's window indices, every call); the loop
    // below finds the index to name.
    let lo = 0, hi = 0;
    for (let t = 0; t < values.length; t++) {
      const v = values[t];
      if (v < lo) lo = v;
      else if (v > hi) hi = v;
    }
    if (lo >= -n && hi < n) return;
  }
  for (let t = 0; t < values.length; t++) {
    const v = Number(values[t]);
    if (v < -n || v >= n) {
      throw new RangeError(
        `${op}: index ${v} is out of range for axis ${axis} of length ${n} ` +
          `(mode "fast" accepts -${n} to ${n - 1})`,
      );
    }
  }
}

/**
 * A temporary int32 copy of CPU `indices` on `device`, already mapped into
 * `[0, n)` by `mode` on the host (exactly, int64 included), so the GPU
 * kernel reads rows it need not map; the caller releases it.
 */
function uploadIndices(indices: NDArray, n: number, mode: TakeMode, device: Device): NDArray {
  const view = indices.cpuView() as ArrayLike<number | bigint>;
  // A loop: Int32Array.from(view, f) dies past about 2^27 elements (ground/float_formats.ts).
  const values = new Int32Array(view.length);
  for (let i = 0; i < view.length; i++) values[i] = mapIndex(view[i], n, mode);
  const copy = NDArray.empty(indices.shape, "int32", device);
  try {
    device.writeBlock(
      copy.block,
      copy.byteOffset,
      new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
    );
  } catch (e) {
    copy.releaseIfUnowned();
    throw e;
  }
  return copy;
}

/** `vm.op.take(x, indices, axis?, mode?)`. */
function take(args: readonly unknown[]): NDArray {
  const name = "vm.op.take";
  checkArgCount(name, args, 2, 4);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const indices = tensorArg(args[1], "argument 1 (indices)", name);
  // Not checkDType: int64 indices are read (or narrowed) on any device, no arithmetic needed.
  if (!INDEX_DTYPES.includes(indices.dtype)) {
    throw new TypeError(
      `${name}: indices has dtype ${indices.dtype}, expected ${INDEX_DTYPES.join(" or ")}`,
    );
  }
  const flat = args[2] === undefined || args[2] === null;
  const shape = flat ? [x.size] : x.shape;
  const axis = normalizeAxis(name, intArg(name, args[2], "axis", 0), shape);
  const mode = args[3] ?? "fast";
  if (typeof mode !== "string" || !(TAKE_MODES as readonly string[]).includes(mode)) {
    throw new TypeError(`${name}: mode must be "fast", "clip" or "wrap", got ${describe(mode)}`);
  }
  const fromHost = indices.device !== x.device && indices.device.kind === "cpu";
  if (!fromHost) checkSameDevice(name, [x, indices]);
  const n = shape[axis];
  if (n === 0 && indices.size > 0) {
    throw new RangeError(
      `${name}: cannot take from axis ${axis} of length 0 (x ${formatShape(x.shape)})`,
    );
  }
  if (mode === "fast" && indices.device.kind === "cpu") checkIndices(name, indices, axis, n);
  const outShape = [...shape.slice(0, axis), ...indices.shape, ...shape.slice(axis + 1)];
  return launch(x, outShape, x.dtype, (backend, out) => {
    const source = flat && x.shape.length !== 1 ? reshapedView(x, shape) : x;
    let idx: NDArray | undefined;
    try {
      if (fromHost) {
        idx = uploadIndices(indices, n, mode as TakeMode, x.device);
      } else if (indices.dtype !== "int32" && x.device.kind !== "cpu") {
        // GPU kernels read int32: int64 indices there keep their low 32 bits.
        idx = NDArray.empty(indices.shape, "int32", x.device);
        backend.cast(indices, idx);
      } else {
        idx = indices;
      }
      backend.take(source, idx, axis, mode as TakeMode, out);
    } finally {
      if (source !== x) source.releaseIfUnowned();
      if (idx !== undefined && idx !== indices) idx.releaseIfUnowned();
    }
  });
}

// --------------------------------------------------------- strided_slice

/**
 * Python's `slice(begin, end, step).indices(n)` and the resulting length:
 * negative bounds count from the end, out-of-range bounds clamp.
 */
export function sliceBounds(
  begin: number,
  end: number,
  step: number,
  n: number,
): { start: number; length: number } {
  let b: number, e: number, length: number;
  if (step > 0) {
    b = begin < 0 ? Math.max(0, begin + n) : Math.min(begin, n);
    e = end < 0 ? Math.max(0, end + n) : Math.min(end, n);
    length = Math.max(0, Math.ceil((e - b) / step));
  } else {
    b = begin < 0 ? Math.max(-1, begin + n) : Math.min(begin, n - 1);
    e = end < 0 ? Math.max(-1, end + n) : Math.min(end, n - 1);
    length = Math.max(0, Math.ceil((b - e) / -step));
  }
  return { start: length === 0 ? 0 : b, length };
}

/** `vm.op.strided_slice(x, axes, begin, end, strides?)`. */
function stridedSlice(args: readonly unknown[]): NDArray {
  const name = "vm.op.strided_slice";
  checkArgCount(name, args, 4, 5);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const axes = intList(name, args[1], "axes");
  const begin = intList(name, args[2], "begin");
  const end = intList(name, args[3], "end");
  const strides = args[4] === undefined || args[4] === null
    ? axes.map(() => 1)
    : intList(name, args[4], "strides");
  if (
    begin.length !== axes.length || end.length !== axes.length || strides.length !== axes.length
  ) {
    throw new RangeError(
      `${name}: axes, begin, end and strides have lengths ${axes.length}, ${begin.length}, ` +
        `${end.length} and ${strides.length}; they must be equal`,
    );
  }
  const rank = x.shape.length;
  const start = new Array<number>(rank).fill(0);
  const step = new Array<number>(rank).fill(1);
  const outShape = [...x.shape];
  const seen = new Set<number>();
  axes.forEach((given, i) => {
    const a = normalizeAxis(name, given, x.shape);
    if (seen.has(a)) {
      throw new RangeError(
        `${name}: axes [${axes.join(", ")}] repeat an axis of shape ${formatShape(x.shape)}`,
      );
    }
    seen.add(a);
    if (strides[i] === 0) throw new RangeError(`${name}: stride 0 on axis ${given}`);
    const bounds = sliceBounds(begin[i], end[i], strides[i], x.shape[a]);
    start[a] = bounds.start;
    step[a] = strides[i];
    outShape[a] = bounds.length;
  });
  return launch(x, outShape, x.dtype, (backend, out) => backend.stridedSlice(x, start, step, out));
}

// ---------------------------------------------------------- broadcast_to

/**
 * `vm.op.broadcast_to(x, shape)`: the strided-slice kernel with step 0 on
 * each axis that grows from 1, so every backend that slices broadcasts too.
 * `shape` is usually a `make_shape` of sizes known only at run time (ONNX
 * `Expand` to a batch or token count).
 */
function broadcastTo(args: readonly unknown[]): NDArray {
  const name = "vm.op.broadcast_to";
  checkArgCount(name, args, 2, 2);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const target = checkDims(intList(name, args[1], "shape"), name);
  const lead = target.length - x.shape.length;
  const from = [...new Array<number>(Math.max(0, lead)).fill(1), ...x.shape];
  if (lead < 0 || target.some((d, i) => d < 0 || (from[i] !== d && from[i] !== 1))) {
    throw new RangeError(
      `${name}: shape ${formatShape(x.shape)} does not broadcast to ${formatShape(target)}`,
    );
  }
  const start = from.map(() => 0);
  const step = from.map((d, i) => d === target[i] ? 1 : 0);
  return launch(x, target, x.dtype, (backend, out) => {
    // The view holds a reference to x's storage; drop it, whatever the kernel does.
    const view = reshapedView(x, from);
    try {
      backend.stridedSlice(view, start, step, out);
    } finally {
      view.releaseIfUnowned();
    }
  });
}

// ---------------------------------------------------------------- concat

/** `vm.op.concat(tensors, axis?)`. */
function concat(args: readonly unknown[]): NDArray {
  const name = "vm.op.concat";
  checkArgCount(name, args, 1, 2);
  const fields = tupleFields(args[0]);
  if (fields === undefined) {
    throw new TypeError(
      `${name}: argument 0 (tensors) must be a tuple or an array of NDArrays, got ${
        describe(args[0])
      }`,
    );
  }
  if (fields.length === 0) throw new RangeError(`${name}: needs at least one tensor, got none`);
  const tensors = fields.map((f, i) => tensorArg(f, `argument 0 (tensor ${i} of the tuple)`, name));
  checkSameDType(name, tensors);
  checkSameDevice(name, tensors);
  const first = tensors[0];
  if (first.shape.length === 0) {
    throw new RangeError(`${name}: cannot concatenate 0-d tensors`);
  }
  const axis = normalizeAxis(name, intArg(name, args[1], "axis", 0), first.shape);
  const outShape = [...first.shape];
  outShape[axis] = 0;
  for (const t of tensors) {
    const fits = t.shape.length === first.shape.length &&
      t.shape.every((d, i) => i === axis || d === first.shape[i]);
    if (!fits) {
      throw new RangeError(
        `${name}: shapes ${formatShape(first.shape)} and ${formatShape(t.shape)} ` +
          `differ outside axis ${axis}`,
      );
    }
    outShape[axis] += t.shape[axis];
  }
  return launch(first, outShape, first.dtype, (backend, out) => backend.concat(tensors, axis, out));
}

// ---------------------------------------------------------- registration

const ERRORS =
  "`TypeError` (an argument of the wrong kind or dtype, tensors on different devices), `RangeError` (shapes, axes, indices); messages start with the operator's name.";

indexingBuiltins.add("vm.op.take", (...args: unknown[]) => take(args), {
  signature: "(x, indices, axis?, mode?) → tensor",
  summary:
    'NumPy/TVM `take`: `x` gathered along `axis` (an `imm`; absent: `x` flattened) by int32 or int64 `indices` of any shape, which replace that axis. `mode`: `"fast"` (default: negative indices count from the end; an index outside `[-n, n)` is an error when the indices are in CPU memory and is clamped when they are in GPU memory), `"clip"`, `"wrap"`. A GPU `x` accepts CPU indices (checked, mapped, then uploaded); int64 indices in GPU memory keep their low 32 bits. On WebGPU, `x`\'s rows must be whole 4-byte words.',
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: 'relax.op.take (its `"nan"` mode is not supported)',
});
indexingBuiltins.add("vm.op.strided_slice", (...args: unknown[]) => stridedSlice(args), {
  signature: "(x, axes, begin, end, strides?) → tensor",
  summary:
    "A contiguous copy of `x[begin:end:stride]` on each axis of `axes` (shapes of one length; `strides` absent: 1), the other axes whole. Python's slice rules: negative bounds count from the end, out-of-range bounds clamp, a negative stride walks backwards, 0 is an error.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: "relax.op.strided_slice",
});
indexingBuiltins.add("vm.op.broadcast_to", (...args: unknown[]) => broadcastTo(args), {
  signature: "(x, shape) → tensor",
  summary:
    "A contiguous copy of `x` broadcast to `shape` (a ShapeTuple or integers; NumPy's rules: leading axes added, axes of 1 repeated). `shape` is usually a `make_shape` of sizes known only at run time.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: "relax.op.broadcast_to",
});
indexingBuiltins.add("vm.op.concat", (...args: unknown[]) => concat(args), {
  signature: "(tensors, axis?) → tensor",
  summary:
    "The tensors of a tuple (`vm.builtin.make_tuple`'s, or an array) laid one after another along `axis` (an `imm`, default 0, negative counts from the end); same dtype, device and rank, equal sizes on every other axis.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: "relax.op.concat",
});

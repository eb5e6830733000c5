/**
 * ONNX operators that move data or compute shapes: `Reshape`, `Flatten`,
 * `Squeeze`, `Unsqueeze`, `Transpose`, `Concat`, `Gather`, `Slice`,
 * `Expand`, `Cast`, `Shape`, `Size`, `Constant`, `ConstantOfShape`,
 * `Range`, `Dropout` (inference). Reshapes are views
 * (`vm.builtin.reshape` with a `make_shape` of the target); the rest map to
 * `vm.op.transpose`, `vm.op.concat`, `vm.op.take`, `vm.op.strided_slice` and
 * `vm.op.cast`. On values known before run time (shape arithmetic) they are
 * folded.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import type { TensorDType } from "../ground/dtype.ts";
import {
  broadcastShapes,
  type Dim,
  divideProducts,
  knownSize,
  normAxis,
  productOf,
  shapeText,
  Unsupported,
  type Value,
} from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { dtypeOf, onnxTypeName } from "./onnx_tensor.ts";
import type { OpSpec } from "./op_spec.ts";
import { binary } from "./ops_elementwise.ts";
import { broadcastInts, sliceInts, transposeInts } from "./known_ints.ts";

/** Largest constant the importer makes itself (`ConstantOfShape`, `Expand`'s zeros): 16 M elements. */
const MAX_MADE_ELEMENTS = 1 << 24;

/** `x` viewed with `dims` (same size), folded when `x`'s contents are known. */
export function reshapeTo(cx: NodeContext, x: Value, dims: Dim[]): Value {
  if (x.ints !== undefined && dims.every((d) => typeof d === "number")) {
    return cx.knownValue(x.ints, dims as number[], x.dtype);
  }
  return cx.em.call("vm.builtin.reshape", [cx.em.reg(x), cx.em.shape(dims)], x.dtype, dims);
}

/** The tensors of `xs` laid along `axis` by `vm.op.concat`, always a new tensor. */
export function concatAlong(cx: NodeContext, xs: Value[], axis: number): Value {
  const shape = [...xs[0].shape];
  // The sizes along the axis add up (a symbolic one is bound when the program runs).
  const sizes = xs.map((x) => x.shape[axis]);
  shape[axis] = sizes.every((d) => typeof d === "number")
    ? (sizes as number[]).reduce((a, b) => a + b, 0)
    : null;
  const tuple = cx.em.record("vm.builtin.make_tuple", xs.map((x) => cx.em.reg(x)))!;
  return cx.em.call("vm.op.concat", [tuple, cx.em.imm(axis)], xs[0].dtype, shape);
}

/** `concatAlong`, but one tensor is itself (no copy). */
export function concatOrSelf(cx: NodeContext, xs: Value[], axis: number): Value {
  return xs.length === 1 ? xs[0] : concatAlong(cx, xs, axis);
}

/**
 * `Reshape` by a shape known only at run time, of an input whose shape is
 * known: the target's 0s (unless `allowzero`) and its -1 resolved in int32
 * tensors (which WebGPU computes too), then `vm.builtin.tensor_to_shape`.
 */
function reshapeAtRunTime(cx: NodeContext, x: Value, target: Value, allowzero: boolean): Value {
  const k = target.shape[0], total = knownSize(x.shape);
  if (target.shape.length !== 1 || typeof k !== "number" || total === null) {
    throw new Unsupported("a shape known only at run time for an input of unknown shape");
  }
  const shape1 = [k];
  const int32 = (data: number[]) =>
    cx.fromTensor(track(cx, tensor(new Int32Array(data), { shape: [data.length] })));
  const test = (a: Value, b: Value) =>
    cx.em.call("vm.op.equal", [cx.em.reg(a), cx.em.reg(b)], "bool", shape1);
  const select = (c: Value, a: Value, b: Value) =>
    cx.em.call("vm.op.where", [cx.em.reg(c), cx.em.reg(a), cx.em.reg(b)], "int32", shape1);
  let s = cx.em.call("vm.op.cast", [cx.em.reg(target), "int32"], "int32", shape1);
  if (!allowzero) {
    const copied = int32(
      Array.from({ length: k }, (_, i) => (x.shape[i] as number | undefined) ?? 0),
    );
    s = select(test(s, int32(new Array(k).fill(0))), copied, s);
  }
  const minus = test(s, int32(new Array(k).fill(-1)));
  const known = select(minus, int32(new Array(k).fill(1)), s);
  let product: Value | undefined;
  for (let i = 0; i < k; i++) {
    const one = cx.em.call("vm.op.strided_slice", [cx.em.reg(known), [0], [i], [i + 1]], "int32", [
      1,
    ]);
    product = product === undefined ? one : binary(cx, "multiply", product, one);
  }
  const missing = binary(cx, "divide", int32([total]), product ?? int32([1]));
  s = select(minus, missing, s);
  const st = cx.em.record("vm.builtin.tensor_to_shape", [cx.em.reg(s)])!;
  return cx.em.call("vm.builtin.reshape", [cx.em.reg(x), st], x.dtype, new Array(k).fill(null));
}

/** `t`, disposed with the import's other constants. */
function track<T extends { dispose(): void }>(cx: NodeContext, t: T): T {
  cx.made.push(t as never);
  return t;
}

/** One dimension that is the product of `dims`: a number, or a single symbol. */
function productDim(dims: readonly Dim[]): Dim {
  const p = productOf(dims);
  if (p === null) throw new Unsupported(`the size of ${shapeText(dims)}`);
  const d = divideProducts(p, { factor: 1, symbols: [] });
  if (d === null) throw new Unsupported(`the size of ${shapeText(dims)} as one dimension`);
  return d;
}

/** `x` as the matrix `[prod(shape[:axis]), prod(shape[axis:])]` (`Flatten`). */
export function flatten2d(cx: NodeContext, x: Value, axis: number): Value {
  return reshapeTo(cx, x, [productDim(x.shape.slice(0, axis)), productDim(x.shape.slice(axis))]);
}

/** Axes from the `axes` attribute (older opsets) or input `i` (newer). */
function axesOf(cx: NodeContext, inputIndex: number, attrUntil: number): number[] | undefined {
  if (cx.opset < attrUntil) return cx.ints("axes");
  return cx.optional(inputIndex) === undefined ? undefined : cx.knownInts(inputIndex, "axes");
}

/** Whether (Un)Squeeze's axes are an input known only at run time. */
function runtimeAxes(cx: NodeContext): boolean {
  return cx.opset >= 13 && cx.optional(1) !== undefined && cx.input(1).ints === undefined;
}

/**
 * `Unsqueeze` (`insert`) or `Squeeze` by axes known only at run time, of an
 * input whose shape is known: the output's dimensions computed in int32
 * tensors, then `vm.builtin.tensor_to_shape`. Which output position each
 * input dimension goes to is a running count, a product with a triangle of
 * ones (float32, exact at these sizes).
 */
function squeezeAtRunTime(cx: NodeContext, x: Value, axes: Value, insert: boolean): Value {
  const r = x.shape.length, k = axes.shape[0];
  if (axes.shape.length !== 1 || typeof k !== "number" || knownSize(x.shape) === null) {
    throw new Unsupported("axes known only at run time for an input of unknown shape");
  }
  const rank = insert ? r + k : r;
  const out = insert ? rank : r - k;
  const made = <T extends { dispose(): void }>(t: T) => track(cx, t);
  const constant = (
    data: ArrayLike<number>,
    shape: number[],
    dtype: "int32" | "float32" = "int32",
  ) =>
    cx.fromTensor(
      made(tensor(dtype === "int32" ? Int32Array.from(data) : Float32Array.from(data), { shape })),
    );
  const castTo = (v: Value, dtype: TensorDType, shape: Dim[]) =>
    cx.em.call("vm.op.cast", [cx.em.reg(v), dtype], dtype, shape);
  const call = (name: string, args: Value[], dtype: TensorDType, shape: Dim[]) =>
    cx.em.call(name, args.map((a) => cx.em.reg(a)), dtype, shape);
  // Axes in [0, rank), then which positions they name: m[i] = 1 where some axis is i.
  let a = castTo(axes, "int32", [k]);
  const negative = call("vm.op.less", [a, constant([0], [1])], "bool", [k]);
  a = call("vm.op.where", [negative, binary(cx, "add", a, constant([rank], [1])), a], "int32", [k]);
  const iota = constant(Array.from({ length: rank }, (_, i) => i), [1, rank]);
  const named = call("vm.op.equal", [reshapeTo(cx, a, [k, 1]), iota], "bool", [k, rank]);
  const m = cx.em.call(
    "vm.op.sum",
    [cx.em.reg(castTo(named, "int32", [k, rank])), [0], cx.em.imm(0)],
    "int32",
    [rank],
  );
  const dims = constant(r === 0 ? [1] : (x.shape as number[]), [Math.max(r, 1)]);
  const triangle = constant(
    Array.from({ length: rank * rank }, (_, i) => Math.floor(i / rank) <= i % rank ? 1 : 0),
    [rank, rank],
    "float32",
  );
  const running = (v: Value) =>
    reshapeTo(
      cx,
      call(
        "vm.op.matmul",
        [reshapeTo(cx, castTo(v, "float32", [rank]), [1, rank]), triangle],
        "float32",
        [1, rank],
      ),
      [rank],
    );
  let shape: Value;
  if (insert) {
    // Output i: 1 where an axis names it, else the next input dimension in order.
    const kept = binary(cx, "subtract", constant([1], [1]), m);
    const before = castTo(running(kept), "int32", [rank]);
    let idx = binary(cx, "subtract", before, constant([1], [1]));
    idx = binary(
      cx,
      "minimum",
      binary(cx, "maximum", idx, constant([0], [1])),
      constant([Math.max(r - 1, 0)], [1]),
    );
    const taken = cx.em.call(
      "vm.op.take",
      [cx.em.reg(dims), cx.em.reg(idx), cx.em.imm(0)],
      "int32",
      [rank],
    );
    shape = call(
      "vm.op.where",
      [call("vm.op.greater", [m, constant([0], [1])], "bool", [rank]), constant([1], [1]), taken],
      "int32",
      [rank],
    );
  } else {
    // Output j: the input dimension where the running count of kept ones first passes j.
    const keep = castTo(call("vm.op.equal", [m, constant([0], [1])], "bool", [rank]), "int32", [
      rank,
    ]);
    const count = reshapeTo(cx, running(keep), [1, rank]);
    const js = constant(Array.from({ length: out }, (_, j) => j), [out, 1], "float32");
    const passed = call("vm.op.less_equal", [count, js], "bool", [out, rank]);
    const idx = cx.em.call(
      "vm.op.sum",
      [cx.em.reg(castTo(passed, "int32", [out, rank])), [1], cx.em.imm(0)],
      "int32",
      [out],
    );
    shape = cx.em.call("vm.op.take", [cx.em.reg(dims), cx.em.reg(idx), cx.em.imm(0)], "int32", [
      out,
    ]);
  }
  const st = cx.em.record("vm.builtin.tensor_to_shape", [cx.em.reg(shape)])!;
  return cx.em.call("vm.builtin.reshape", [cx.em.reg(x), st], x.dtype, new Array(out).fill(null));
}

/** Python's `slice(b, e, s).indices(n)` length and start, for a known `n`. */
function sliceRange(n: number, b: number, e: number, s: number): [number, number, number] {
  if (s > 0) {
    b = b < 0 ? Math.max(0, b + n) : Math.min(b, n);
    e = e < 0 ? Math.max(0, e + n) : Math.min(e, n);
    return [b, e, Math.max(0, Math.ceil((e - b) / s))];
  }
  b = b < 0 ? Math.max(-1, b + n) : Math.min(b, n - 1);
  e = e < 0 ? Math.max(-1, e + n) : Math.min(e, n - 1);
  return [b, e, Math.max(0, Math.ceil((e - b) / s))];
}

/** Clamps ONNX's ±2^63 "to the end" bounds into what a shape constant holds. */
const clampBound = (v: number) => Math.max(-(2 ** 40), Math.min(2 ** 40, v));

/**
 * `Slice` with a bound known only at run time: `vm.op.strided_slice` with
 * its bounds a `make_shape` from the shape heap, so one import serves every
 * size. `x[0:S]` by step 1 has size `S`, asserted at run time (strided_slice
 * clamps: a token count past the 512 positions must fail, not shrink);
 * other symbolic slices get a size bound from the result.
 */
function symbolicSlice(
  cx: NodeContext,
  x: Value,
  axes: number[],
  starts: Dim[],
  ends: Dim[],
  steps: number[],
): Value {
  const shape = [...x.shape];
  let checked = false;
  axes.forEach((a, k) => {
    const whole = starts[k] === 0 && steps[k] === 1;
    if (whole && typeof ends[k] === "string") {
      shape[a] = ends[k];
      checked = true;
    } else if (whole && typeof ends[k] === "number" && (ends[k] as number) >= 2 ** 31) {
      // the axis whole: keep its dimension
    } else {
      shape[a] = null;
    }
  });
  // make_shape holds 32-bit immediates: ±2^63 "to the end" bounds become ±(2^31 − 1).
  const bound = (dims: Dim[]) =>
    cx.em.shape(
      dims.map((d) => typeof d === "number" ? Math.max(1 - 2 ** 31, Math.min(2 ** 31 - 1, d)) : d),
    );
  const out = cx.em.call(
    "vm.op.strided_slice",
    [cx.em.reg(x), axes, bound(starts), bound(ends), steps],
    x.dtype,
    shape,
  );
  if (checked) cx.em.matchShape(out.reg!, out.shape, `${cx.node.name} (Slice)`);
  return out;
}

/** `Expand` to a shape with symbols: `vm.op.broadcast_to` by a `make_shape` of it. */
function symbolicExpand(cx: NodeContext, x: Value, dims: Dim[]): Value {
  const shape = broadcastShapes(x.shape, dims);
  if (shape.includes(null)) throw new Unsupported(`Expand to ${shapeText(dims)}`);
  return cx.em.call(
    "vm.op.broadcast_to",
    [cx.em.reg(x), cx.em.shape(shape)],
    x.dtype,
    shape,
  );
}

/** Shape and data-movement operators by ONNX name. */
export const SHAPE_OPS: Record<string, OpSpec> = {
  Reshape: {
    attrs: ["allowzero"],
    convert(cx) {
      const x = cx.input(0);
      const allowzero = cx.int("allowzero", 0) === 1;
      if (cx.input(1).ints === undefined) return [reshapeAtRunTime(cx, x, cx.input(1), allowzero)];
      const target = cx.knownDims(1, "shape");
      const dims: Dim[] = target.map((d, i) => d === 0 && !allowzero ? x.shape[i] : d);
      const minus = dims.indexOf(-1);
      if (minus >= 0) {
        const all = productOf(x.shape), rest = productOf(dims.filter((_, i) => i !== minus));
        const d = all === null || rest === null ? null : divideProducts(all, rest);
        if (d === null) {
          throw new Unsupported(
            `-1 in shape [${target}] for an input of shape ${shapeText(x.shape)}`,
          );
        }
        dims[minus] = d;
      }
      return [reshapeTo(cx, x, dims)];
    },
  },
  Flatten: {
    attrs: ["axis"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      const axis = cx.int("axis", 1);
      const a = axis < 0 ? axis + r : axis;
      if (a < 0 || a > r) throw new Unsupported(`axis ${axis} for rank ${r}`);
      return [flatten2d(cx, x, a)];
    },
  },
  Squeeze: {
    attrs: ["axes"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      if (runtimeAxes(cx)) return [squeezeAtRunTime(cx, x, cx.input(1), false)];
      const given = axesOf(cx, 1, 13);
      let axes: number[];
      if (given === undefined) {
        if (x.shape.some((d) => typeof d !== "number")) {
          throw new Unsupported("Squeeze without axes of a shape not known before run time");
        }
        axes = x.shape.flatMap((d, i) => d === 1 ? [i] : []);
      } else axes = given.map((a) => normAxis(a, r));
      for (const a of axes) {
        if (x.shape[a] !== 1) throw new Unsupported(`axis ${a} of ${shapeText(x.shape)} is not 1`);
      }
      return [reshapeTo(cx, x, x.shape.filter((_, i) => !axes.includes(i)))];
    },
  },
  Unsqueeze: {
    attrs: ["axes"],
    convert(cx) {
      const x = cx.input(0);
      if (runtimeAxes(cx)) return [squeezeAtRunTime(cx, x, cx.input(1), true)];
      const given = axesOf(cx, 1, 13);
      if (given === undefined) throw new Unsupported("Unsqueeze without axes");
      const r = x.shape.length + given.length;
      const axes = given.map((a) => normAxis(a, r)).sort((a, b) => a - b);
      const dims: Dim[] = [];
      let k = 0;
      for (let i = 0; i < r; i++) dims.push(axes.includes(i) ? 1 : x.shape[k++]);
      return [reshapeTo(cx, x, dims)];
    },
  },
  Transpose: {
    attrs: ["perm"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      const perm = cx.ints("perm") ?? x.shape.map((_, i) => r - 1 - i);
      const shape = perm.map((p) => x.shape[normAxis(p, r, "perm entry")]);
      if (x.ints !== undefined && knownSize(x.shape) !== null) {
        const axes = perm.map((p) => normAxis(p, r));
        return [
          cx.knownValue(
            transposeInts(x.ints, x.shape as number[], axes),
            shape as number[],
            x.dtype,
          ),
        ];
      }
      return [cx.em.call("vm.op.transpose", [cx.em.reg(x), perm], x.dtype, shape)];
    },
  },
  Concat: {
    attrs: ["axis"],
    convert(cx) {
      const xs = Array.from({ length: cx.inputCount }, (_, i) => cx.input(i));
      const r = xs[0].shape.length;
      const axis = normAxis(cx.int("axis", 0), r);
      if (r === 1 && xs.every((x) => x.ints !== undefined)) {
        const ints = xs.flatMap((x) => [...x.ints!]);
        return [cx.knownValue(ints, [ints.length], xs[0].dtype)];
      }
      return [concatAlong(cx, xs, axis)];
    },
  },
  Gather: {
    attrs: ["axis"],
    convert(cx) {
      const x = cx.input(0), idx = cx.input(1), r = x.shape.length;
      const axis = normAxis(cx.int("axis", 0), r);
      cx.dtype(idx, ["int32", "int64"], "indices");
      const shape = [...x.shape.slice(0, axis), ...idx.shape, ...x.shape.slice(axis + 1)];
      if (r === 1 && x.ints !== undefined && idx.ints !== undefined) {
        const n = x.ints.length;
        const picked = idx.ints.map((i) => {
          if (typeof i !== "number" || i < -n || i >= n) throw new Unsupported(`index ${i}`);
          return x.ints![i < 0 ? i + n : i];
        });
        return [cx.knownValue(picked, shape as number[], x.dtype)];
      }
      return [
        cx.em.call(
          "vm.op.take",
          [cx.em.reg(x), cx.em.reg(idx), cx.em.imm(axis)],
          x.dtype,
          shape,
        ),
      ];
    },
  },
  Slice: {
    attrs: ["starts", "ends", "axes"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      let starts: Dim[], ends: Dim[], axes: number[] | undefined, steps: number[] | undefined;
      if (cx.opset < 10) {
        starts = cx.ints("starts") ?? [];
        ends = cx.ints("ends") ?? [];
        axes = cx.ints("axes");
      } else {
        // Bounds may be symbols: a token count sliced out of a 512-long buffer of ids.
        starts = cx.knownDims(1, "starts");
        ends = cx.knownDims(2, "ends");
        axes = cx.optional(3) === undefined ? undefined : cx.knownInts(3, "axes");
        steps = cx.optional(4) === undefined ? undefined : cx.knownInts(4, "steps");
      }
      const ax = (axes ?? starts.map((_, i) => i)).map((a) => normAxis(a, r));
      const st = steps ?? starts.map(() => 1);
      if (st.includes(0)) throw new Unsupported("a step of 0");
      if (![...starts, ...ends].every((d) => typeof d === "number")) {
        return [symbolicSlice(cx, x, ax, starts, ends, st)];
      }
      const begin = (starts as number[]).map(clampBound), end = (ends as number[]).map(clampBound);
      const shape = [...x.shape];
      const known: [number, number, number][] = [];
      ax.forEach((a, k) => {
        const n = x.shape[a];
        if (typeof n === "number") {
          const range = sliceRange(n, begin[k], end[k], st[k]);
          shape[a] = range[2];
          known.push(range);
        } else {
          shape[a] = begin[k] === 0 && end[k] >= 2 ** 31 && st[k] === 1 ? n : null;
        }
      });
      if (r === 1 && x.ints !== undefined && known.length === 1) {
        const [b, , len] = known[0];
        const ints = Array.from({ length: len }, (_, i) => x.ints![b + i * st[0]]);
        return [cx.knownValue(ints, [len], x.dtype)];
      }
      if (x.ints !== undefined && known.length === ax.length && knownSize(x.shape) !== null) {
        const ints = sliceInts(x.ints, x.shape as number[], ax, known, st);
        return [cx.knownValue(ints, shape as number[], x.dtype)];
      }
      return [
        cx.em.call("vm.op.strided_slice", [cx.em.reg(x), ax, begin, end, st], x.dtype, shape),
      ];
    },
  },
  Expand: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0), dims = cx.knownDims(1, "shape");
      if (!dims.every((d) => typeof d === "number")) return [symbolicExpand(cx, x, dims)];
      const target = dims as number[];
      const shape = broadcastShapes(x.shape, target);
      const n = knownSize(shape);
      if (n === null) throw new Unsupported(`Expand to ${shapeText(shape)}`);
      if (n > MAX_MADE_ELEMENTS) throw new Unsupported(`Expand to ${n} elements`);
      // Known integers (position and token-type ids) stay known: no int64 add at run time.
      if (x.ints !== undefined && knownSize(x.shape) !== null && n <= 4096) {
        const ints = broadcastInts(x.ints, x.shape as number[], shape as number[]);
        return [cx.knownValue(ints, shape as number[], x.dtype)];
      }
      // int64 (an attention mask): copies laid side by side along each axis that grows, as WGSL
      // has no 64-bit add for x + zeros to run on WebGPU.
      const grows = shape.map((d, i) =>
        (d as number) / ((x.shape[i - (shape.length - x.shape.length)] ?? 1) as number)
      );
      if (
        x.dtype === "int64" && x.shape.every((d) => typeof d === "number") &&
        grows.every((k) => k <= 1024)
      ) {
        let y = reshapeTo(cx, x, [...new Array(shape.length - x.shape.length).fill(1), ...x.shape]);
        grows.forEach((k, axis) => {
          if (k === 1) return;
          const copies = cx.em.record("vm.builtin.make_tuple", new Array(k).fill(cx.em.reg(y)))!;
          const to = [...y.shape];
          to[axis] = shape[axis];
          y = cx.em.call("vm.op.concat", [copies, cx.em.imm(axis)], y.dtype, to);
        });
        return [y];
      }
      // x + zeros(shape): broadcasting does the expansion.
      const zeros = tensor(
        new (x.dtype === "int64" ? BigInt64Array : x.dtype === "int32" ? Int32Array : Float32Array)(
          n,
        ),
        {
          shape: shape as number[],
          dtype: x.dtype,
        },
      );
      cx.made.push(zeros);
      return [binary(cx, "add", x, cx.fromTensor(zeros))];
    },
  },
  Cast: {
    attrs: ["to", "saturate"],
    convert(cx) {
      const x = cx.input(0), to = cx.int("to", 0);
      const dt = dtypeOf(to);
      if (dt === null) throw new Unsupported(`Cast to ${onnxTypeName(to)}`);
      if (x.ints !== undefined && (dt === "int64" || dt === "int32")) {
        return [cx.knownValue(x.ints, x.shape as number[], dt)];
      }
      // A known condition stays known through its Cast to bool (an If's, folded at import).
      if (x.ints !== undefined && dt === "bool" && x.ints.every((d) => typeof d === "number")) {
        return [cx.knownValue(x.ints.map((d) => d === 0 ? 0 : 1), x.shape as number[], dt)];
      }
      return [cx.em.call("vm.op.cast", [cx.em.reg(x), dt], dt, x.shape)];
    },
  },
  CastLike: {
    attrs: ["saturate"],
    convert(cx) {
      const x = cx.input(0), dt = cx.input(1).dtype;
      if (x.ints !== undefined && (dt === "int64" || dt === "int32")) {
        return [cx.knownValue(x.ints, x.shape as number[], dt)];
      }
      return [cx.em.call("vm.op.cast", [cx.em.reg(x), dt], dt, x.shape)];
    },
  },
  Split: {
    attrs: ["axis", "split", "num_outputs"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      const axis = normAxis(cx.int("axis", 0), r);
      const n = x.shape[axis];
      const outputs = cx.node.outputs.length;
      let sizes: number[] | undefined = cx.opset < 13
        ? cx.ints("split")
        : cx.optional(1) === undefined
        ? undefined
        : cx.knownInts(1, "split");
      if (sizes === undefined) {
        if (typeof n !== "number") throw new Unsupported("an even Split of a symbolic dimension");
        // Even parts; with num_outputs (opset 18) the last may be smaller.
        const parts = cx.int("num_outputs", outputs);
        const each = Math.ceil(n / parts);
        sizes = Array.from({ length: parts }, (_, i) => Math.min(each, n - each * i));
      }
      let at = 0;
      return sizes.map((size) => {
        const shape = [...x.shape];
        shape[axis] = size;
        const out = cx.em.call(
          "vm.op.strided_slice",
          [cx.em.reg(x), [axis], [at], [at + size], [1]],
          x.dtype,
          shape,
        );
        at += size;
        return out;
      });
    },
  },
  Shape: {
    attrs: ["start", "end"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      const clamp = (v: number) => Math.max(0, Math.min(r, v < 0 ? v + r : v));
      const dims = x.shape.slice(clamp(cx.int("start", 0)), clamp(cx.int("end", r)));
      return [cx.knownValue(dims, [dims.length])];
    },
  },
  Size: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      return [cx.knownValue([productDim(x.shape)], [])];
    },
  },
  Constant: {
    attrs: ["value", "value_float", "value_floats", "value_int", "value_ints"],
    convert(cx) {
      const t = cx.tensorAttr("value");
      if (t !== undefined) return [cx.fromTensor(t)];
      if (cx.has("value_float")) return [cx.scalar(cx.float("value_float", 0))];
      if (cx.has("value_int")) return [cx.knownValue([cx.int("value_int", 0)], [])];
      const ints = cx.ints("value_ints");
      if (ints !== undefined) return [cx.knownValue(ints, [ints.length])];
      const floats = cx.floats("value_floats");
      if (floats !== undefined) {
        const f = tensor(new Float32Array(floats));
        cx.made.push(f);
        return [cx.fromTensor(f)];
      }
      throw new Unsupported("a Constant without a value it supports");
    },
  },
  ConstantOfShape: {
    attrs: ["value"],
    convert(cx) {
      const dims = cx.knownInts(0, "shape");
      const n = knownSize(dims);
      if (n === null || n > MAX_MADE_ELEMENTS) {
        throw new Unsupported(`a constant of shape [${dims}]`);
      }
      const v = cx.tensorAttr("value");
      const dt: TensorDType = v?.dtype ?? "float32";
      const fill = v === undefined ? 0 : v.dataSync()[0];
      const out = tensor(
        new (dt === "int64"
          ? BigInt64Array
          : dt === "int32"
          ? Int32Array
          : dt === "float32"
          ? Float32Array
          : Uint8Array)(n),
        { shape: dims, dtype: dt },
      );
      (out.cpuView() as unknown as { fill(v: unknown): void }).fill(
        dt === "int64" ? BigInt(fill) : Number(fill),
      );
      cx.made.push(out);
      return [cx.fromTensor(out)];
    },
  },
  Range: {
    attrs: [],
    convert(cx) {
      const [start, limit, delta] = [0, 1, 2].map((i) => {
        const v = cx.input(i);
        if (v.tensor === undefined) {
          throw new Unsupported(`Range input ${i} must be known before run time`);
        }
        return Number(v.tensor.dataSync()[0]);
      });
      const n = Math.max(0, Math.ceil((limit - start) / delta));
      if (!(n <= MAX_MADE_ELEMENTS)) throw new Unsupported(`a Range of ${n} elements`);
      const values = Array.from({ length: n }, (_, i) => start + i * delta);
      const dt = cx.input(0).dtype;
      if (dt === "int64" || dt === "int32") return [cx.knownValue(values, [n], dt)];
      const t = tensor(values, { dtype: dt, shape: [n] });
      cx.made.push(t);
      return [cx.fromTensor(t)];
    },
  },
  Dropout: {
    attrs: ["seed", "ratio"],
    convert(cx) {
      // Inference: the identity (a training_mode input that is true is not supported).
      const mode = cx.optional(2);
      if (
        mode !== undefined && (mode.tensor === undefined || Number(mode.tensor.dataSync()[0]) !== 0)
      ) {
        throw new Unsupported("training_mode");
      }
      if (cx.node.outputs.length > 1 && cx.node.outputs[1] !== "") {
        throw new Unsupported("the mask output");
      }
      return [cx.input(0)];
    },
  },
};

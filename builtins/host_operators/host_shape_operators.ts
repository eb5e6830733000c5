/**
 * Shape operators whose sizes are tensors, read when the operator runs
 * (ONNX's `Slice`, `Split`, `Tile`, `Expand`, `Pad`, `ConstantOfShape` and
 * `Range` with run-time inputs), computed on the host (host_tensors.ts). As
 * everywhere in `vm.op.*`, tensors come first:
 *
 * | call | result |
 * | --- | --- |
 * | `dynamic_strided_slice(x, begin, end, axes?, strides?)` | `x[begin:end:stride]` on each axis of `axes` (default `0, 1, …`), all four 1-D integer tensors; NumPy's clamping, negative values count from the end |
 * | `split_section(x, sizes, axis, index)` | section `index` of `x` cut along `axis` into pieces of `sizes` (a 1-D integer tensor) |
 * | `tile(x, repeats)` | `x` repeated `repeats[i]` times along each axis |
 * | `expand(x, shape)` | `x` broadcast with `shape` both ways (ONNX's `Expand`: the result has the larger of each pair of sizes) |
 * | `pad(x, pads, value?, mode?, axes?)` | `x` with `pads[k]` elements before and `pads[k + n]` after axis `axes[k]` (negative ones crop); `mode` `"constant"` (with `value`, default 0), `"reflect"`, `"edge"` or `"wrap"` |
 * | `full(shape, value)` | a tensor of `shape` (a shape value or a 1-D integer tensor) filled with the one element of `value`, of its dtype |
 * | `arange(start, limit, delta)` | `start, start + delta, …` up to `limit` (excluded), three scalars of one dtype |
 *
 * @example Slice by bounds computed at run time
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const slice = getGlobalFunc("vm.op.dynamic_strided_slice")!;
 * using x = tensor([[1, 2, 3], [4, 5, 6]]);
 * using begin = tensor([1], { dtype: "int64" }), end = tensor([-1], { dtype: "int64" });
 * using axes = tensor([1], { dtype: "int64" });
 * using y = slice(x, begin, end, axes) as NDArray;
 * assertEquals(y.shape, [2, 1]);
 * assertEquals([...y.dataSync()], [2, 5]);
 * ```
 *
 * @module
 */

import { NDArray } from "../../devices/ndarray.ts";
import type { TypedArray } from "../../ground/dtype.ts";
import { broadcastShapes, formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { dtypeArg, shapeArg, tensorArg } from "../validate.ts";
import { cpu } from "../../devices/cpu_device.ts";
import {
  axisOf,
  choiceArg,
  type HostResult,
  integersOf,
  numbersOf,
  onHost,
  optionalTensor,
  put,
  sizeOf,
  stridesOf,
} from "./host_tensors.ts";
import { sliceBounds } from "../operators/indexing_operators.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostShapeBuiltins = new BuiltinTable("Host shape operators", import.meta.url);

/**
 * A result of `shape` whose element at each position is `src`'s element
 * `index(coords)`, or stays `fill` (all zero bits when absent) where
 * `index` gives -1.
 */
function gathered(
  x: NDArray,
  src: TypedArray,
  shape: readonly number[],
  index: (coords: number[]) => number,
  fill?: TypedArray,
): HostResult {
  return {
    shape,
    dtype: x.dtype,
    fill(out) {
      const n = sizeOf(shape), coords = new Array<number>(shape.length).fill(0);
      for (let i = 0; i < n; i++) {
        const j = index(coords);
        if (j >= 0) (out as Float32Array)[i] = (src as Float32Array)[j];
        else if (fill !== undefined) (out as Float32Array)[i] = (fill as Float32Array)[0];
        for (let a = shape.length - 1; a >= 0; a--) {
          if (++coords[a] < shape[a]) break;
          coords[a] = 0;
        }
      }
    },
  };
}

/** `coords` (over a result) mapped through per-axis source coordinates to a flat index of `x`. */
function flatIndex(x: NDArray, source: (axis: number, c: number) => number) {
  const strides = stridesOf(x.shape);
  return (coords: number[]): number => {
    let j = 0;
    for (let a = 0; a < coords.length; a++) {
      const s = source(a, coords[a]);
      if (s < 0) return -1;
      j += s * strides[a];
    }
    return j;
  };
}

hostShapeBuiltins.add(
  "vm.op.dynamic_strided_slice",
  (x: unknown, begin: unknown, end: unknown, axes?: unknown, strides?: unknown) => {
    const who = "dynamic_strided_slice";
    const t = tensorArg(x, "x", who);
    const b = tensorArg(begin, "begin", who), e = tensorArg(end, "end", who);
    const ax = optionalTensor(axes, "axes", who), st = optionalTensor(strides, "strides", who);
    return onHost(who, [t, b, e, ax, st], ([src, bv, ev, av, sv]) => {
      const starts = integersOf(bv!, "begin", who), ends = integersOf(ev!, "end", who);
      const axesList = av === undefined
        ? starts.map((_, i) => i)
        : integersOf(av, "axes", who).map((a) => axisOf(who, a, t.shape.length));
      const steps = sv === undefined ? starts.map(() => 1) : integersOf(sv, "strides", who);
      if (ends.length !== starts.length || axesList.length !== starts.length) {
        throw new RangeError(`${who}: begin, end and axes must have one value per sliced axis`);
      }
      const shape = [...t.shape], first = shape.map(() => 0), step = shape.map(() => 1);
      axesList.forEach((a, k) => {
        if (steps[k] === 0) throw new RangeError(`${who}: a stride of 0 on axis ${a}`);
        const { start, length } = sliceBounds(starts[k], ends[k], steps[k], t.shape[a]);
        shape[a] = length;
        first[a] = start;
        step[a] = steps[k];
      });
      return gathered(t, src!, shape, flatIndex(t, (a, c) => first[a] + c * step[a]));
    });
  },
  {
    signature: "(x, begin, end, axes?, strides?) → tensor",
    summary:
      "`x[begin:end:stride]` on each axis of `axes` (default `0, 1, …`), the other axes whole; the four are 1-D integer tensors read when it runs, so the result's shape is known only then. Negative `begin`/`end` count from the end of the axis and out-of-range ones clamp (Python's `slice.indices`); a negative stride walks backwards. Computed on the host (a GPU `x` is read back and the result written back).",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, non-integer bounds), `RangeError` (lengths that differ, an axis out of range, a stride of 0).",
    tvm: "relax.op.dynamic_strided_slice, which has no `axes` (every axis is sliced)",
  },
);

hostShapeBuiltins.add(
  "vm.op.split_section",
  (x: unknown, sizes: unknown, axis: unknown, index: unknown) => {
    const who = "split_section";
    const t = tensorArg(x, "x", who), s = tensorArg(sizes, "sizes", who);
    const a = axisOf(who, axis, t.shape.length);
    return onHost(who, [t, s], ([src, sv]) => {
      const parts = integersOf(sv!, "sizes", who);
      if (parts.some((p) => p < 0) || parts.reduce((p, q) => p + q, 0) !== t.shape[a]) {
        throw new RangeError(
          `${who}: sizes [${parts.join(", ")}] do not add up to axis ${a} of ${
            formatShape(t.shape)
          }`,
        );
      }
      if (
        typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= parts.length
      ) {
        throw new RangeError(`${who}: index ${index} is not one of the ${parts.length} sections`);
      }
      const start = parts.slice(0, index).reduce((p, q) => p + q, 0);
      const shape = [...t.shape];
      shape[a] = parts[index];
      return gathered(t, src!, shape, flatIndex(t, (k, c) => k === a ? start + c : c));
    });
  },
  {
    signature: "(x, sizes, axis, index) → tensor",
    summary:
      "Section `index` of `x` cut along `axis` (an `imm`) into consecutive pieces of `sizes` (a 1-D integer tensor read when it runs, adding up to the axis). Computed on the host.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors), `RangeError` (sizes that do not add up to the axis, an index or axis out of range).",
    tvm: "relax.op.split, which takes the sections when it is compiled and returns them all",
  },
);

hostShapeBuiltins.add("vm.op.tile", (x: unknown, repeats: unknown) => {
  const who = "tile";
  const t = tensorArg(x, "x", who), r = tensorArg(repeats, "repeats", who);
  return onHost(who, [t, r], ([src, rv]) => {
    const reps = integersOf(rv!, "repeats", who);
    if (reps.length !== t.shape.length || reps.some((k) => k < 0)) {
      throw new RangeError(
        `${who}: repeats [${reps.join(", ")}] for x ${
          formatShape(t.shape)
        } (one count >= 0 an axis)`,
      );
    }
    const shape = t.shape.map((d, a) => d * reps[a]);
    return gathered(t, src!, shape, flatIndex(t, (a, c) => c % t.shape[a]));
  });
}, {
  signature: "(x, repeats) → tensor",
  summary:
    "`x` repeated `repeats[i]` times along each axis `i` (a 1-D integer tensor of one count an axis, read when it runs). Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not tensors), `RangeError` (a count per axis missing or negative).",
  tvm: "relax.op.tile, which takes the repeats when it is compiled",
});

hostShapeBuiltins.add("vm.op.expand", (x: unknown, shape: unknown) => {
  const who = "expand";
  const t = tensorArg(x, "x", who), s = tensorArg(shape, "shape", who);
  return onHost(who, [t, s], ([src, sv]) => {
    const target = integersOf(sv!, "shape", who);
    const out = broadcastShapes(t.shape, target, who);
    const lead = out.length - t.shape.length, strides = stridesOf(t.shape);
    return gathered(t, src!, out, (coords) => {
      let j = 0;
      for (let a = 0; a < t.shape.length; a++) {
        if (t.shape[a] !== 1) j += coords[a + lead] * strides[a];
      }
      return j;
    });
  });
}, {
  signature: "(x, shape) → tensor",
  summary:
    "`x` broadcast with `shape` (a 1-D integer tensor read when it runs) both ways, as ONNX's `Expand`: the result's shape is NumPy's broadcast of the two, so a size 1 in `shape` keeps `x`'s. Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not tensors), `RangeError` (shapes that do not broadcast).",
  tvm: "relax.op.broadcast_to, which broadcasts `x` to `shape` one way only",
});

const PAD_MODES = ["constant", "reflect", "edge", "wrap"] as const;

hostShapeBuiltins.add(
  "vm.op.pad",
  (x: unknown, pads: unknown, value?: unknown, mode?: unknown, axes?: unknown) => {
    const who = "pad";
    const t = tensorArg(x, "x", who), p = tensorArg(pads, "pads", who);
    const v = optionalTensor(value, "value", who), ax = optionalTensor(axes, "axes", who);
    const m = mode === undefined || mode === null
      ? "constant"
      : choiceArg(who, mode, "mode", PAD_MODES);
    if (v !== undefined && (v.dtype !== t.dtype || v.size !== 1)) {
      throw new TypeError(`${who}: value must be one element of x's dtype ${t.dtype}`);
    }
    return onHost(who, [t, p, v, ax], ([src, pv, vv, av]) => {
      const r = t.shape.length;
      const axesList = av === undefined
        ? t.shape.map((_, i) => i)
        : integersOf(av, "axes", who).map((a) => axisOf(who, a, r));
      const amounts = integersOf(pv!, "pads", who);
      if (amounts.length !== 2 * axesList.length) {
        throw new RangeError(`${who}: ${amounts.length} pads for ${axesList.length} axes`);
      }
      const before = t.shape.map(() => 0), after = t.shape.map(() => 0);
      axesList.forEach((a, k) => {
        before[a] = amounts[k];
        after[a] = amounts[k + axesList.length];
      });
      const shape = t.shape.map((d, a) => d + before[a] + after[a]);
      if (shape.some((d) => d < 0)) {
        throw new RangeError(
          `${who}: pads [${amounts.join(", ")}] crop ${formatShape(t.shape)} below 0`,
        );
      }
      if (m !== "constant" && t.size === 0 && sizeOf(shape) > 0) {
        throw new RangeError(`${who}: ${m} padding of an empty tensor`);
      }
      const source = (a: number, c: number): number => {
        const n = t.shape[a];
        let i = c - before[a];
        if (i >= 0 && i < n) return i;
        if (m === "constant") return -1;
        if (m === "edge") return i < 0 ? 0 : n - 1;
        if (m === "wrap") return ((i % n) + n) % n;
        if (n === 1) return 0;
        const period = 2 * (n - 1);
        i = ((i % period) + period) % period;
        return i < n ? i : period - i;
      };
      return gathered(t, src!, shape, flatIndex(t, source), vv);
    });
  },
  {
    signature: "(x, pads, value?, mode?, axes?) → tensor",
    summary:
      '`x` with `pads[k]` elements added before and `pads[k + n]` after axis `axes[k]` (default every axis; `pads` and `axes` 1-D integer tensors read when it runs; a negative amount crops). `mode`: `"constant"` (default; the new elements are `value`, one element of `x`\'s dtype, default 0), `"reflect"` (mirrored without repeating the edge), `"edge"` (the edge repeated) or `"wrap"` (the other end\'s elements). Computed on the host.',
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, an unknown mode, a value of another dtype), `RangeError` (pads not two an axis, a size cropped below 0, reflect/edge/wrap of an empty tensor).",
    tvm: "relax.op.nn.pad, which takes the pads when it is compiled",
  },
);

hostShapeBuiltins.add("vm.op.full", (shape: unknown, value: unknown) => {
  const who = "full";
  // A shape value (ShapeTuple) or a 1-D integer tensor.
  const known = shape instanceof NDArray ? undefined : shapeArg(shape, who);
  const s = known === undefined ? tensorArg(shape, "shape", who) : undefined;
  const v = tensorArg(value, "value", who);
  if (v.size !== 1) throw new RangeError(`${who}: value must have one element, got ${v.size}`);
  return onHost(who, [v, s], ([vv, sv]) => {
    const dims = known ?? integersOf(sv!, "shape", who);
    if (dims.some((d) => d < 0)) throw new RangeError(`${who}: shape [${dims.join(", ")}]`);
    return {
      shape: dims,
      dtype: v.dtype,
      fill: (out) => (out as Float32Array).fill((vv as Float32Array)[0]),
    };
  });
}, {
  signature: "(shape, value) → tensor",
  summary:
    "A tensor of `shape` (a shape value, or a 1-D integer tensor read when it runs) whose every element is the one element of `value`, and of its dtype (ONNX's `ConstantOfShape`). Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not tensors), `RangeError` (a negative size, `value` not one element).",
  tvm: "relax.op.full, which takes the shape as a shape value",
});

hostShapeBuiltins.add("vm.op.arange", (start: unknown, limit: unknown, delta: unknown) => {
  const who = "arange";
  const s = tensorArg(start, "start", who);
  const l = tensorArg(limit, "limit", who, s.dtype), d = tensorArg(delta, "delta", who, s.dtype);
  if (s.size !== 1 || l.size !== 1 || d.size !== 1) {
    throw new RangeError(`${who}: start, limit and delta must be scalars`);
  }
  return onHost(who, [s, l, d], ([sv, lv, dv]) => {
    const [a] = numbersOf(sv!), [b] = numbersOf(lv!), [step] = numbersOf(dv!);
    if (step === 0) throw new RangeError(`${who}: delta is 0`);
    const n = Math.max(Math.ceil((b - a) / step), 0);
    return {
      shape: [n],
      dtype: s.dtype,
      fill(out) {
        for (let i = 0; i < n; i++) put(out, i, a + i * step);
      },
    };
  });
}, {
  signature: "(start, limit, delta) → tensor",
  summary:
    "The 1-D tensor `start, start + delta, …` of `max(ceil((limit - start) / delta), 0)` elements, of `start`'s dtype (three scalar tensors of one dtype, read when it runs: ONNX's `Range`). Computed on the host.",
  dtypes: ["float32", "int32", "int64", "int16", "int8"],
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not tensors of one dtype), `RangeError` (not scalars, a delta of 0).",
  tvm: "relax.op.arange, which takes prim values",
});

hostShapeBuiltins.add(
  "vm.op.dynamic_reshape",
  (x: unknown, shape: unknown, allowzero?: unknown) => {
    const who = "dynamic_reshape";
    const t = tensorArg(x, "x", who), s = tensorArg(shape, "shape", who);
    return onHost(who, [t, s], ([src, sv]) => {
      const target = integersOf(sv!, "shape", who);
      const dims = target.map((d, i) => (d === 0 && !allowzero ? t.shape[i] : d));
      const minus = dims.indexOf(-1);
      if (dims.some((d, i) => d === undefined || d < -1 || (d === -1 && i !== minus))) {
        throw new RangeError(`${who}: shape [${target.join(", ")}] for x ${formatShape(t.shape)}`);
      }
      if (minus >= 0) {
        const rest = sizeOf(dims.filter((_, i) => i !== minus));
        dims[minus] = rest === 0 ? 0 : t.size / rest;
      }
      if (!Number.isInteger(dims[minus] ?? 0) || sizeOf(dims) !== t.size) {
        throw new RangeError(
          `${who}: cannot reshape ${formatShape(t.shape)} to [${target.join(", ")}]`,
        );
      }
      return {
        shape: dims,
        dtype: t.dtype,
        fill: (out) => (out as Float32Array).set(src as Float32Array),
      };
    });
  },
  {
    signature: "(x, shape, allowzero?) → tensor",
    summary:
      "A copy of `x` with the shape a 1-D integer tensor read when it runs gives, as ONNX's `Reshape` reads it: a 0 keeps `x`'s size on that axis (unless `allowzero`), one -1 takes what is left. Computed on the host.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors), `RangeError` (a shape of another number of elements, more than one -1).",
    tvm: "relax.op.reshape, which takes a shape value and no 0",
  },
);

hostShapeBuiltins.add("vm.op.shape_to_tensor", (shape: unknown, dtype?: unknown) => {
  const who = "shape_to_tensor";
  const dims = shapeArg(shape, who);
  const dt = dtype === undefined || dtype === null ? "int64" : dtypeArg(dtype, who);
  const out = NDArray.empty([dims.length], dt, cpu());
  const view = out.cpuView();
  dims.forEach((d, i) => put(view, i, d));
  return out;
}, {
  signature: "(shape, dtype?) → CPU tensor",
  summary:
    "The sizes of a shape value as a 1-D CPU tensor of `dtype` (default int64): what ONNX's `Shape` gives when the sizes are known only at run time.",
  dtypes: ["int64", "int32", "float32"],
  devices: ["cpu"],
  errors: "`TypeError` (not a shape, an unknown dtype).",
  tvm: "relax.op.shape_to_tensor",
});

hostShapeBuiltins.add("vm.op.center_crop_pad", (x: unknown, shape: unknown, axes?: unknown) => {
  const who = "center_crop_pad";
  const t = tensorArg(x, "x", who), s = tensorArg(shape, "shape", who);
  const ax = optionalTensor(axes, "axes", who);
  return onHost(who, [t, s, ax], ([src, sv, av]) => {
    const r = t.shape.length;
    const sizes = integersOf(sv!, "shape", who);
    const axesList = av === undefined
      ? t.shape.map((_, i) => i)
      : integersOf(av, "axes", who).map((a) => axisOf(who, a, r));
    if (sizes.length !== axesList.length || sizes.some((d) => d < 0)) {
      throw new RangeError(`${who}: shape [${sizes.join(", ")}] for ${axesList.length} axes`);
    }
    const out = [...t.shape], offset = t.shape.map(() => 0);
    axesList.forEach((a, k) => {
      out[a] = sizes[k];
      // Cropping starts inside x, padding puts x inside; an odd difference leaves more at the end.
      offset[a] = Math.floor((t.shape[a] - sizes[k]) / 2) * (sizes[k] < t.shape[a] ? 1 : 0) -
        Math.floor((sizes[k] - t.shape[a]) / 2) * (sizes[k] > t.shape[a] ? 1 : 0);
    });
    return gathered(
      t,
      src!,
      out,
      flatIndex(t, (a, c) => {
        const i = c + offset[a];
        return i >= 0 && i < t.shape[a] ? i : -1;
      }),
    );
  });
}, {
  signature: "(x, shape, axes?) → tensor",
  summary:
    "ONNX's `CenterCropPad`: each axis of `axes` (default every axis) cropped or padded with zeros, around its centre, to the size `shape` gives (1-D integer tensors read when it runs); an odd difference leaves the extra element at the end. Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not tensors), `RangeError` (a size per axis missing or negative).",
  tvm: null,
});

hostShapeBuiltins.add("vm.op.stack_append", (stack: unknown, x: unknown) => {
  const who = "stack_append";
  const t = tensorArg(x, "x", who);
  const s = stack === null || stack === undefined
    ? undefined
    : tensorArg(stack, "stack", who, t.dtype);
  if (s !== undefined && s.shape.slice(1).join() !== t.shape.join()) {
    throw new RangeError(
      `${who}: x ${formatShape(t.shape)} onto a stack of ${formatShape(s.shape)}`,
    );
  }
  return onHost(who, [t, s], ([xv, sv]) => ({
    shape: [(s?.shape[0] ?? 0) + 1, ...t.shape],
    dtype: t.dtype,
    fill(out) {
      if (sv !== undefined) (out as Float32Array).set(sv as Float32Array);
      (out as Float32Array).set(xv as Float32Array, s?.size ?? 0);
    },
  }));
}, {
  signature: "(stack, x) → tensor",
  summary:
    "A new tensor: `stack` (`[n, ...x.shape]`, or null for an empty one) with `x` appended as row `n` — how the ONNX importer gathers a `Loop`'s scan outputs, one iteration at a time. Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not tensors, dtypes that differ), `RangeError` (`x` not the shape of a row).",
  tvm: null,
});

/**
 * Indexing, scanning and bitwise operators computed on the host
 * (host_tensors.ts): those whose output shape depends on their inputs'
 * values (`nonzero`, `compress`, `unique`, `topk` with a run-time `k`) and
 * those no device kernel has yet. ONNX's definitions, which its reference
 * implementation computes: `cumsum`, `topk`, `scatter_elements`,
 * `scatter_nd`, `one_hot`, `compress`, `nonzero`, `unique`, `einsum`, and
 * the bitwise `bitwise_and`/`_or`/`_xor`/`_not`, `left_shift`,
 * `right_shift` (NumPy broadcasting, the dtype's own wrapping).
 *
 * @example Top 2 of each row, and where they were
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const topk = getGlobalFunc("vm.op.topk")!;
 * using x = tensor([[1, 9, 3], [7, 2, 8]]);
 * using k = tensor([2], { dtype: "int64" });
 * using values = topk(x, k, -1, 1, 0) as NDArray;
 * using indices = topk(x, k, -1, 1, 1) as NDArray;
 * assertEquals([...values.dataSync()], [9, 3, 8, 7]);
 * assertEquals([...indices.dataSync()], [1n, 2n, 2n, 0n]);
 * ```
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import { elementBytes, type TypedArray } from "../../ground/dtype.ts";
import { broadcastShapes, formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { tensorArg } from "../validate.ts";
import {
  axisOf,
  broadcastIndex,
  choiceArg,
  type HostResult,
  integersOf,
  numbersOf,
  onHost,
  put,
  sizeOf,
  stridesOf,
} from "./host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostIndexBuiltins = new BuiltinTable("Host indexing operators", import.meta.url);

/** An axis given as an integer or a one-element integer tensor. */
function axisValue(who: string, axis: unknown, view?: TypedArray): number {
  if (view !== undefined) return integersOf(view, "axis", who)[0];
  if (typeof axis !== "number") {
    throw new TypeError(`${who}: axis must be an integer, got ${describe(axis)}`);
  }
  return axis;
}

/** A 0/1 flag given as a number or boolean (absent: `fallback`). */
function flag(v: unknown, fallback: boolean): boolean {
  return v === undefined || v === null ? fallback : Boolean(v);
}

/** The coordinates of flat index `i` of `shape`. */
function coordsOf(i: number, shape: readonly number[]): number[] {
  const c = new Array<number>(shape.length);
  for (let a = shape.length - 1; a >= 0; a--) {
    c[a] = i % shape[a];
    i = Math.floor(i / shape[a]);
  }
  return c;
}

/** Outer size, axis length and inner size of `shape` around `axis`. */
function around(shape: readonly number[], axis: number): [number, number, number] {
  return [sizeOf(shape.slice(0, axis)), shape[axis], sizeOf(shape.slice(axis + 1))];
}

hostIndexBuiltins.add(
  "vm.op.cumsum",
  (x: unknown, axis: unknown, exclusive?: unknown, reverse?: unknown) => {
    const who = "cumsum";
    const t = tensorArg(x, "x", who);
    const axisTensor = typeof axis === "object" ? tensorArg(axis, "axis", who) : undefined;
    return onHost(who, [t, axisTensor], ([src, av]): HostResult => {
      const a = axisOf(who, axisValue(who, axis, av), t.shape.length);
      const [outer, n, inner] = around(t.shape, a);
      const excl = flag(exclusive, false), rev = flag(reverse, false);
      const values = numbersOf(src!);
      return {
        shape: t.shape,
        dtype: t.dtype,
        fill(out) {
          for (let o = 0; o < outer; o++) {
            for (let i = 0; i < inner; i++) {
              let sum = 0;
              for (let k = 0; k < n; k++) {
                const j = (o * n + (rev ? n - 1 - k : k)) * inner + i;
                if (excl) put(out, j, sum);
                sum += values[j];
                if (!excl) put(out, j, sum);
              }
            }
          }
        },
      };
    });
  },
  {
    signature: "(x, axis, exclusive?, reverse?) → tensor",
    summary:
      "Running sums of `x` along `axis` (an integer, or a one-element integer tensor read when it runs): `exclusive` leaves out each element's own value, `reverse` sums from the end. ONNX's `CumSum`. Computed on the host, in float64 for floats.",
    dtypes: ["float32", "int32", "int64", "uint32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a tensor), `RangeError` (axis out of range).",
    tvm: "relax.op.cumsum",
  },
);

hostIndexBuiltins.add(
  "vm.op.topk",
  (
    x: unknown,
    k: unknown,
    axis: unknown,
    largest: unknown,
    output: unknown,
    unsigned?: unknown,
  ) => {
    const who = "topk";
    const t = tensorArg(x, "x", who), kt = tensorArg(k, "k", who);
    const a = axisOf(who, axis, t.shape.length);
    return onHost(who, [t, kt], ([src, kv]): HostResult => {
      const count = integersOf(kv!, "k", who)[0];
      const [outer, n, inner] = around(t.shape, a);
      if (!(count >= 0 && count <= n)) {
        throw new RangeError(
          `${who}: k ${count} outside [0, ${n}] (axis ${a} of ${formatShape(t.shape)})`,
        );
      }
      const big = flag(largest, true);
      // int64 bits read as UINT64 (how the ONNX importer holds it): ordered as unsigned.
      const values: (number | bigint)[] = flag(unsigned, false)
        ? Array.from(src as BigInt64Array, (v) => BigInt.asUintN(64, v))
        : numbersOf(src!);
      const shape = [...t.shape];
      shape[a] = count;
      const indicesOut = output === 1;
      return {
        shape,
        dtype: indicesOut ? "int64" : t.dtype,
        fill(out) {
          const order = new Array<number>(n);
          for (let o = 0; o < outer; o++) {
            for (let i = 0; i < inner; i++) {
              const at = (k: number) => values[(o * n + k) * inner + i];
              for (let k = 0; k < n; k++) order[k] = k;
              // Equal values keep their order: the lower index first (ONNX's rule).
              const cmp = (p: number, q: number) => (at(p) < at(q) ? -1 : at(p) > at(q) ? 1 : 0);
              order.sort((p, q) => (big ? cmp(q, p) : cmp(p, q)) || p - q);
              for (let k = 0; k < count; k++) {
                const j = (o * count + k) * inner + i;
                if (indicesOut) put(out, j, order[k]);
                else {(out as Float32Array)[j] =
                    (src as Float32Array)[(o * n + order[k]) * inner + i];}
              }
            }
          }
        },
      };
    });
  },
  {
    signature: "(x, k, axis, largest, output, unsigned?) → tensor",
    summary:
      "The `k` largest (`largest` 1) or smallest (0) elements of `x` along `axis`, sorted, equal values lower index first; `k` a one-element integer tensor read when it runs. `output` 0 gives the values, 1 their int64 indices (ONNX's `TopK`, one output a call); `unsigned` orders int64 bits as UINT64. Computed on the host.",
    dtypes: ["float32", "int32", "int64"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors), `RangeError` (axis out of range, `k` beyond the axis).",
    tvm: "relax.op.topk, which returns both outputs",
  },
);

const REDUCTIONS = ["none", "add", "mul", "max", "min"] as const;
type Reduction = (typeof REDUCTIONS)[number];

/** `old` combined with `update` by `reduction`. */
function combine(reduction: Reduction, old: number, update: number): number {
  switch (reduction) {
    case "add":
      return old + update;
    case "mul":
      return old * update;
    case "max":
      return Math.max(old, update);
    case "min":
      return Math.min(old, update);
    default:
      return update;
  }
}

/** A copy of `data` with `writes(out)` applied (the writes index `data`'s flat elements). */
function scattered(
  data: NDArray,
  src: TypedArray,
  updates: TypedArray,
  reduction: Reduction,
  targets: (emit: (dst: number, from: number) => void) => void,
): HostResult {
  return {
    shape: data.shape,
    dtype: data.dtype,
    fill(out) {
      (out as Float32Array).set(src as Float32Array);
      targets((dst, from) => {
        if (reduction === "none") (out as Float32Array)[dst] = (updates as Float32Array)[from];
        else put(out, dst, combine(reduction, Number(out[dst]), Number(updates[from])));
      });
    },
  };
}

hostIndexBuiltins.add(
  "vm.op.scatter_elements",
  (data: unknown, indices: unknown, updates: unknown, axis?: unknown, reduction?: unknown) => {
    const who = "scatter_elements";
    const d = tensorArg(data, "data", who), ix = tensorArg(indices, "indices", who);
    const u = tensorArg(updates, "updates", who, d.dtype);
    const a = axisOf(who, axis ?? 0, d.shape.length);
    const r = reduction === undefined || reduction === null
      ? "none"
      : choiceArg(who, reduction, "reduction", REDUCTIONS);
    if (ix.shape.join() !== u.shape.join() || ix.shape.length !== d.shape.length) {
      throw new RangeError(
        `${who}: indices ${formatShape(ix.shape)} and updates ${
          formatShape(u.shape)
        } must have one shape, of data's rank ${d.shape.length}`,
      );
    }
    return onHost(who, [d, ix, u], ([src, iv, uv]) => {
      const idx = integersOf(iv!, "indices", who), strides = stridesOf(d.shape);
      return scattered(d, src!, uv!, r, (emit) => {
        for (let i = 0; i < idx.length; i++) {
          const c = coordsOf(i, ix.shape);
          const n = d.shape[a];
          const k = idx[i] < 0 ? idx[i] + n : idx[i];
          if (k < 0 || k >= n) {
            throw new RangeError(`${who}: index ${idx[i]} outside axis ${a} (${n})`);
          }
          c[a] = k;
          emit(c.reduce((s, v, j) => s + v * strides[j], 0), i);
        }
      });
    });
  },
  {
    signature: "(data, indices, updates, axis?, reduction?) → tensor",
    summary:
      'A copy of `data` where, for each element of `updates`, the element at the same position with its coordinate along `axis` (default 0) replaced by the matching index (negative counts from the end) is set, or combined by `reduction` (`"add"`, `"mul"`, `"max"`, `"min"`; default `"none"`: the last write wins). ONNX\'s `ScatterElements`. Computed on the host.',
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, updates of another dtype, an unknown reduction), `RangeError` (shapes, an index outside the axis).",
    tvm: "relax.op.scatter_elements",
  },
);

hostIndexBuiltins.add(
  "vm.op.scatter_nd",
  (data: unknown, indices: unknown, updates: unknown, reduction?: unknown) => {
    const who = "scatter_nd";
    const d = tensorArg(data, "data", who), ix = tensorArg(indices, "indices", who);
    const u = tensorArg(updates, "updates", who, d.dtype);
    const r = reduction === undefined || reduction === null
      ? "none"
      : choiceArg(who, reduction, "reduction", REDUCTIONS);
    const q = ix.shape.length, depth = ix.shape[q - 1];
    if (q === 0 || depth > d.shape.length) {
      throw new RangeError(
        `${who}: indices ${formatShape(ix.shape)} for data ${formatShape(d.shape)}`,
      );
    }
    const slice = sizeOf(d.shape.slice(depth)), count = sizeOf(ix.shape.slice(0, -1));
    if (u.size !== count * slice) {
      throw new RangeError(
        `${who}: updates ${formatShape(u.shape)} do not match the indexed slices`,
      );
    }
    return onHost(who, [d, ix, u], ([src, iv, uv]) => {
      const idx = integersOf(iv!, "indices", who), strides = stridesOf(d.shape);
      return scattered(d, src!, uv!, r, (emit) => {
        for (let i = 0; i < count; i++) {
          let base = 0;
          for (let k = 0; k < depth; k++) {
            const n = d.shape[k];
            const v = idx[i * depth + k] < 0 ? idx[i * depth + k] + n : idx[i * depth + k];
            if (v < 0 || v >= n) {
              throw new RangeError(`${who}: index ${idx[i * depth + k]} outside axis ${k}`);
            }
            base += v * strides[k];
          }
          for (let j = 0; j < slice; j++) emit(base + j, i * slice + j);
        }
      });
    });
  },
  {
    signature: "(data, indices, updates, reduction?) → tensor",
    summary:
      'A copy of `data` where each row of `indices` (its last axis a partial index into `data`) names a slice set to the matching slice of `updates`, or combined by `reduction` (`"add"`, `"mul"`, `"max"`, `"min"`; default `"none"`). ONNX\'s `ScatterND`. Computed on the host.',
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, updates of another dtype, an unknown reduction), `RangeError` (shapes, an index outside its axis).",
    tvm: "relax.op.scatter_nd",
  },
);

hostIndexBuiltins.add(
  "vm.op.one_hot",
  (indices: unknown, depth: unknown, values: unknown, axis?: unknown) => {
    const who = "one_hot";
    const ix = tensorArg(indices, "indices", who), dt = tensorArg(depth, "depth", who);
    const v = tensorArg(values, "values", who);
    if (v.size !== 2) {
      throw new RangeError(`${who}: values must be [off, on], got ${v.size} elements`);
    }
    return onHost(who, [ix, dt, v], ([iv, dv, vv]) => {
      const n = Math.trunc(numbersOf(dv!)[0]);
      if (!(n >= 1)) throw new RangeError(`${who}: depth ${n} must be at least 1`);
      const rank = ix.shape.length + 1;
      const a = axisOf(who, axis ?? -1, rank);
      const shape = [...ix.shape.slice(0, a), n, ...ix.shape.slice(a)];
      const idx = numbersOf(iv!).map(Math.trunc);
      const [outer, , inner] = around(shape, a);
      return {
        shape,
        dtype: v.dtype,
        fill(out) {
          const off = (vv as Float32Array)[0], on = (vv as Float32Array)[1];
          (out as Float32Array).fill(off);
          for (let o = 0; o < outer; o++) {
            for (let i = 0; i < inner; i++) {
              let k = idx[o * inner + i];
              if (k < 0) k += n;
              if (k >= 0 && k < n) (out as Float32Array)[(o * n + k) * inner + i] = on;
            }
          }
        },
      };
    });
  },
  {
    signature: "(indices, depth, values, axis?) → tensor",
    summary:
      "One-hot rows: a new axis of `depth` (a one-element tensor read when it runs) inserted at `axis` (default -1), holding `values[1]` where it equals the index (negative ones count from the end) and `values[0]` elsewhere; an index outside the depth gives a row of `values[0]`. The result has `values`' dtype. ONNX's `OneHot`. Computed on the host.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors), `RangeError` (values not two elements, a depth below 1, axis out of range).",
    tvm: "relax.op.one_hot, which takes the depth and values when it is compiled",
  },
);

hostIndexBuiltins.add("vm.op.compress", (x: unknown, condition: unknown, axis?: unknown) => {
  const who = "compress";
  const t = tensorArg(x, "x", who), c = tensorArg(condition, "condition", who);
  const flat = axis === undefined || axis === null;
  const shape = flat ? [t.size] : t.shape;
  const a = flat ? 0 : axisOf(who, axis, t.shape.length);
  return onHost(who, [t, c], ([src, cv]) => {
    const keep = numbersOf(cv!);
    const [outer, n, inner] = around(shape, a);
    if (keep.length > n) {
      throw new RangeError(`${who}: ${keep.length} conditions for an axis of ${n}`);
    }
    const chosen = keep.flatMap((k, i) => (k !== 0 ? [i] : []));
    const outShape = [...shape];
    outShape[a] = chosen.length;
    return {
      shape: outShape,
      dtype: t.dtype,
      fill(out) {
        let j = 0;
        for (let o = 0; o < outer; o++) {
          for (const k of chosen) {
            for (let i = 0; i < inner; i++) {
              (out as Float32Array)[j++] = (src as Float32Array)[(o * n + k) * inner + i];
            }
          }
        }
      },
    };
  });
}, {
  signature: "(x, condition, axis?) → tensor",
  summary:
    "The slices of `x` along `axis` whose entry in `condition` (a 1-D tensor, as long as the axis or shorter) is nonzero; no axis: the elements of `x` flattened. ONNX's `Compress`. Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not tensors), `RangeError` (a condition longer than the axis, axis out of range).",
  tvm: null,
});

hostIndexBuiltins.add("vm.op.nonzero", (x: unknown) => {
  const who = "nonzero";
  const t = tensorArg(x, "x", who);
  return onHost(who, [t], ([src]) => {
    const values = numbersOf(src!);
    const at = values.flatMap((v, i) => (v !== 0 ? [i] : []));
    const r = t.shape.length;
    return {
      shape: [r, at.length],
      dtype: "int64",
      fill(out) {
        at.forEach((i, k) => {
          coordsOf(i, t.shape).forEach((c, a) => put(out, a * at.length + k, c));
        });
      },
    };
  });
}, {
  signature: "(x) → int64 tensor [rank, count]",
  summary:
    "The coordinates of the nonzero elements of `x`, in row-major order, one column each (NumPy's `nonzero` stacked; ONNX's `NonZero`). Computed on the host.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tensor).",
  tvm: "relax.op.nonzero",
});

hostIndexBuiltins.add(
  "vm.op.unique",
  (x: unknown, axis: unknown, sorted: unknown, output: unknown) => {
    const who = "unique";
    const t = tensorArg(x, "x", who);
    const flat = axis === undefined || axis === null;
    const shape = flat ? [t.size] : t.shape;
    const a = flat ? 0 : axisOf(who, axis, t.shape.length);
    const which = typeof output === "number" ? output : 0;
    return onHost(who, [t], ([src]): HostResult => {
      const values = numbersOf(src!);
      const [outer, n, inner] = around(shape, a);
      // Slice k along the axis, as numbers (NumPy compares them lexicographically).
      const sliceOf = (k: number) => {
        const s: number[] = [];
        for (let o = 0; o < outer; o++) {
          for (let i = 0; i < inner; i++) s.push(values[(o * n + k) * inner + i]);
        }
        return s;
      };
      const slices = Array.from({ length: n }, (_, k) => sliceOf(k));
      const firsts: number[] = [], byKey = new Map<string, number>();
      const inverse = slices.map((s, k) => {
        const key = s.join();
        let u = byKey.get(key);
        if (u === undefined) {
          u = firsts.length;
          byKey.set(key, u);
          firsts.push(k);
        }
        return u;
      });
      let order = firsts.map((_, u) => u);
      if (flag(sorted, true)) {
        const lex = (p: number[], q: number[]) => {
          for (let i = 0; i < p.length; i++) if (p[i] !== q[i]) return p[i] - q[i];
          return 0;
        };
        order = order.sort((p, q) => lex(slices[firsts[p]], slices[firsts[q]]));
      }
      const rank = new Array<number>(order.length);
      order.forEach((u, r) => (rank[u] = r));
      const counts = new Array<number>(order.length).fill(0);
      for (const u of inverse) counts[rank[u]]++;
      if (which === 0) {
        const outShape = [...shape];
        outShape[a] = order.length;
        return {
          shape: outShape,
          dtype: t.dtype,
          fill(out) {
            order.forEach((u, r) => {
              const k = firsts[u];
              for (let o = 0; o < outer; o++) {
                for (let i = 0; i < inner; i++) {
                  (out as Float32Array)[(o * order.length + r) * inner + i] =
                    (src as Float32Array)[(o * n + k) * inner + i];
                }
              }
            });
          },
        };
      }
      const list = which === 1
        ? order.map((u) => firsts[u])
        : which === 2
        ? inverse.map((u) => rank[u])
        : counts;
      return {
        shape: [list.length],
        dtype: "int64",
        fill: (out) => list.forEach((v, i) => put(out, i, v)),
      };
    });
  },
  {
    signature: "(x, axis, sorted, output) → tensor",
    summary:
      "The unique slices of `x` along `axis` (null: its elements flattened), sorted (`sorted` 1: lexicographically, as NumPy) or in order of first occurrence. `output` picks ONNX's `Unique` output: 0 the unique slices, 1 the int64 index of each one's first occurrence, 2 for every slice of `x` the int64 index of its unique slice, 3 the int64 counts. Computed on the host.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a tensor), `RangeError` (axis out of range).",
    tvm: "relax.op.unique",
  },
);

const BITWISE = {
  "vm.op.bitwise_and": (a: bigint, b: bigint) => a & b,
  "vm.op.bitwise_or": (a: bigint, b: bigint) => a | b,
  "vm.op.bitwise_xor": (a: bigint, b: bigint) => a ^ b,
  "vm.op.left_shift": (a: bigint, b: bigint) => a << b,
  "vm.op.right_shift": (a: bigint, b: bigint) => a >> b,
} as const;

const INTEGER_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"] as const;

/** Element `i` of an integer storage view as a bigint. */
const bigAt = (v: TypedArray, i: number): bigint => BigInt(v[i] as number | bigint);

/** Writes bigint `x` into `out[i]`, wrapped to the dtype as a C cast would. */
function putBig(out: TypedArray, i: number, x: bigint, bits: number, signed: boolean): void {
  const w = signed ? BigInt.asIntN(bits, x) : BigInt.asUintN(bits, x);
  if (out instanceof BigInt64Array) out[i] = w;
  else (out as Int32Array)[i] = Number(w);
}

for (const [name, f] of Object.entries(BITWISE)) {
  const who = name.slice("vm.op.".length);
  const shift = who.endsWith("shift");
  hostIndexBuiltins.add(name, (a: unknown, b: unknown) => {
    const x = tensorArg(a, "a", who), y = tensorArg(b, "b", who, x.dtype);
    choiceArg(who, x.dtype, "dtype", INTEGER_DTYPES);
    const shape = broadcastShapes(x.shape, y.shape);
    const bits = elementBytes(x.dtype) * 8, signed = x.dtype.startsWith("int");
    return onHost(who, [x, y], ([xv, yv]) => ({
      shape,
      dtype: x.dtype,
      fill(out) {
        const xi = broadcastIndex(x.shape, shape), yi = broadcastIndex(y.shape, shape);
        for (let i = 0; i < out.length; i++) {
          const p = bigAt(xv!, xi(i)), q = bigAt(yv!, yi(i));
          // A shift by the width or more leaves nothing (NumPy's uint behaviour).
          putBig(out, i, shift && q >= BigInt(bits) ? 0n : f(p, q), bits, signed);
        }
      },
    }));
  }, {
    signature: "(a, b) → tensor",
    summary: `${
      shift
        ? `\`a\` shifted ${who.startsWith("left") ? "left" : "right"} by \`b\` bits`
        : `The bitwise ${who.slice("bitwise_".length).toUpperCase()} of \`a\` and \`b\``
    }, NumPy broadcasting, wrapped to their integer dtype (ONNX's \`${
      shift ? "BitShift" : `Bitwise${who[8].toUpperCase()}${who.slice(9)}`
    }\`). Computed on the host.`,
    dtypes: [...INTEGER_DTYPES],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not integer tensors of one dtype), `RangeError` (shapes that do not broadcast).",
    tvm: `relax.op.${who}`,
  });
}

hostIndexBuiltins.add("vm.op.bitwise_not", (a: unknown) => {
  const who = "bitwise_not";
  const x = tensorArg(a, "a", who);
  choiceArg(who, x.dtype, "dtype", INTEGER_DTYPES);
  const bits = elementBytes(x.dtype) * 8, signed = x.dtype.startsWith("int");
  return onHost(who, [x], ([xv]) => ({
    shape: x.shape,
    dtype: x.dtype,
    fill(out) {
      for (let i = 0; i < out.length; i++) putBig(out, i, ~bigAt(xv!, i), bits, signed);
    },
  }));
}, {
  signature: "(a) → tensor",
  summary:
    "The bitwise NOT of each element of integer `a` (ONNX's `BitwiseNot`). Computed on the host.",
  dtypes: [...INTEGER_DTYPES],
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not an integer tensor).",
  tvm: "relax.op.bitwise_not",
});

hostIndexBuiltins.add("vm.op.einsum", (equation: unknown, ...operands: unknown[]) => {
  const who = "einsum";
  if (typeof equation !== "string") {
    throw new TypeError(`${who}: equation must be a string, got ${describe(equation)}`);
  }
  const ts = operands.map((o, i) => tensorArg(o, `operand ${i}`, who, "float32"));
  const eq = equation.replace(/\s/g, "");
  const [lhs, given] = eq.split("->");
  const terms = lhs.split(",");
  if (terms.length !== ts.length || eq.includes(".")) {
    throw new RangeError(`${who}: equation "${equation}" for ${ts.length} operands (no ellipsis)`);
  }
  const sizes = new Map<string, number>();
  terms.forEach((term, i) => {
    if (term.length !== ts[i].shape.length) {
      throw new RangeError(
        `${who}: "${term}" for operand ${i} of shape ${formatShape(ts[i].shape)}`,
      );
    }
    [...term].forEach((l, a) => {
      const d = ts[i].shape[a], seen = sizes.get(l);
      if (seen !== undefined && seen !== d) {
        throw new RangeError(`${who}: "${l}" has sizes ${seen} and ${d}`);
      }
      sizes.set(l, d);
    });
  });
  // Implicit output: the letters used once, alphabetically (NumPy's rule).
  const out = given ?? [...sizes.keys()].filter((l) => lhs.split(l).length === 2).sort().join("");
  const letters = [...sizes.keys()];
  const shape = [...out].map((l) => sizes.get(l)!);
  const dims = letters.map((l) => sizes.get(l)!);
  return onHost(who, ts, (views) => ({
    shape,
    dtype: "float32",
    fill(result) {
      const strides = ts.map((t, i) => {
        const s = stridesOf(t.shape);
        return letters.map((l) =>
          [...terms[i]].reduce((acc, m, a) => acc + (m === l ? s[a] : 0), 0)
        );
      });
      const outStrides = stridesOf(shape);
      const os = letters.map((l) => (out.includes(l) ? outStrides[out.indexOf(l)] : 0));
      const total = sizeOf(dims);
      for (let i = 0; i < total; i++) {
        const c = coordsOf(i, dims);
        let p = 1;
        for (let k = 0; k < ts.length; k++) {
          p *= (views[k] as Float32Array)[c.reduce((s, v, a) => s + v * strides[k][a], 0)];
        }
        (result as Float32Array)[c.reduce((s, v, a) => s + v * os[a], 0)] += p;
      }
    },
  }));
}, {
  signature: "(equation, ...operands) → tensor",
  summary:
    'Einstein summation of float32 `operands` by `equation` (`"ij,jk->ik"`; without `->`, the letters used once in alphabetical order; a letter repeated in one term takes its diagonal). No ellipsis. ONNX\'s `Einsum`. Computed on the host.',
  dtypes: ["float32"],
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not float32 tensors), `RangeError` (an equation that does not fit the operands, an ellipsis).",
  tvm: "relax.op.einsum",
});

hostIndexBuiltins.add(
  "vm.op.tensor_scatter",
  (cache: unknown, update: unknown, indices: unknown, axis: unknown, mode: unknown) => {
    const who = "tensor_scatter";
    const c = tensorArg(cache, "cache", who), u = tensorArg(update, "update", who, c.dtype);
    const ix = indices === undefined || indices === null
      ? undefined
      : tensorArg(indices, "write_indices", who);
    const a = axisOf(who, axis, c.shape.length);
    const circular = choiceArg(who, mode, "mode", ["linear", "circular"]) === "circular";
    if (u.shape.length !== c.shape.length || u.shape.some((d, k) => k !== a && d !== c.shape[k])) {
      throw new RangeError(
        `${who}: update ${formatShape(u.shape)} for cache ${formatShape(c.shape)}`,
      );
    }
    return onHost(who, [c, u, ix], ([cv, uv, iv]) => {
      const starts = iv === undefined ? [] : integersOf(iv, "write_indices", who);
      const n = c.shape[a];
      const cs = stridesOf(c.shape);
      return {
        shape: c.shape,
        dtype: c.dtype,
        fill(out) {
          (out as Float32Array).set(cv as Float32Array);
          for (let i = 0; i < u.size; i++) {
            const coords = coordsOf(i, u.shape);
            // The batch (axis 0) picks the start; the update's step along the axis adds to it.
            let k = (starts[coords[0]] ?? 0) + coords[a];
            if (circular) k = ((k % n) + n) % n;
            if (k < 0 || k >= n) throw new RangeError(`${who}: writes past the cache's ${n} rows`);
            coords[a] = k;
            (out as Float32Array)[coords.reduce((s, v, j) => s + v * cs[j], 0)] =
              (uv as Float32Array)[i];
          }
        },
      };
    });
  },
  {
    signature: "(cache, update, write_indices?, axis, mode) → tensor",
    summary:
      'ONNX\'s `TensorScatter`: a copy of `cache` with `update` written along `axis` starting, for each batch (axis 0), at `write_indices[batch]` (default 0); `mode` `"circular"` wraps positions past the end, `"linear"` refuses them. Computed on the host.',
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, an unknown mode), `RangeError` (an update that does not fit the cache, a write past its end).",
    tvm: null,
  },
);

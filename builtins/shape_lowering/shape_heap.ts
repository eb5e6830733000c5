/**
 * Shape heap builtins (seed 002): shape calculations on an integer array,
 * the "shape heap". `store_shape`/`load_shape` follow the design document;
 * `match_shape`/`make_shape` follow TVM's code conventions:
 *
 * ```text
 * match_shape(input, heap, ndim, code_0, value_0, …, code_{n-1}, value_{n-1}, err_ctx?)
 *   input: a tensor (its shape is used) or a ShapeTuple; per dimension i:
 *   0 AssertEqualToImm   shape[i] must equal value_i
 *   1 StoreToHeap        heap[value_i] = shape[i]
 *   2 NoOp               nothing
 *   3 AssertEqualToLoad  shape[i] must equal heap[value_i]
 * make_shape(heap, ndim, code_0, value_0, …)  -> ShapeTuple; per dimension:
 *   0 UseImm             value_i
 *   1 LoadShape          heap[value_i]
 * ```
 *
 * The heap is a CPU int64 tensor, as in TVM (a float64 tensor works too);
 * the builtins read and write it as numbers, exact up to 2^53, which covers
 * every shape.
 *
 * @module
 */

import { cpu } from "../../devices/cpu_device.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { MemoryScope } from "../../devices/memory_scope.ts";
import { contextPrefix, describe } from "../describe.ts";
import { checkDims, checkWritable, shapeArg } from "../validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const shapeHeapBuiltins = new BuiltinTable("Shape heap", import.meta.url);

/**
 * The per-dimension codes of `vm.builtin.match_shape(input, heap, ndim,
 * code_0, value_0, …, err_ctx?)`, TVM's `MatchShapeCode`: pass them with
 * `ib.imm(...)` instead of writing their numbers.
 *
 * - `AssertEqualToImm`: the dimension must equal `value`
 * - `StoreToHeap`: `heap[value]` = the dimension
 * - `NoOp`: nothing
 * - `AssertEqualToLoad`: the dimension must equal `heap[value]`
 *
 * @example Bind a 2-D input's dimensions into the shape heap
 * ```ts
 * import { ExecBuilder, MakeShapeCode, MatchShapeCode, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("transposed_shape", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.builtin.alloc_shape_heap", [ib.imm(2)], { dst: ib.r(1) });
 *   ib.emit_call("vm.builtin.match_shape", [
 *     ib.r(0), ib.r(1), ib.imm(2),
 *     ib.imm(MatchShapeCode.StoreToHeap), ib.imm(0), // heap[0] = rows
 *     ib.imm(MatchShapeCode.StoreToHeap), ib.imm(1), // heap[1] = columns
 *   ]);
 *   ib.emit_call("vm.builtin.make_shape", [
 *     ib.r(1), ib.imm(2),
 *     ib.imm(MakeShapeCode.LoadShape), ib.imm(1),
 *     ib.imm(MakeShapeCode.LoadShape), ib.imm(0),
 *   ], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * });
 * using x = tensor(new Float32Array(6), { shape: [2, 3] });
 * const out = await new VirtualMachine(ib.get()).invoke("transposed_shape", x);
 * assertEquals(String(out), "(3, 2)");
 * ```
 */
export const MatchShapeCode: {
  readonly AssertEqualToImm: 0;
  readonly StoreToHeap: 1;
  readonly NoOp: 2;
  readonly AssertEqualToLoad: 3;
} = {
  AssertEqualToImm: 0,
  StoreToHeap: 1,
  NoOp: 2,
  AssertEqualToLoad: 3,
} as const;

/**
 * The per-dimension codes of `vm.builtin.make_shape(heap, ndim, code_0,
 * value_0, …)`, TVM's `MakeShapeCode`: `UseImm` makes the dimension `value`,
 * `LoadShape` makes it `heap[value]`. See `MatchShapeCode` for an example.
 *
 * @example
 * ```ts
 * import { MakeShapeCode } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals([MakeShapeCode.UseImm, MakeShapeCode.LoadShape], [0, 1]);
 * ```
 */
export const MakeShapeCode: { readonly UseImm: 0; readonly LoadShape: 1 } = {
  UseImm: 0,
  LoadShape: 1,
} as const;

/**
 * A shape heap's elements as numbers: an int64 tensor (what
 * `alloc_shape_heap` makes, as TVM does) or a float64 one (relaxvm's heaps
 * before int64 existed), on the CPU. Values are shape extents and symbolic
 * integers, exact as numbers below 2^53.
 */
export class ShapeHeapView {
  /** Number of slots. */
  readonly length: number;
  readonly #ints: BigInt64Array | null;
  readonly #floats: Float64Array | null;
  readonly #heap: NDArray | null;
  readonly #who: string;

  /** Views `heap`'s elements (for builtin `who`); null: no heap (no slots). */
  constructor(heap: NDArray | null, who = "shape heap") {
    this.#heap = heap;
    this.#who = who;
    const view = heap === null ? new Float64Array(0) : heap.cpuView();
    this.length = view.length;
    this.#ints = view instanceof BigInt64Array ? view : null;
    this.#floats = view instanceof BigInt64Array ? null : view as Float64Array;
  }

  /** Slot `i` as a number; a value beyond 2^53 is a `RangeError` naming `who`. */
  get(i: number, who: string): number {
    if (this.#floats !== null) return this.#floats[i];
    const v = Number(this.#ints![i]);
    if (!Number.isSafeInteger(v)) {
      throw new RangeError(`${who}: heap[${i}] = ${this.#ints![i]} is beyond 2^53`);
    }
    return v;
  }

  /**
   * Stores integer `v` in slot `i`. A heap that is a constant of the
   * executable is shared by every VM running it: writing it is a `TypeError`.
   */
  set(i: number, v: number): void {
    if (this.#heap !== null) checkWritable(this.#heap, this.#who, "the shape heap");
    if (this.#floats !== null) this.#floats[i] = v;
    else this.#ints![i] = BigInt(v);
  }
}

/** What codes that need no heap see when the heap argument is null. */
const NO_HEAP = new ShapeHeapView(null);

/** The elements of a shape heap; anything else is a `TypeError` naming `who`. */
export function heapView(heap: unknown, who: string): ShapeHeapView {
  if (
    !(heap instanceof NDArray) || (heap.dtype !== "int64" && heap.dtype !== "float64") ||
    heap.device.kind !== "cpu"
  ) {
    throw new TypeError(
      `${who}: expected a shape heap (an int64 CPU tensor, from alloc_shape_heap), got ${
        describe(heap)
      }`,
    );
  }
  return new ShapeHeapView(heap, who);
}

/** `index` if it is a valid position in `heap`, else a `RangeError` naming `who`. */
export function heapIndex(heap: ShapeHeapView, index: unknown, who: string): number {
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= heap.length) {
    throw new RangeError(
      `${who}: heap index ${index} is out of range for a heap of ${heap.length}`,
    );
  }
  return index;
}

function shapeOfInput(input: unknown, who: string): readonly number[] {
  if (input instanceof NDArray) return input.shape;
  if (input instanceof ShapeTuple) return input.dims;
  throw new TypeError(`${who}: expected a tensor or ShapeTuple, got ${describe(input)}`);
}

shapeHeapBuiltins.add("vm.builtin.alloc_shape_heap", (...args: unknown[]) => {
  const size = args[0] instanceof MemoryScope ? args[1] : args[0];
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
    throw new RangeError(
      `alloc_shape_heap: size must be a non-negative integer, got ${describe(size)}`,
    );
  }
  // Allocated (or refused by the VM's memory limit) before anything is written.
  const heap = NDArray.empty([size], "int64", cpu());
  (heap.cpuView() as BigInt64Array).fill(0n);
  return heap;
}, {
  signature: "([vm,] size) → int64 CPU tensor (the heap)",
  summary:
    "A zeroed heap of `size` integers on the CPU. TVM's compiler passes `%vm` first (`call_builtin_with_ctx`); it is accepted and not needed.",
  dtypes: ["int64"],
  devices: ["cpu"],
  errors: "`RangeError` (size not a non-negative integer).",
  tvm: "vm.builtin.alloc_shape_heap (builtin.cc)",
});

shapeHeapBuiltins.add("vm.builtin.shape_of", (t: unknown) => {
  if (!(t instanceof NDArray)) {
    throw new TypeError(`shape_of: expected a tensor, got ${describe(t)}`);
  }
  return new ShapeTuple(t.shape);
}, {
  signature: "(t) → ShapeTuple",
  summary: "The shape of tensor `t`.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tensor).",
  tvm: "vm.builtin.shape_of (builtin.cc)",
});

shapeHeapBuiltins.add(
  "vm.builtin.store_shape",
  (shape: unknown, heap: unknown, ...indices: unknown[]) => {
    const dims = shapeOfInput(shape, "store_shape");
    const h = heapView(heap, "store_shape");
    if (indices.length !== dims.length) {
      throw new RangeError(
        `store_shape: ${indices.length} indices for a shape of ${dims.length} dimensions`,
      );
    }
    for (let i = 0; i < dims.length; i++) h.set(heapIndex(h, indices[i], "store_shape"), dims[i]);
    return null;
  },
  {
    signature: "(shape, heap, ...indices) → null",
    summary:
      "`heap[indices[i]] = shape[i]`. TVM has no such builtin: it uses `match_shape` with StoreToHeap.",
    dtypes: ["int64", "float64"],
    devices: ["cpu"],
    errors:
      "`TypeError` (not a shape or heap, a heap that is a constant of the executable), `RangeError` (index count or range).",
    tvm: null,
  },
);

shapeHeapBuiltins.add("vm.builtin.load_shape", (heap: unknown, ...indices: unknown[]) => {
  const h = heapView(heap, "load_shape");
  const dims = indices.map((i) => h.get(heapIndex(h, i, "load_shape"), "load_shape"));
  return new ShapeTuple(checkDims(dims, "load_shape"));
}, {
  signature: "(heap, ...indices) → ShapeTuple",
  summary:
    "The ShapeTuple `(heap[i0], heap[i1], …)`. TVM has no such builtin: it uses `make_shape` with LoadShape.",
  dtypes: ["int64", "float64"],
  devices: ["cpu"],
  errors: "`TypeError`, `RangeError` (index out of range, a value that is not a dimension).",
  tvm: null,
});

shapeHeapBuiltins.add(
  "vm.builtin.match_shape",
  (input: unknown, heap: unknown, ndim: unknown, ...rest: unknown[]) => {
    const dims = shapeOfInput(input, "match_shape");
    const context = rest.length % 2 === 1 ? contextPrefix(rest.pop()) : "";
    const h = heap === null ? NO_HEAP : heapView(heap, "match_shape");
    if (dims.length !== ndim) {
      throw new RangeError(
        `${context}match_shape: expected ${ndim} dimensions, got shape [${dims.join(", ")}]`,
      );
    }
    if (rest.length !== 2 * dims.length) {
      throw new RangeError(
        `match_shape: ${rest.length / 2} codes for ${dims.length} dimensions`,
      );
    }
    for (let i = 0; i < dims.length; i++) {
      const code = rest[2 * i], value = rest[2 * i + 1] as number;
      switch (code) {
        case MatchShapeCode.AssertEqualToImm:
          if (dims[i] !== value) {
            throw new RangeError(
              `${context}match_shape: dimension ${i} is ${dims[i]}, expected ${value}`,
            );
          }
          break;
        case MatchShapeCode.StoreToHeap:
          h.set(heapIndex(h, value, "match_shape"), dims[i]);
          break;
        case MatchShapeCode.NoOp:
          break;
        case MatchShapeCode.AssertEqualToLoad: {
          const expected = h.get(heapIndex(h, value, "match_shape"), "match_shape");
          if (dims[i] !== expected) {
            throw new RangeError(
              `${context}match_shape: dimension ${i} is ${dims[i]}, expected ${expected}`,
            );
          }
          break;
        }
        default:
          throw new RangeError(`match_shape: unknown code ${code} for dimension ${i}`);
      }
    }
    return null;
  },
  {
    signature: "(input, heap, ndim, code, value, …, err_ctx?) → null",
    summary:
      "Checks or binds each of the first `ndim` dimensions of `input` (a tensor's shape, or a ShapeTuple) by its code (`MatchShapeCode`): 0 AssertEqualToImm, the dimension must equal `value`; 1 StoreToHeap, `heap[value]` = the dimension; 2 NoOp; 3 AssertEqualToLoad, the dimension must equal `heap[value]`. `heap` may be null when no code uses it. Returns null.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (input not a tensor or shape), `RangeError` (a dimension that does not match, prefixed with `err_ctx`; an unknown code).",
    tvm: "vm.builtin.match_shape (builtin.cc)",
  },
);

shapeHeapBuiltins.add(
  "vm.builtin.make_shape",
  (heap: unknown, ndim: unknown, ...rest: unknown[]) => {
    const h = heap === null ? NO_HEAP : heapView(heap, "make_shape");
    if (typeof ndim !== "number" || !Number.isSafeInteger(ndim) || rest.length !== 2 * ndim) {
      throw new RangeError(`make_shape: ${rest.length / 2} codes for ${ndim} dimensions`);
    }
    const dims: number[] = [];
    for (let i = 0; i < ndim; i++) {
      const code = rest[2 * i], value = rest[2 * i + 1] as number;
      if (code === MakeShapeCode.UseImm) dims.push(value);
      else if (code === MakeShapeCode.LoadShape) {
        dims.push(h.get(heapIndex(h, value, "make_shape"), "make_shape"));
      } else throw new RangeError(`make_shape: unknown code ${code} for dimension ${i}`);
    }
    return new ShapeTuple(checkDims(dims, "make_shape"));
  },
  {
    signature: "(heap, ndim, code, value, …) → ShapeTuple",
    summary:
      "A ShapeTuple of `ndim` dimensions, each by its code (`MakeShapeCode`): 0 UseImm, the dimension is `value`; 1 LoadShape, it is `heap[value]`.",
    dtypes: ["int64", "float64"],
    devices: ["cpu"],
    errors: "`RangeError` (code count, unknown code, heap index, a value that is not a dimension).",
    tvm: "vm.builtin.make_shape (builtin.cc)",
  },
);

shapeHeapBuiltins.add("vm.builtin.reshape", (t: unknown, shape: unknown) => {
  if (!(t instanceof NDArray)) {
    throw new TypeError(`reshape: expected a tensor, got ${describe(t)}`);
  }
  const dims = shapeArg(shape, "reshape");
  const size = dims.reduce((a, b) => a * b, 1);
  if (size !== t.size) {
    throw new RangeError(
      `reshape: cannot view shape [${t.shape.join(", ")}] as [${dims.join(", ")}]`,
    );
  }
  return new NDArray(t.storage, t.byteOffset, dims, t.dtype);
}, {
  signature: "(t, shape) → tensor (a view)",
  summary: "A view of `t` with a new shape of the same size (no copy).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not a tensor or shape), `RangeError` (a dimension that is not a non-negative integer, sizes differ).",
  tvm: "vm.builtin.reshape (builtin.cc), which also allows a smaller view",
});

shapeHeapBuiltins.add("vm.builtin.tensor_to_shape", (t: unknown) => {
  if (!(t instanceof NDArray) || t.shape.length !== 1) {
    throw new TypeError(`tensor_to_shape: expected a 1-D tensor, got ${describe(t)}`);
  }
  const toShape = (values: ArrayLike<number | bigint>) => {
    const dims = Array.from(values, Number);
    const bad = dims.findIndex((d) => !Number.isSafeInteger(d));
    if (bad >= 0) {
      throw new RangeError(
        `tensor_to_shape: element ${bad} (${values[bad]}) is not an integer below 2^53`,
      );
    }
    return new ShapeTuple(checkDims(dims, "tensor_to_shape"));
  };
  return t.device.kind === "cpu" ? toShape(t.dataSync()) : t.data().then(toShape);
}, {
  signature: "(t) → ShapeTuple",
  summary:
    "A ShapeTuple from the values of a 1-D tensor (read back from a GPU), int64 as TVM makes them, or any other dtype holding integers.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not 1-D), `RangeError` (a value that is not a non-negative integer below 2^53).",
  tvm: "vm.builtin.tensor_to_shape (builtin.cc), which takes only int16, int32 and int64",
});

/**
 * Symbolic prim values on the shape heap: TVM's shape lowering turns an
 * `R.Prim(value=n)` parameter into `match_prim_value` (check it, or store it
 * on the heap) and a symbolic prim value it returns into `make_prim_value`.
 * The codes are those of `match_shape` / `make_shape` (builtins/shape_lowering/shape_heap.ts):
 *
 * ```text
 * match_prim_value(value, heap, code, reg, err_ctx?)
 *   0 AssertEqualToImm   value must equal reg
 *   1 StoreToHeap        heap[reg] = value
 *   2 NoOp               nothing
 *   3 AssertEqualToLoad  value must equal heap[reg]
 * make_prim_value(heap, code, reg) -> number
 *   0 UseImm             reg
 *   1 LoadShape          heap[reg]
 * ```
 *
 * @module
 */

import { BuiltinTable } from "../builtin_table.ts";
import { contextPrefix, describe } from "../describe.ts";
import {
  heapIndex,
  heapView,
  MakeShapeCode,
  MatchShapeCode,
  type ShapeHeapView,
} from "./shape_heap.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const primValueBuiltins = new BuiltinTable("Prim values", import.meta.url);

function integer(v: unknown, what: string, who: string): number {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number" && Number.isSafeInteger(v)) return v;
  if (typeof v === "bigint" && Number.isSafeInteger(Number(v))) return Number(v);
  throw new TypeError(`${who}: ${what} must be an integer, got ${describe(v)}`);
}

/** The heap, which codes that read or write it need; null stands for "no heap". */
function heapFor(heap: unknown, who: string): ShapeHeapView {
  if (heap === null) {
    throw new TypeError(`${who}: this code needs a shape heap, got null`);
  }
  return heapView(heap, who);
}

primValueBuiltins.add(
  "vm.builtin.match_prim_value",
  (value: unknown, heap: unknown, code: unknown, reg: unknown, errCtx?: unknown) => {
    const who = "match_prim_value", ctx = contextPrefix(errCtx);
    const v = integer(value, "the value", who);
    const r = integer(reg, "the register", who);
    switch (code) {
      case MatchShapeCode.AssertEqualToImm:
        if (v !== r) {
          throw new RangeError(`${ctx}${who}: the value is ${v}, expected the constant ${r}`);
        }
        return null;
      case MatchShapeCode.StoreToHeap: {
        const h = heapFor(heap, who);
        h.set(heapIndex(h, r, who), v);
        return null;
      }
      case MatchShapeCode.NoOp:
        return null;
      case MatchShapeCode.AssertEqualToLoad: {
        const h = heapFor(heap, who);
        const expected = h.get(heapIndex(h, r, who), who);
        if (v !== expected) {
          throw new RangeError(
            `${ctx}${who}: the value is ${v}, expected ${expected} (heap[${r}], populated earlier)`,
          );
        }
        return null;
      }
      default:
        throw new RangeError(`${who}: unknown match code ${describe(code)}`);
    }
  },
  {
    signature: "(value, heap, code, reg, err_ctx?) → null",
    summary:
      "Checks the integer `value` by `code` (`MatchShapeCode`): 0 AssertEqualToImm, it must equal `reg`; 1 StoreToHeap, `heap[reg]` = value; 2 NoOp; 3 AssertEqualToLoad, it must equal `heap[reg]`. `heap` may be null when the code does not use it. Returns null.",
    dtypes: ["int64", "float64"],
    devices: ["cpu"],
    errors:
      "`TypeError` (value not an integer, no heap for a code that needs one), `RangeError` (a mismatch, prefixed with `err_ctx`; a heap index out of range; an unknown code).",
    tvm: "vm.builtin.match_prim_value (builtin.cc)",
  },
);

primValueBuiltins.add(
  "vm.builtin.make_prim_value",
  (heap: unknown, code: unknown, reg: unknown) => {
    const who = "make_prim_value";
    const r = integer(reg, "the register", who);
    if (code === MakeShapeCode.UseImm) return r;
    if (code === MakeShapeCode.LoadShape) {
      const h = heapFor(heap, who);
      return h.get(heapIndex(h, r, who), who);
    }
    throw new RangeError(`${who}: unknown shape code ${describe(code)}`);
  },
  {
    signature: "(heap, code, reg) → integer",
    summary:
      "The integer `reg` (code 0, UseImm) or `heap[reg]` (code 1, LoadShape). `heap` may be null for code 0.",
    dtypes: ["int64", "float64"],
    devices: ["cpu"],
    errors:
      "`TypeError` (no heap for code 1), `RangeError` (a heap index out of range, an unknown code).",
    tvm: "vm.builtin.make_prim_value (builtin.cc)",
  },
);

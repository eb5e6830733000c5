/**
 * The argument checks TVM's shape lowering (`VMShapeLower`) emits for every
 * parameter and return value of a Relax function, one per kind of value:
 *
 * ```text
 * check_tensor_info(x, ndim, err_ctx)          3 arguments: no dtype check
 * check_tensor_info(x, ndim, dtype, err_ctx)   4 arguments: dtype null = any
 * check_shape_info(s, ndim, err_ctx)           s a ShapeTuple
 * check_tuple_info(t, size, err_ctx)           t a tuple of exactly `size`
 * check_func_info(f, err_ctx)                  f a closure or packed function
 * check_prim_value_info(v, dtype, err_ctx)     v a number/boolean fit for dtype
 * ```
 *
 * `ndim` -1 accepts any rank. Each check returns null or throws: `TypeError`
 * when the value is of the wrong kind, `RangeError` when its rank or size is
 * wrong, `TypeError` when its dtype is. Messages start with the error context
 * (see `contextPrefix`), so they read
 * `ErrorContext(fn=main, loc=param[0], ...): check_tensor_info: expected ...`.
 * TVM: `src/runtime/vm/builtin.cc`, `vm.builtin.check_*_info`.
 *
 * @module
 */

import { NDArray } from "../../devices/ndarray.ts";
import { Closure } from "../../ground/closure.ts";
import { DataType, DTypeCode } from "../../ground/dtype.ts";
import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { tupleFields } from "../../ground/tuple.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { contextPrefix, describe } from "../describe.ts";
import { integerOrBooleanArg } from "../validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const runtimeCheckBuiltins = new BuiltinTable("Runtime checks", import.meta.url);

/** A dtype argument: a DataType or its spelling; null or undefined means "any". */
function dtypeArg(v: unknown, who: string): DataType | null {
  if (v === null || v === undefined) return null;
  if (v instanceof DataType) return v;
  if (typeof v === "string") {
    try {
      return DataType.parse(v);
    } catch (e) {
      throw new TypeError(`${who}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  throw new TypeError(`${who}: dtype must be a DataType or a string, got ${describe(v)}`);
}

runtimeCheckBuiltins.add("vm.builtin.check_tensor_info", (...args: unknown[]) => {
  const who = "check_tensor_info";
  const [x, ndimArg] = args;
  const [dt, errCtx] = args.length === 3 ? [null, args[2]] : [args[2], args[3]];
  const ctx = contextPrefix(errCtx);
  if (!(x instanceof NDArray)) {
    throw new TypeError(`${ctx}${who}: expected a tensor, got ${describe(x)}`);
  }
  const ndim = integerOrBooleanArg(ndimArg, "ndim", who);
  if (ndim !== -1 && x.shape.length !== ndim) {
    throw new RangeError(
      `${ctx}${who}: expected a tensor with ndim ${ndim}, got ndim ${x.shape.length} (shape [${
        x.shape.join(", ")
      }])`,
    );
  }
  const want = dtypeArg(dt, who);
  if (want !== null && want.toString() !== x.dtype) {
    throw new TypeError(`${ctx}${who}: expected a tensor with dtype ${want}, got ${x.dtype}`);
  }
  return null;
}, {
  signature: "(x, ndim, err_ctx) or (x, ndim, dtype, err_ctx) → null",
  summary:
    "Throws unless `x` is a tensor with `ndim` dimensions (-1: any) and, in the 4-argument form, dtype `dtype` (a DataType or string; null: any). As in TVM, the 3-argument form's third argument is the error context, not a dtype; the 2-argument form checks only the kind and rank. Returns null.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tensor, dtype differs), `RangeError` (rank differs).",
  tvm: "vm.builtin.check_tensor_info (builtin.cc)",
});

runtimeCheckBuiltins.add(
  "vm.builtin.check_shape_info",
  (s: unknown, ndimArg: unknown, errCtx?: unknown) => {
    const who = "check_shape_info", ctx = contextPrefix(errCtx);
    if (!(s instanceof ShapeTuple)) {
      throw new TypeError(`${ctx}${who}: expected a shape, got ${describe(s)}`);
    }
    const ndim = integerOrBooleanArg(ndimArg, "ndim", who);
    if (ndim !== -1 && s.length !== ndim) {
      throw new RangeError(`${ctx}${who}: expected a shape with ndim ${ndim}, got ${s}`);
    }
    return null;
  },
  {
    signature: "(s, ndim, err_ctx) → null",
    summary:
      "Throws unless `s` is a `ShapeTuple` (an array is not accepted, as in TVM) of length `ndim` (-1: any). Returns null.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a shape), `RangeError` (length differs).",
    tvm: "vm.builtin.check_shape_info (builtin.cc)",
  },
);

runtimeCheckBuiltins.add(
  "vm.builtin.check_tuple_info",
  (t: unknown, sizeArg: unknown, errCtx?: unknown) => {
    const who = "check_tuple_info", ctx = contextPrefix(errCtx);
    const fields = tupleFields(t);
    if (fields === undefined) {
      throw new TypeError(`${ctx}${who}: expected a tuple, got ${describe(t)}`);
    }
    const size = integerOrBooleanArg(sizeArg, "size", who);
    if (fields.length !== size) {
      throw new RangeError(
        `${ctx}${who}: expected a tuple with ${size} elements, got one with ${fields.length} elements`,
      );
    }
    return null;
  },
  {
    signature: "(t, size, err_ctx) → null",
    summary:
      "Throws unless `t` is a tuple (a VM tuple or an array) of exactly `size` elements (no wildcard, as in TVM). Returns null.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a tuple), `RangeError` (size differs).",
    tvm: "vm.builtin.check_tuple_info (builtin.cc)",
  },
);

runtimeCheckBuiltins.add("vm.builtin.check_func_info", (f: unknown, errCtx?: unknown) => {
  if (!(f instanceof Closure) && typeof f !== "function") {
    throw new TypeError(
      `${contextPrefix(errCtx)}check_func_info: expected a function, got ${describe(f)}`,
    );
  }
  return null;
}, {
  signature: "(f, err_ctx) → null",
  summary:
    "Throws unless `f` is callable: a closure (`make_closure`, a function reference `f[name]`) or a packed function. Returns null.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: "`TypeError`.",
  tvm: "vm.builtin.check_func_info (builtin.cc)",
});

runtimeCheckBuiltins.add(
  "vm.builtin.check_prim_value_info",
  (v: unknown, dtArg: unknown, errCtx?: unknown) => {
    const who = "check_prim_value_info", ctx = contextPrefix(errCtx);
    const dt = dtypeArg(dtArg, who);
    if (dt === null) throw new TypeError(`${ctx}${who}: a dtype is required`);
    if (v === null || typeof v === "object" || typeof v === "function") {
      throw new TypeError(`${ctx}${who}: expected a value of dtype ${dt}, got ${describe(v)}`);
    }
    const isInteger = (typeof v === "number" && Number.isInteger(v)) || typeof v === "bigint";
    let ok: boolean;
    switch (dt.code) {
      case DTypeCode.Bool:
      case DTypeCode.Int:
      case DTypeCode.UInt:
        ok = typeof v === "boolean" || isInteger;
        break;
      case DTypeCode.Float:
        ok = typeof v === "boolean" || typeof v === "number" || typeof v === "bigint";
        break;
      default:
        throw new TypeError(`${ctx}${who}: prim values of dtype ${dt} are not supported`);
    }
    if (!ok) {
      throw new TypeError(`${ctx}${who}: expected a value of dtype ${dt}, got ${describe(v)}`);
    }
    return null;
  },
  {
    signature: "(v, dtype, err_ctx) → null",
    summary:
      "Throws unless `v` is a scalar (not an object) that `dtype` can hold: for `bool`, a boolean or an integer; for `int*`/`uint*`, an integer (a number or a bigint) or a boolean; for `float*`, any number, bigint or boolean. As in TVM, the width is not range-checked (300 passes an `int8` check). Returns null.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (an object or null, a value of the wrong kind, a dtype prim values cannot have).",
    tvm: "vm.builtin.check_prim_value_info (builtin.cc)",
  },
);

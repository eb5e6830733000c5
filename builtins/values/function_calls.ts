/**
 * Calling functions the program holds as values: `call_tir_dyn` (a compiled
 * TIR kernel with its symbolic shape passed as scalars) and
 * `invoke_debug_func` (a registered debug hook such as `debug_print`).
 * Both need only their arguments, no VM state.
 *
 * @module
 */

import { NDArray } from "../../devices/ndarray.ts";
import { Closure } from "../../ground/closure.ts";
import { getGlobalFunc } from "../../ground/registry.ts";
import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { printable } from "../../ground/printable.ts";
import { elementReader } from "../../ground/dtype.ts";
import { formatNested } from "../../ground/inspect.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const callBuiltins = new BuiltinTable("Calls and debugging", import.meta.url);

/** Calls `f` (a closure or a packed function) with `args`. */
function callValue(f: unknown, args: unknown[], who: string): unknown {
  if (f instanceof Closure) return f.call(args);
  if (typeof f === "function") return f(...args);
  throw new TypeError(`${who}: expected a function, got ${describe(f)}`);
}

/**
 * `vm.builtin.call_tir_dyn`, described by the metadata it is registered with below.
 *
 * @example A JS "TIR function" that fills its output with a symbolic extent
 * ```ts
 * import { ExecBuilder, type NDArray, registerFunc, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * // The stand-in writes its output in place, as a TIR function does.
 * registerFunc("doc.tir.fill", (out: NDArray, n: number) => {
 *   (out.cpuView() as Float32Array).fill(n);
 * }, { override: true });
 * const ib = new ExecBuilder();
 * ib.declare_function("doc.tir.fill");
 * ib.function("main", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.builtin.shape_of", [ib.r(0)], { dst: ib.r(1) });
 *   ib.emit_call("vm.builtin.call_tir_dyn", [ib.f("doc.tir.fill"), ib.r(0), ib.r(1)]);
 *   ib.emit_ret(ib.r(0));
 * });
 * using x = tensor([0, 0, 0]);
 * await new VirtualMachine(ib.get()).invoke("main", x);
 * assertEquals([...x.dataSync()], [3, 3, 3]);
 * ```
 */
callBuiltins.add("vm.builtin.call_tir_dyn", (f: unknown, ...rest: unknown[]) => {
  const who = "call_tir_dyn";
  if (rest.length === 0) {
    throw new TypeError(`${who}: expected (f, args..., shape), got no shape`);
  }
  const last = rest.pop();
  const dims = last instanceof ShapeTuple
    ? last.dims
    : Array.isArray(last) && last.every((d) => Number.isSafeInteger(d))
    ? last as number[]
    : null;
  if (dims === null) {
    throw new TypeError(`${who}: the last argument must be a shape, got ${describe(last)}`);
  }
  return callValue(f, [...rest, ...dims], who);
}, {
  signature: "(f, a_1, …, a_k, shape) → what f returns",
  summary:
    "Calls `f(a_1, …, a_k, shape[0], …, shape[m-1])`, the trailing shape (a ShapeTuple or an array of integers) unpacked into scalar arguments, and returns what `f` returns (TIR functions write their outputs into arguments and return nothing). In relaxvm `f` is a JS function standing for the TIR function: a packed function passed as `ib.f(name)`, or a closure.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (fewer than 2 arguments, `f` not callable, the last argument not a shape), and whatever `f` throws.",
  tvm: "vm.builtin.call_tir_dyn (builtin.cc)",
});

callBuiltins.add(
  "vm.builtin.invoke_debug_func",
  (ioEffect: unknown, funcName: unknown, lineInfo: unknown, ...args: unknown[]) => {
    const who = "invoke_debug_func";
    if (ioEffect !== null && ioEffect !== undefined) {
      throw new TypeError(`${who}: io_effect must be null (lowered), got ${describe(ioEffect)}`);
    }
    if (typeof funcName !== "string") {
      throw new TypeError(`${who}: func_name must be a string, got ${describe(funcName)}`);
    }
    const fn = getGlobalFunc(funcName);
    if (fn === undefined) {
      throw new ReferenceError(
        `${who}: no packed function "${funcName}"; register it with registerFunc("${funcName}", fn)`,
      );
    }
    const result = fn(lineInfo, ...args);
    return result instanceof Promise ? result.then(() => null) : null;
  },
  {
    signature: "(io_effect, func_name, line_info, ...args) → io_effect (null)",
    summary:
      "Calls the registered packed function `func_name` as `func_name(line_info, ...args)`, discards its result (awaiting it when it is a Promise) and returns `io_effect`, which must be null (TVM's lowered `IOEffect`). Emitted for `nn.print_`/`nn.debug_func`, usually with `vm.builtin.debug_print`.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (io_effect not null, func_name not a string), `ReferenceError` (no function registered under func_name), and whatever the function throws.",
    tvm: "vm.builtin.invoke_debug_func (builtin.cc)",
  },
);

callBuiltins.add("vm.builtin.debug_print", (lineInfo: unknown, x: unknown) => {
  // Strings from the program are shown escaped: terminal escapes in them are not obeyed.
  const where = printable(String(lineInfo));
  if (!(x instanceof NDArray)) {
    console.log(`${where}:`, typeof x === "string" ? printable(x) : x);
    return null;
  }
  // Up to 1000 elements in full, as TVM prints them; beyond, their ends, reading only those (a
  // tensor of 2^27 elements joined into one string would take gigabytes, or kill the process).
  const print = (at: (i: number) => number | bigint) => {
    const data = x.size <= 1000
      ? `[${Array.from({ length: x.size }, (_, i) => at(i)).join(", ")}]`
      : formatNested(at, [x.size], { width: Infinity });
    console.log(`${where}: shape = (${x.shape.join(", ")}), dtype = ${x.dtype}, data =\n${data}`);
    return null;
  };
  if (x.device.kind === "cpu") return print(elementReader(x.dtype, x.readView()));
  return x.data().then((values) => print((i) => values[i]));
}, {
  signature: "(line_info, x) → null",
  summary:
    "Prints `<line_info>: shape = (2, 3), dtype = float32, data =` and the values of tensor `x` (read back from a GPU first), or the value itself when it is not a tensor. Returns null.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.debug_print (registered in Python, `python/tvm/runtime/vm.py`)",
});

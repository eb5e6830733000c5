/**
 * Runtime builtins: copying and moving values, printing, tuples, `If`
 * conditions, closures and device transfer. Each builtin's doc, body and
 * registration stand together.
 *
 * @module
 */

import { scalarTruth, tensorTruth } from "../../devices/condition.ts";
import { DLDeviceType } from "../../devices/device.ts";
import { findDevice } from "../../devices/find_device.ts";
import { MemoryScope } from "../../devices/memory_scope.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { Closure } from "../../ground/closure.ts";
import { Tuple, tupleFields } from "../../ground/tuple.ts";
import { printable } from "../../ground/printable.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { checkLive } from "../validate.ts";
import { runningLimit } from "../host_scratch.ts";
import { cpu } from "../../devices/cpu_device.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const valueBuiltins = new BuiltinTable(
  "Values, tuples, closures and devices",
  import.meta.url,
);

valueBuiltins.add("vm.builtin.copy", (x: unknown) => x, {
  signature: "(x) → x",
  summary: "The same value in another register (objects are shared, not copied).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.copy (builtin.cc)",
});

valueBuiltins.add("vm.builtin.move", (x: unknown) => x, {
  signature: "(x) → x",
  summary: "Like `vm.builtin.copy`; the source register is expected to be dead.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: null,
});

valueBuiltins.add("vm.builtin.print", (x: unknown) => {
  // A program's strings are the file's: terminal escapes in them are shown, not obeyed.
  console.log(typeof x === "string" ? printable(x) : x);
  return null;
}, {
  signature: "(x) → null",
  summary:
    "Prints a value with `console.log`; returns null. TVM has no such builtin: it uses `invoke_debug_func` with `vm.builtin.debug_print`.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: null,
});

valueBuiltins.add("vm.builtin.null_value", () => null, {
  signature: "() → null",
  summary: "The null value, for a register that holds nothing (TVM returns its `None` object).",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.null_value (builtin.cc)",
});

/** Host bytes a tuple of `n` fields is counted as: the object and its array of fields. */
const tupleBytes = (n: number) => 64 + 8 * n;

valueBuiltins.add("vm.builtin.make_tuple", (...fields: unknown[]) => {
  checkLive(fields, "make_tuple", "field");
  // Tuples are host memory a program can make without end (nested, in a loop): counted against
  // the VM's memory limit while they live.
  const limit = runningLimit(), bytes = tupleBytes(fields.length);
  if (limit === null) return new Tuple(fields);
  try {
    limit.take(bytes, cpu(), bytes);
  } catch (e) {
    throw new RangeError(`make_tuple: a tuple of ${fields.length} fields: ${(e as Error).message}`);
  }
  return new Tuple(fields).chargeTo(limit, bytes);
}, {
  signature: "(...fields) → tuple",
  summary:
    "A tuple holding the fields (users receive it as an array). Inside a VM its host memory (64 bytes plus 8 a field) counts against `maxMemoryBytes` while it lives.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`ReferenceError` (a field whose memory was released), `RangeError` (past the VM's memory limit).",
  tvm: "vm.builtin.make_tuple (builtin.cc)",
});

valueBuiltins.add("vm.builtin.tuple_getitem", (tuple: unknown, index: unknown) => {
  const fields = tupleFields(tuple);
  if (fields === undefined) {
    throw new TypeError(`tuple_getitem: expected a tuple, got ${describe(tuple)}`);
  }
  if (
    typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= fields.length
  ) {
    throw new RangeError(
      `tuple_getitem: index ${index} is out of range for a tuple of ${fields.length}`,
    );
  }
  return fields[index];
}, {
  signature: "(tuple, index) → field",
  summary: "Field `index` (the object itself, not a copy).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not a tuple), `RangeError` (index out of range; no negative indices, as in TVM).",
  tvm: "vm.builtin.tuple_getitem (builtin.cc)",
});

valueBuiltins.add("vm.builtin.tuple_reset_item", (tuple: unknown, index: unknown) => {
  const fields = tupleFields(tuple);
  if (fields === undefined) {
    throw new TypeError(`tuple_reset_item: expected a tuple, got ${describe(tuple)}`);
  }
  if (
    typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= fields.length
  ) {
    throw new RangeError(
      `tuple_reset_item: index ${index} is out of range for a tuple of ${fields.length}`,
    );
  }
  if (tuple instanceof Tuple) tuple.resetItem(index);
  else if (Object.isFrozen(tuple)) {
    throw new TypeError("tuple_reset_item: the tuple is a frozen array");
  } else (tuple as unknown[])[index] = null;
  return null;
}, {
  signature: "(tuple, index) → null",
  summary:
    "Sets field `index` to null, in place, releasing what it held (TVM's `LiftTransformParams` drops each weight from the bundled parameter tuple once it is consumed). Every holder of the tuple sees the null. Returns null.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tuple, a frozen array), `RangeError` (index out of range).",
  tvm: "vm.builtin.tuple_reset_item (builtin.cc)",
});

valueBuiltins.add("vm.builtin.read_if_cond", (x: unknown): boolean | Promise<boolean> => {
  const scalar = scalarTruth(x);
  if (scalar !== undefined) return scalar;
  if (x instanceof NDArray) return tensorTruth(x, "read_if_cond");
  throw new TypeError(
    `read_if_cond: expected a number, bigint, boolean or tensor, got ${describe(x)}`,
  );
}, {
  signature: "(x) → boolean",
  summary:
    "A boolean for `If` from a number, bigint, boolean or one-element tensor on any device, nonzero being true, the rule `If` itself uses (a GPU tensor is read back, so this call waits for the GPU).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (another kind of value, a tensor of more than one element).",
  tvm:
    "vm.builtin.read_if_cond (builtin.cc), which also reads element 0 of larger integer tensors and rejects float tensors and float numbers",
});

/**
 * Host bytes a closure capturing `n` values is counted as: the object, its
 * array of captured values and the function that calls its target (on Deno
 * 2.9 a closure of a VM function capturing one value takes about 226 bytes).
 */
const closureBytes = (n: number) => 240 + 8 * n;

valueBuiltins.add("vm.builtin.make_closure", (f: unknown, ...captured: unknown[]) => {
  checkLive(captured, "make_closure", "captured value");
  const wraps = f instanceof Closure;
  if (!wraps && typeof f !== "function") {
    throw new TypeError(`make_closure: expected a function reference, got ${describe(f)}`);
  }
  if (wraps && f.disposed) throw new ReferenceError(`make_closure: ${f} was disposed`);
  // Closures are host memory a program can make without end (a chain, each holding the last):
  // counted against the VM's memory limit while they live, as tuples are.
  const limit = runningLimit(), bytes = closureBytes(captured.length);
  if (limit !== null) {
    try {
      limit.take(bytes, cpu(), bytes);
    } catch (e) {
      throw new RangeError(
        `make_closure: a closure capturing ${captured.length} values: ${(e as Error).message}`,
      );
    }
  }
  const closure = wraps
    ? new Closure(f.name, (...args) => f.call(args), captured, f.owner ?? null).wraps(f)
    : new Closure(
      (f as { name: string }).name || "anonymous",
      f as (...a: unknown[]) => unknown,
      captured,
    );
  return limit === null ? closure : closure.chargeTo(limit, bytes);
}, {
  signature: "(f, ...captured) → closure",
  summary:
    "A closure of `f` (a function reference `f[name]`) that passes `captured` as its last parameters. Inside a VM its host memory (240 bytes plus 8 a captured value) counts against `maxMemoryBytes` while it lives.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not a function), `ReferenceError` (a captured value whose memory was released, a disposed closure), `RangeError` (past the VM's memory limit).",
  tvm: "vm.builtin.make_closure (builtin.cc); TVM accepts only VM functions",
});

valueBuiltins.add("vm.builtin.invoke_closure", (...all: unknown[]) => {
  const [closure, ...args] = all[0] instanceof MemoryScope ? all.slice(1) : all;
  if (closure instanceof Closure) return closure.call(args);
  if (typeof closure === "function") return closure(...args);
  throw new TypeError(`invoke_closure: expected a closure, got ${describe(closure)}`);
}, {
  signature: "([vm,] closure, ...args) → what the closure returns",
  summary:
    "Calls a closure (TVM passes `%vm` first; it is accepted and not needed) or a packed function.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not callable).",
  tvm: "vm.builtin.invoke_closure (builtin.cc)",
});

valueBuiltins.add("vm.builtin.to_device", (t: unknown, devType: unknown, devId: unknown) => {
  if (!(t instanceof NDArray)) {
    throw new TypeError(`to_device: expected a tensor, got ${describe(t)}`);
  }
  const device = findDevice(Number(devType), Number(devId ?? 0));
  if (device === undefined) {
    const kind = devType === DLDeviceType.WebGPU ? "WebGPU device" : `device of type ${devType}`;
    throw new Error(
      `to_device: no ${kind} with id ${devId} has been acquired (call await webgpu() first)`,
    );
  }
  if (device === t.device) return t;
  // CPU→GPU and GPU→GPU copies are queued in order; only GPU→CPU waits.
  return t.copyToFloating(device);
}, {
  signature: "(t, dev_type, dev_id) → tensor",
  summary:
    "A copy of tensor `t` on the device with DLPack type `dev_type` (1 = CPU, 15 = WebGPU) and index `dev_id`. The device must have been acquired (`await webgpu()`).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tensor), `Error` (no such device).",
  tvm:
    "vm.builtin.to_device (builtin.cc); TVM copies even to the same device, relaxvm returns the tensor itself then",
});

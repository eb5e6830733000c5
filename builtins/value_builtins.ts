/**
 * Runtime builtins: copying and moving values, printing, tuples, `If`
 * conditions, closures and device transfer. Each builtin's doc, body and
 * registration stand together.
 *
 * @module
 */

import { Closure } from "../ground/closure.ts";
import { DLDeviceType, findDevice } from "../devices/device.ts";
import { NDArray } from "../devices/ndarray.ts";
import { makeTuple } from "../ground/object.ts";
import { VMState } from "../devices/memory_scope.ts";
import { registerFunc } from "../ground/registry.ts";

/** `vm.builtin.copy(x)`: the same value in another register (objects are shared, as in TVM). */
registerFunc("vm.builtin.copy", (x: unknown) => x);

/** `vm.builtin.move(x)`: like copy; the source register is expected to be dead. */
registerFunc("vm.builtin.move", (x: unknown) => x);

/** `vm.builtin.print(x)`: prints a value with `console.log`; returns null. */
registerFunc("vm.builtin.print", (x: unknown) => {
  console.log(x);
  return null;
});

/** `vm.builtin.null_value()`: null. */
registerFunc("vm.builtin.null_value", () => null);

/** `vm.builtin.make_tuple(...fields)`: a tuple (an array) holding the fields. */
registerFunc("vm.builtin.make_tuple", (...fields: unknown[]) => makeTuple(fields));

/** `vm.builtin.tuple_getitem(tuple, index)`: one field. */
registerFunc("vm.builtin.tuple_getitem", (tuple: unknown, index: unknown) => {
  if (!Array.isArray(tuple)) {
    throw new TypeError(`tuple_getitem: expected a tuple, got ${describe(tuple)}`);
  }
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= tuple.length) {
    throw new RangeError(
      `tuple_getitem: index ${index} is out of range for a tuple of ${tuple.length}`,
    );
  }
  return tuple[index];
});

/**
 * `vm.builtin.read_if_cond(x)`: a boolean for `If` from a number, boolean
 * or one-element tensor on any device (a GPU tensor is read back, so this
 * call waits for the GPU).
 */
registerFunc("vm.builtin.read_if_cond", (x: unknown): boolean | Promise<boolean> => {
  if (typeof x === "number") return x !== 0;
  if (typeof x === "boolean") return x;
  if (x instanceof NDArray) {
    if (x.size !== 1) {
      throw new TypeError(
        `read_if_cond: expected a one-element tensor, got shape [${x.shape.join(", ")}]`,
      );
    }
    if (x.device.kind === "cpu") return x.cpuView()[0] !== 0;
    return x.data().then((d) => d[0] !== 0);
  }
  throw new TypeError(`read_if_cond: expected a number, boolean or tensor, got ${describe(x)}`);
});

/**
 * `vm.builtin.make_closure(f, ...captured)`: a closure of `f` (a function
 * reference `f[name]`) that passes `captured` as its last parameters.
 */
registerFunc("vm.builtin.make_closure", (f: unknown, ...captured: unknown[]) => {
  if (f instanceof Closure) return new Closure(f.name, (...args) => f.call(args), captured);
  if (typeof f === "function") {
    return new Closure(f.name || "anonymous", f as (...a: unknown[]) => unknown, captured);
  }
  throw new TypeError(`make_closure: expected a function reference, got ${describe(f)}`);
});

/**
 * `vm.builtin.invoke_closure([vm,] closure, ...args)`: calls a closure
 * (TVM passes `%vm` first; it is accepted and not needed).
 */
registerFunc("vm.builtin.invoke_closure", (...all: unknown[]) => {
  const [closure, ...args] = all[0] instanceof VMState ? all.slice(1) : all;
  if (closure instanceof Closure) return closure.call(args);
  if (typeof closure === "function") return closure(...args);
  throw new TypeError(`invoke_closure: expected a closure, got ${describe(closure)}`);
});

/**
 * `vm.builtin.to_device(t, dev_type, dev_id)`: a copy of tensor `t` on the
 * device with DLPack type `dev_type` (1 = CPU, 15 = WebGPU) and index
 * `dev_id`. The device must have been acquired (`await webgpu()`).
 */
registerFunc("vm.builtin.to_device", (t: unknown, devType: unknown, devId: unknown) => {
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
});

/** A short description of a value for error messages. */
export function describe(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "undefined";
  if (v instanceof NDArray) return v.toString();
  if (Array.isArray(v)) return `a tuple of ${v.length}`;
  if (typeof v === "object") return v.constructor?.name ?? "an object";
  return `${typeof v} ${String(v)}`;
}

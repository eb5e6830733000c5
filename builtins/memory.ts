/**
 * Memory builtins: storages and the tensors that view them (seed 001's
 * "memory planning" interface). A storage comes from the VM's allocator for
 * the device, reached through `%vm`; `alloc_tensor` views part of it.
 *
 * @module
 */

import { elementBytes } from "../ground/dtype.ts";
import { Storage } from "../devices/storage.ts";
import { VMObject } from "../ground/object.ts";
import { NDArray, shapeSize } from "../devices/ndarray.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import { BuiltinTable } from "./builtin_table.ts";
import { describe } from "./describe.ts";
import { dtypeArg, integerArg, shapeArg } from "./validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const memoryBuiltins = new BuiltinTable("Memory", import.meta.url);

memoryBuiltins.add(
  "vm.builtin.alloc_storage",
  (vm: unknown, shape: unknown, deviceIndex: unknown, dt: unknown, _scope?: unknown) => {
    const who = "alloc_storage";
    if (!(vm instanceof MemoryScope)) {
      throw new TypeError(`${who}: the first argument must be %vm (ib.vm_state())`);
    }
    const index = integerArg(deviceIndex, "device_index", who, 0);
    if (index >= vm.devices.length) {
      throw new RangeError(
        `${who}: device index ${index} is out of range: the VM has ${vm.devices.length} device(s)`,
      );
    }
    const nbytes = shapeSize(shapeArg(shape, who)) * elementBytes(dtypeArg(dt, who));
    if (!Number.isSafeInteger(nbytes)) {
      throw new RangeError(`${who}: ${nbytes} bytes is too large`);
    }
    return vm.allocatorFor(vm.devices[index]).alloc(nbytes);
  },
  {
    signature: "(vm, shape, device_index, dtype, scope?) → storage",
    summary:
      "A storage of `prod(shape) * sizeof(dtype)` bytes on the VM's device `device_index`, from its allocator.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (no `%vm`, not a shape or dtype), `RangeError` (no such device, a malformed shape, too large for the VM's memory limit).",
    tvm: "vm.builtin.alloc_storage (builtin.cc)",
  },
);

memoryBuiltins.add(
  "vm.builtin.alloc_tensor",
  (storage: unknown, offset: unknown, shape: unknown, dt: unknown) => {
    if (!(storage instanceof Storage)) {
      throw new TypeError(
        `alloc_tensor: expected a storage, got ${describe(storage)}`,
      );
    }
    if (storage.disposed) {
      throw new ReferenceError(
        "alloc_tensor: the storage was used after it was released",
      );
    }
    const d = dtypeArg(dt, "alloc_tensor");
    const s = shapeArg(shape, "alloc_tensor");
    const at = Number(offset);
    const nbytes = shapeSize(s) * elementBytes(d);
    if (!Number.isSafeInteger(at) || at < 0 || at % elementBytes(d) !== 0) {
      throw new RangeError(
        `alloc_tensor: offset ${offset} is not a non-negative multiple of ${elementBytes(d)}`,
      );
    }
    if (at + nbytes > storage.nbytes) {
      throw new RangeError(
        `alloc_tensor: a ${d} tensor of shape [${
          s.join(", ")
        }] (${nbytes} bytes) at offset ${at} does not fit in a storage of ${storage.nbytes} bytes`,
      );
    }
    return new NDArray(storage, at, s, d);
  },
  {
    signature: "(storage, offset, shape, dtype) → tensor",
    summary: "A tensor viewing `storage` from byte `offset`.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not a storage, shape or dtype), `ReferenceError` (a released storage), `RangeError` (a malformed shape, offset not aligned to the element size, does not fit).",
    tvm: "vm.builtin.alloc_tensor (builtin.cc)",
  },
);

memoryBuiltins.add("vm.builtin.kill", (value: unknown) => {
  if (value instanceof VMObject) {
    if (value.pinned) {
      throw new TypeError(
        `kill: ${value} is a constant of the executable, shared by every VM that runs it`,
      );
    }
    value.kill();
  }
  return null;
}, {
  signature: "(value) → null",
  summary:
    "Releases a tensor's or storage's memory to the allocator now; using it afterwards is an error. Constants of the executable cannot be killed. TVM overwrites the register with `null_value` and counts references.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (a constant of the executable, which every VM running it shares).",
  tvm: null,
});

memoryBuiltins.add("vm.builtin.ensure_zero_offset", (t: unknown) => {
  if (!(t instanceof NDArray)) {
    throw new TypeError(`ensure_zero_offset: expected a tensor, got ${describe(t)}`);
  }
  if (t.byteOffset === 0) return t;
  const out = NDArray.empty(t.shape, t.dtype, t.device);
  t.device.copyBlock(t.block, t.byteOffset, out.block, 0, t.nbytes);
  return out;
}, {
  signature: "(t) → tensor",
  summary:
    "`t` itself when it starts at byte 0 of its storage, else a copy of it in a new storage on the same device (for kernels that cannot take a byte offset). The copy is a device copy, queued in order on a GPU (no readback).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tensor).",
  tvm:
    "vm.builtin.ensure_zero_offset (builtin.cc); TVM also aliases a 64-byte-aligned CPU view without copying, which relaxvm's (storage, offset) tensors cannot express",
});

/**
 * Memory builtins: storages and the tensors that view them (seed 001's
 * "memory planning" interface). A storage comes from the VM's allocator for
 * the device, reached through `%vm`; `alloc_tensor` views part of it.
 *
 * @module
 */

import { type DataType, elementBytes, tensorDType } from "../ground/dtype.ts";
import { Storage } from "../devices/storage.ts";
import { VMObject } from "../ground/object.ts";
import { NDArray, shapeSize } from "../devices/ndarray.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import { BuiltinTable } from "./builtin_table.ts";
import { describe } from "./describe.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const memoryBuiltins = new BuiltinTable("Memory", import.meta.url);

function dims(shape: unknown, who: string): readonly number[] {
  if (shape instanceof ShapeTuple) return shape.dims;
  if (Array.isArray(shape)) return shape as number[];
  throw new TypeError(`${who}: expected a shape, got ${describe(shape)}`);
}

memoryBuiltins.add(
  "vm.builtin.alloc_storage",
  (vm: unknown, shape: unknown, deviceIndex: unknown, dt: unknown, _scope?: unknown) => {
    if (!(vm instanceof MemoryScope)) {
      throw new TypeError("alloc_storage: the first argument must be %vm (ib.vm_state())");
    }
    const device = vm.deviceAt(Number(deviceIndex));
    const nbytes = shapeSize(dims(shape, "alloc_storage")) *
      elementBytes(tensorDType(dt as string | DataType));
    return vm.allocatorFor(device).alloc(nbytes);
  },
  {
    signature: "(vm, shape, device_index, dtype, scope?) → storage",
    summary:
      "A storage of `prod(shape) * sizeof(dtype)` bytes on the VM's device `device_index`, from its allocator.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (no `%vm`), `RangeError` (no such device, too large).",
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
    const d = tensorDType(dt as string | DataType);
    const s = dims(shape, "alloc_tensor");
    const at = Number(offset);
    const nbytes = shapeSize(s) * elementBytes(d);
    if (!Number.isInteger(at) || at < 0 || at % elementBytes(d) !== 0) {
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
      "`TypeError`, `ReferenceError` (a released storage), `RangeError` (offset not aligned to the element size, does not fit).",
    tvm: "vm.builtin.alloc_tensor (builtin.cc)",
  },
);

memoryBuiltins.add("vm.builtin.kill", (value: unknown) => {
  if (value instanceof VMObject) value.kill();
  return null;
}, {
  signature: "(value) → null",
  summary:
    "Releases a tensor's or storage's memory to the allocator now; using it afterwards is an error. TVM overwrites the register with `null_value` and counts references.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
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

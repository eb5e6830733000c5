/**
 * `ExecBuilder[Symbol.dispose]()`: the builder's constant pool holds every
 * tensor constant until the builder is disposed (or collected); disposing it
 * releases them at once, executables made before keep their own, and
 * `get()` refuses afterwards. The ONNX importer relies on it so that a
 * failed import leaves nothing allocated.
 */

import { assertEquals, assertThrows } from "@std/assert";
import { cpu, ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { defaultAllocator } from "../devices/allocation_context.ts";

Deno.test("ExecBuilder dispose releases its constants; the executable keeps its own", async () => {
  const host = defaultAllocator(cpu());
  const before = host.stats().liveBytes;
  const ib = new ExecBuilder();
  const unused = tensor(new Float32Array(1000)); // interned, never used by the program
  ib.convert_constant(unused);
  const half = tensor([0.5], { shape: [] });
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.multiply", [ib.r(0), half], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  unused.dispose();
  half.dispose();
  const ex = ib.get();
  // The builder still holds both constants (4,000 + 4 bytes, however rounded).
  assertEquals(host.stats().liveBytes - before >= 4004, true);
  ib[Symbol.dispose]();
  {
    using vm = new VirtualMachine(ex);
    using x = tensor([2, 4]);
    using y = await vm.invoke("main", x) as NDArray;
    assertEquals([...y.dataSync()], [1, 2]);
  }
  ex.dispose();
  assertEquals(host.stats().liveBytes, before);
  assertThrows(() => ib.get(), ReferenceError, "disposed");
});

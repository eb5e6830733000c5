// Issue 28's plan steps on WebGPU: a tensor with a symbolic element offset (TVM's paged KV cache
// views one pages tensor per layer) is bound whole and the kernel reads from the offset it is
// passed, as TVM launches it. cumsum's workspace (alloc) runs in tvm_package_suite.ts.
import { assertEquals, assertRejects } from "@std/assert";
import { loadTVMPackage, NDArray, tensor, VMError } from "../../mod.ts";
import { elementwisePackage, elementwiseWGSL, packageFiles, values } from "../_tvm_packages.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest("TVM plan steps: a tensor at a symbolic element offset reaches the kernel", async (gpu) => {
  const { manifest, executable } = elementwisePackage("+");
  const m = structuredClone(manifest) as unknown as {
    kernels: { add: { wgsl: string; arg_types: string[] } };
    host_functions: { add: { params: Record<string, unknown>[]; body: { args: unknown[] }[] } };
  };
  // TVM's kernel for a buffer with elem_offset: the offset is one more scalar, added to indices.
  m.kernels.add.wgsl = elementwiseWGSL("add", "+")
    .replace("  n: i32,", "  n: i32,\n  a_off: i32,")
    .replace("A[i]", "A[podArgs.a_off + i]");
  m.kernels.add.arg_types.push("int32");
  m.host_functions.add.params[0].elem_offset = { var: "A_elem_offset" };
  m.host_functions.add.body[0].args.push({ var: "A_elem_offset" });
  using pkg = await loadTVMPackage(packageFiles(m, executable), { device: gpu });
  const vm = pkg.createVM({ moveInputs: false });
  using whole = tensor([100, 200, 1, 2, 3], { device: gpu });
  const view = new NDArray(whole.storage, 8, [3], "float32"); // whole[2:]
  try {
    using b = tensor([10, 20, 30], { device: gpu });
    using out = tensor(new Float32Array(3), { device: gpu });
    using r = await vm.invokeTensor("main", view, b, out);
    assertEquals(await values(r), [11, 22, 33]);
  } finally {
    view.release();
  }
});

gpuTest(
  "TVM plan steps: a scratch tensor beyond the device's limit fails the call, not the device",
  async (gpu) => {
    const { manifest, executable } = elementwisePackage("+");
    const m = structuredClone(manifest) as unknown as {
      host_functions: { add: { body: unknown[] } };
    };
    m.host_functions.add.body.unshift({ alloc: 3, dtype: "float32", shape: [2 ** 40] });
    using pkg = await loadTVMPackage(packageFiles(m, executable), { device: gpu });
    using a = tensor([1, 2], { device: gpu }), b = tensor([1, 2], { device: gpu });
    using out = tensor(new Float32Array(2), { device: gpu });
    await assertRejects(
      () => pkg.createVM().invoke("main", a, b, out),
      VMError,
      "Cannot allocate 4398046511104 bytes",
    );
    // The same VM's device runs the next package's kernels.
    m.host_functions.add.body[0] = { alloc: 3, dtype: "float32", shape: [4] };
    using ok = await loadTVMPackage(packageFiles(m, executable), { device: gpu });
    using r = await ok.createVM().invokeTensor("main", a, b, out);
    assertEquals(await values(r), [2, 4]);
  },
);

// vm.profile on WebGPU: GPU time per call from timestamp queries, and the GPU row of the trace.
import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { ExecBuilder, tensor, VirtualMachine } from "../../mod.ts";
import { main } from "../../cli/main.ts";
import { gpuTest } from "./suite_registry.ts";

function program() {
  const ib = new ExecBuilder();
  ib.function("layer", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.matmul", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.op.relu", [ib.r(2)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("layer", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("layer", [ib.r(2), ib.r(1)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  return ib.get();
}

gpuTest("profile: GPU time per call from timestamp queries (WebGPU)", async (gpu) => {
  const vm = new VirtualMachine(program(), gpu);
  const n = 64;
  using x = tensor(new Float32Array(n * n).fill(0.5), { shape: [n, n] }); // moved to the GPU
  const dispatches = gpu.dispatchCount;
  const report = await vm.profile("main", x, x);
  const kernels = gpu.dispatchCount - dispatches;
  assert(gpu.gpu.features.has("timestamp-query"), "webgpu() requests timestamp-query");
  assertEquals(report.gpu.timed, [String(gpu)]);
  assertEquals(report.gpu.unavailable, []);
  assertEquals(report.gpu.kernels, kernels);
  assertEquals(report.kernels.length, kernels);
  assertEquals(report.inputs, { tensors: 2, bytes: 2 * n * n * 4, device: String(gpu) });
  // Every kernel belongs to an operator's call; a layer's GPU time is its two operators'.
  for (const k of report.kernels) {
    assert(k.durationMs >= 0 && Number.isFinite(k.startMs));
    assert(report.calls[k.call].callee.startsWith("vm.op."), report.calls[k.call].callee);
  }
  for (const c of report.calls) {
    if (c.kind === "packed") assert(c.gpuSelfMs! > 0, `${c.callee} ran on the GPU`);
    else {
      const inner = report.calls.filter((d) => d.parent === c.id);
      const sum = inner.reduce((a, d) => a + d.gpuMs!, 0);
      assert(Math.abs(c.gpuMs! - sum) < 1e-9 && c.gpuSelfMs === 0);
    }
  }
  const rows = report.byFunction();
  const gpuTotal = rows.reduce((a, r) => a + r.gpuMs!, 0);
  assert(Math.abs(gpuTotal - report.gpu.totalMs) < 1e-9, "each kernel counted once");
  assert(report.gpu.totalMs > 0);
  // The table has a GPU column, the trace a GPU row with one slice per kernel.
  assertStringIncludes(report.table(), " GPU ms");
  assertStringIncludes(report.table().split("\n")[0], `kernels on ${gpu}`);
  const events = JSON.parse(JSON.stringify(report.chromeTrace())).traceEvents as {
    ph: string;
    tid: number;
    name: string;
    args?: { name?: string };
  }[];
  assertEquals(events.filter((e) => e.ph === "X" && e.tid === 2).length, kernels);
  assert(events.some((e) => e.ph === "M" && e.tid === 2 && e.args?.name === `${gpu} (GPU clock)`));
  assertEquals(vm.memory_stats(gpu).liveBytes, 0, "result and moved inputs released");
});

gpuTest("profile: a GPU already being timed is reported, not timed twice (WebGPU)", async (gpu) => {
  const vm = new VirtualMachine(program(), gpu);
  using x = tensor([[1, 2], [3, 4]], { device: gpu });
  const other = gpu.startTimer();
  if (typeof other === "string") throw new Error(other);
  try {
    const report = await vm.profile("main", x, x);
    assertEquals(report.gpu.timed, []);
    assertEquals(report.gpu.unavailable, [`${gpu} is already timing another profile`]);
    assert(report.calls.every((c) => c.gpuMs === null));
    assertStringIncludes(report.table(), `GPU time not measured: ${gpu} is already timing`);
  } finally {
    await other.finish();
  }
  assertEquals((await vm.profile("main", x, x)).gpu.timed, [String(gpu)], "free again");
});

gpuTest("cli: run and profile --device webgpu compute on the GPU and show GPU time", async () => {
  const printed: string[] = [];
  const log = console.log;
  console.log = (...parts: unknown[]) => printed.push(parts.map(String).join(" "));
  let codes: number[];
  try {
    // In this process (the GPU suites' child has no --allow-run); testdata/ holds the file.
    const file = "testdata/design_doc.rvm";
    codes = [
      await main(["run", file, "func0", "[1, 2]", "[3, 4]", "--device", "webgpu"]),
      await main(["profile", file, "func0", "[1, 2]", "[3, 4]", "--device", "webgpu"]),
    ];
  } finally {
    console.log = log;
  }
  assertEquals(codes, [0, 0], printed.join("\n"));
  const text = printed.join("\n");
  // func0 prints its sum with vm.builtin.print: the tensor is on the GPU.
  assertStringIncludes(text, "NDArray(float32, [2], webgpu(0))");
  assertStringIncludes(text, "[4, 6] (float32, shape [2])");
  assertStringIncludes(text, "; GPU ");
  assertStringIncludes(text, "Inputs moved to webgpu(0) before the call: 2 tensors, 16 B");
  assert(/^vm\.op\.add\s+packed\s+1\s.*\s[\d.]+$/m.test(text), text);
});

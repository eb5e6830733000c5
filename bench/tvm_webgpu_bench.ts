/**
 * The same models through TVM's WGSL kernels (a package from
 * `tools/tvm/export_webgpu.py`, loaded with `loadTVMPackage`) and through
 * relaxvm's hand-written WGSL (the same model in the DSL,
 * bench/_tvm_models.ts), with identical weights and inputs, in one process
 * on one WebGPU device:
 *
 * - `mlp_bench`: 256 → 1024 → 256 with relu, batch 64;
 * - `encoder_bench`: a pre-norm transformer encoder block, d 256, 4 heads,
 *   MLP 1024, sequence 64.
 *
 * ```sh
 * bash tools/tvm/setup.sh                  # once: the pinned TVM, to export the packages
 * deno run -A bench/tvm_webgpu_bench.ts    # exports into bench/.tvm_packages/ on first run
 * ```
 *
 * Each call is timed from the call to its result read back (so the GPU's
 * work is inside), after warm-up calls; the two sides alternate in rounds
 * so that a shared machine's load falls on both alike. Both outputs are
 * compared with TVM's own CPU build (`reference.json`). Then one profiled
 * call per side (`vm.profile`) gives the time per packed function: which
 * operator wins where.
 *
 * @module
 */

import {
  loadTVMPackage,
  type NDArray,
  type ProfileRow,
  tensor,
  VirtualMachine,
  webgpu,
} from "../mod.ts";
import { relaxvmEncoder, relaxvmMLP } from "./_tvm_models.ts";
import { float32s, maxRelativeDifference, type ReferenceCase } from "../tests/_tvm_packages.ts";
import { median } from "./_stats.ts";

const root = new URL("../", import.meta.url);
const packages = new URL("bench/.tvm_packages/", root);
const python = new URL("tools/tvm/.venv/bin/python", root);
const quick = Deno.args.includes("--quick");
const ROUNDS = quick ? 3 : 6, PER_ROUND = quick ? 2 : 4, WARMUP = 2;

const MODELS = [
  { name: "mlp_bench", relaxvm: () => relaxvmMLP() },
  { name: "encoder_bench", relaxvm: () => relaxvmEncoder(256, 4) },
];

async function ensurePackage(name: string): Promise<URL | null> {
  const dir = new URL(`${name}/`, packages);
  if (await Deno.stat(new URL("package.json", dir)).then(() => true, () => false)) return dir;
  if (!await Deno.stat(python).then(() => true, () => false)) return null;
  console.log(`exporting ${name} with TVM into ${dir.pathname} ...`);
  const { code, stderr } = await new Deno.Command(python, {
    args: ["tools/tvm/export_webgpu.py", name, dir.pathname],
    cwd: root,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (code !== 0) throw new Error(new TextDecoder().decode(stderr));
  return dir;
}

async function timeCall(vm: VirtualMachine, args: unknown[]): Promise<number> {
  const t0 = performance.now();
  const y = await vm.invokeTensor("forward", ...args);
  await y.data();
  const ms = performance.now() - t0;
  y.dispose();
  return ms;
}

function profileRows(rows: ProfileRow[]): string[] {
  return rows.filter((r) => r.kind === "packed" && !r.name.startsWith("vm.builtin."))
    .sort((a, b) => (b.gpuMs ?? b.selfMs) - (a.gpuMs ?? a.selfMs))
    .slice(0, 8)
    .map((r) =>
      `    ${r.name.padEnd(28)} calls ${String(r.calls).padStart(2)}  host ${
        r.selfMs.toFixed(2).padStart(6)
      } ms  gpu ${r.gpuMs === null ? "   n/a" : r.gpuMs.toFixed(2).padStart(6)} ms`
    );
}

if (import.meta.main) {
  const gpu = await webgpu();
  console.log(
    `WebGPU adapter: ${gpu.adapter.info?.description || gpu.adapter.info?.vendor || "?"}`,
  );
  const table: string[] = [
    "| model | TVM kernels (ms/call) | relaxvm kernels (ms/call) | TVM / relaxvm | dispatches TVM / relaxvm | max rel diff vs TVM llvm (TVM, relaxvm) |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const model of MODELS) {
    const dir = await ensurePackage(model.name);
    if (dir === null) {
      console.log(
        `${model.name}: skipped, no tools/tvm/.venv to export it with (bash tools/tvm/setup.sh)`,
      );
      continue;
    }
    using pkg = await loadTVMPackage(dir, { device: gpu });
    const tvmVM = pkg.createVM();
    const ownVM = new VirtualMachine(model.relaxvm(), gpu);
    const ref = (JSON.parse(await Deno.readTextFile(new URL("reference.json", dir))) as {
      cases: ReferenceCase[];
    }).cases[0];
    using x = tensor(float32s(ref.inputs[0].base64), { shape: ref.inputs[0].shape, device: gpu });
    const args = [x, ...pkg.params()];
    const want = float32s(ref.output.base64);
    const rel: number[] = [];
    for (const vm of [tvmVM, ownVM]) {
      using y = await vm.invokeTensor("forward", ...args) as NDArray;
      rel.push(maxRelativeDifference(await y.data() as Float32Array, want));
    }
    for (let i = 0; i < WARMUP; i++) for (const vm of [tvmVM, ownVM]) await timeCall(vm, args);
    const times: number[][] = [[], []];
    const dispatches = [0, 0];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const side of order) {
        const vm = side === 0 ? tvmVM : ownVM;
        for (let i = 0; i < PER_ROUND; i++) {
          const before = gpu.dispatchCount;
          times[side].push(await timeCall(vm, args));
          dispatches[side] = gpu.dispatchCount - before;
        }
      }
    }
    const [t, r] = times.map(median);
    table.push(
      `| ${model.name} | ${t.toFixed(2)} | ${r.toFixed(2)} | ${(t / r).toFixed(2)} | ${
        dispatches[0]
      } / ${dispatches[1]} | ${rel[0].toExponential(1)}, ${rel[1].toExponential(1)} |`,
    );
    for (const [label, vm] of [["TVM", tvmVM], ["relaxvm", ownVM]] as const) {
      const report = await vm.profile("forward", ...args);
      console.log(`  ${model.name}, ${label} kernels, one profiled call (slowest first):`);
      for (const line of profileRows(report.byFunction())) console.log(line);
    }
  }
  console.log(table.join("\n"));
}

/**
 * The largest launch grid each TVM package asks for, per kernel: the figures
 * behind `loadTVMPackage`'s `maxWorkgroupsPerDispatch` default (README,
 * "Running TVM-compiled models"). The package's executable runs on the CPU
 * with its host functions recording every launch instead of dispatching it
 * (kernels do not run; shapes, and so grids, are what they would be), so
 * no GPU is needed and a MiniLM call of 512 tokens costs nothing.
 *
 * ```sh
 * deno run -A bench/tvm_grid_sizes.ts            # MLP, encoder, MiniLM (if exported) at their largest
 * deno run -A bench/tvm_grid_sizes.ts 32 512     # MiniLM at batch 32, 512 tokens
 * deno run -A bench/tvm_grid_sizes.ts --dispatch  # the cheapest kernel at 2^16 … 2^21 workgroups
 * ```
 *
 * `--dispatch` times, on the WebGPU adapter, one call of a package whose
 * kernel (64 threads a workgroup, a bounds check and nothing else for all
 * but 4 of them) runs over a grid the caller gives (tests/_tvm_packages.ts's
 * `gridPackage`), from the call to its result read back, median of 5, and
 * counts the ticks a 10 ms interval got in meanwhile: what a dispatch of
 * that size blocks the event loop for on this adapter.
 *
 * @module
 */

import { loadTVMPackage, type NDArray, tensor, webgpu } from "../mod.ts";
import { gridPackage, largestGrids } from "../tests/_tvm_packages.ts";
import { median } from "./_stats.ts";

const root = new URL("../", import.meta.url);

async function report(name: string, dir: URL, inputs: NDArray[]): Promise<void> {
  const found = [...(await largestGrids(dir, inputs)).values()].sort((a, b) =>
    b.workgroups - a.workgroups
  );
  const top = found[0];
  console.log(
    `${name} (inputs ${inputs.map((t) => `[${t.shape}]`).join(", ")}): ${found.length} kernels; ` +
      `largest grid ${top.kernel} [${top.grid}] = ${top.workgroups} workgroups of ${top.threads} threads`,
  );
  for (const l of found.slice(1, 4)) {
    console.log(`  then ${l.kernel}: ${l.workgroups} workgroups of ${l.threads} threads`);
  }
}

async function dispatchTimes(): Promise<void> {
  const gpu = await webgpu();
  using pkg = await loadTVMPackage(gridPackage(), {
    device: gpu,
    maxWorkgroupsPerDispatch: 2 ** 21,
  });
  const vm = pkg.createVM();
  using a = tensor([1, 2, 3, 4]), b = tensor([1, 1, 1, 1]);
  using out = tensor(new Float32Array(4), { device: gpu });
  await vm.invokeTensor("main", a, b, out, 1); // warm-up (the result is `out`)
  console.log(`${gpu.description}`);
  for (let log = 16; log <= 21; log++) {
    const ms: number[] = [];
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      await (await vm.invokeTensor("main", a, b, out, 2 ** log)).data();
      ms.push(performance.now() - start);
    }
    clearInterval(timer);
    console.log(
      `2^${log} workgroups of 64: ${median(ms).toFixed(1)} ms a call (median of 5), ` +
        `${ticks} ticks of a 10 ms interval in ${ms.reduce((x, y) => x + y).toFixed(0)} ms`,
    );
  }
}

if (Deno.args[0] === "--dispatch") {
  await dispatchTimes();
  Deno.exit(0);
}

const [batch, seq] = Deno.args.length >= 2 ? Deno.args.map(Number) : [1, 512];
const packages = new URL("testdata/tvm_webgpu/", root);
await report("mlp", new URL("mlp/", packages), [tensor(new Float32Array(4096 * 16), {
  shape: [4096, 16],
})]);
await report("encoder", new URL("encoder/", packages), [tensor(new Float32Array(4096 * 32), {
  shape: [4096, 32],
})]);
const minilm = new URL(".weights/tvm-minilm/", root);
try {
  Deno.statSync(new URL("package.json", minilm));
  await report("all-MiniLM-L6-v2", minilm, [
    tensor(new Int32Array(batch * seq), { shape: [batch, seq] }),
    tensor(new Float32Array(batch * seq).fill(1), { shape: [batch, seq] }),
  ]);
} catch (e) {
  if (!(e instanceof Deno.errors.NotFound)) throw e;
  console.log("no .weights/tvm-minilm: bash tools/tvm/export_minilm.sh exports it");
}

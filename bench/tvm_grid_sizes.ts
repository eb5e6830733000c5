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
 * ```
 *
 * @module
 */

import { type NDArray, tensor } from "../mod.ts";
import { largestGrids } from "../tests/_tvm_packages.ts";

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

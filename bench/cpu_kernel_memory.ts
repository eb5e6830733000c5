/**
 * The CPU kernels' WebAssembly memory around one large product under a VM
 * (issue 27, finding 6): `[6, K] @ [K, 8]` (K = 2^22 unless given), whose
 * scratch is a few hundred MiB, under a VM limited to `limit` MiB (default
 * none), then `vm.dispose()`, then the idle delay after which the kernels
 * drop a memory grown past 64 MiB. Prints the kernels' bytes and the
 * process's RSS after each step.
 *
 * ```sh
 * deno run -A --v8-flags=--expose-gc bench/cpu_kernel_memory.ts            # K = 2^22, no limit
 * deno run -A --v8-flags=--expose-gc bench/cpu_kernel_memory.ts 4194304 256 # under 256 MiB
 * ```
 *
 * @module
 */

import { cpu, ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { cpuKernelMemory, TRIM_IDLE_MS } from "../kernels/cpu/wasm/runtime.ts";

const MiB = 2 ** 20;
const K = Number(Deno.args[0] ?? 2 ** 22);
const limit = Number(Deno.args[1] ?? 0);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

function report(step: string): void {
  gc();
  const m = cpuKernelMemory();
  console.log(
    `${step}: kernels ${(m.sharedBytes / MiB).toFixed(1)} MiB shared + ` +
      `${(m.localBytes / MiB).toFixed(1)} MiB local (${m.trims} dropped), ` +
      `RSS ${(Deno.memoryUsage().rss / 1e6).toFixed(0)} MB`,
  );
}

report("start");
const ib = new ExecBuilder();
ib.function("mm", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.matmul", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
const vm = new VirtualMachine(ib.get(), cpu(), limit > 0 ? { maxMemoryBytes: limit * MiB } : {});
const a = tensor(new Float32Array(6 * K).fill(1), { shape: [6, K] });
const b = tensor(new Float32Array(K * 8).fill(1), { shape: [K, 8] });
const c = await vm.invoke("mm", a, b) as NDArray;
const right = [...c.cpuView() as Float32Array].every((x) => x === K);
report(
  `[6, ${K}] @ [${K}, 8]${limit > 0 ? ` under ${limit} MiB` : ""} (${right ? "right" : "WRONG"})`,
);
c.dispose();
a.dispose();
b.dispose();
vm.dispose();
report("after vm.dispose()");
await new Promise((resolve) => setTimeout(resolve, TRIM_IDLE_MS + 100));
report(`${TRIM_IDLE_MS + 100} ms later`);
await new Promise((resolve) => setTimeout(resolve, 1000));
report("a second later");

/**
 * The CPU kernels' WebAssembly memory is given back (issue 27, finding 6):
 * a kernel call's scratch counts against the calling VM's `maxMemoryBytes`
 * (scratch past it is not taken: the operator runs in TypeScript), and a
 * memory grown past `TRIM_BYTES` is dropped once the kernels are idle
 * (kernels/cpu/wasm/runtime.ts's `trimCpuKernelMemory`). Each case runs in
 * a child process: the kernels' memory is one per realm, and these sizes
 * must not stay behind in the test runner's.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";

/** Runs `script` (a module) in a fresh Deno and returns what it printed as JSON lines. */
async function runScript(script: string): Promise<Record<string, unknown>[]> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--v8-flags=--expose-gc", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(script));
  await writer.close();
  const timer = setTimeout(() => child.kill(), 120_000);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(timer);
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  return new TextDecoder().decode(stdout).trim().split("\n").map((l) => JSON.parse(l));
}

const lib = (path: string) => new URL(`../${path}`, import.meta.url).href;

/**
 * A child that runs `c = a[6, K] @ b[K, 8]` (all ones: every value is K)
 * and `attention(q[1, 1, D], k[1, T, D], v[1, T, D])` under a VM with
 * `limit` MiB (0: none), disposes it, waits past the trim delay, and runs
 * them again on a new VM; it prints the kernels' memory after each step.
 * K = 2^21: the product's scratch is 176 MiB (a block of B is K · 8 floats
 * and so is B's copy to pack); the attention's 2 · T · D floats = 128 MiB.
 */
function script(limit: number): string {
  return `
    import { cpu, ExecBuilder, tensor, VirtualMachine } from "${lib("mod.ts")}";
    import { cpuKernelMemory, TRIM_IDLE_MS } from "${lib("kernels/cpu/wasm/runtime.ts")}";
    const K = 2 ** 21, T = 2 ** 14, D = 2 ** 10;
    const ib = new ExecBuilder();
    ib.function("mm", { num_inputs: 2 }, () => {
      ib.emit_call("vm.op.matmul", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    ib.function("attn", { num_inputs: 3 }, () => {
      ib.emit_call("vm.op.attention", [ib.r(0), ib.r(1), ib.r(2)], { dst: ib.r(3) });
      ib.emit_ret(ib.r(3));
    });
    const exe = ib.get();
    const a = tensor(new Float32Array(6 * K).fill(1), { shape: [6, K] });
    const b = tensor(new Float32Array(K * 8).fill(1), { shape: [K, 8] });
    const q = tensor(new Float32Array(D).fill(0.5), { shape: [1, 1, D] });
    const kv = tensor(new Float32Array(T * D).fill(0.25), { shape: [1, T, D] });
    const kernels = () => { const m = cpuKernelMemory(); return m.sharedBytes + m.localBytes; };
    const report = (step, extra = {}) =>
      console.log(JSON.stringify({ step, kernelBytes: kernels(), trims: cpuKernelMemory().trims, ...extra }));
    async function run(step) {
      const vm = new VirtualMachine(exe, cpu(), ${limit} > 0 ? { maxMemoryBytes: ${limit} * 2 ** 20 } : {});
      const c = await vm.invoke("mm", a, b);
      const o = await vm.invoke("attn", q, kv, kv);
      report(step, { c: [...c.cpuView()].every((x) => x === K), o: o.cpuView()[D - 1] });
      c.dispose();
      o.dispose();
      vm.dispose();
    }
    await run("first run");
    const idle = () => new Promise((r) => setTimeout(r, TRIM_IDLE_MS + 100));
    await idle();
    report("after dispose and idle");
    await run("second run");
    await idle();
    report("idle again");
  `;
}

const MiB = 2 ** 20;

Deno.test("a VM's limit bounds the kernels' scratch: past it the operator runs in TypeScript", async () => {
  // Before: a VM limited to 128 MiB grew the kernels' memory to 176 MiB (the product's scratch),
  // outside its limit, for good.
  const lines = await runScript(script(128));
  for (const line of lines) {
    console.log(JSON.stringify(line));
    assert((line.kernelBytes as number) <= 128 * MiB, JSON.stringify(line));
  }
  assertEquals(lines[0].c, true);
  assertEquals(lines[0].o, 0.25);
});

Deno.test("the kernels' memory is given back once they are idle, and the next call works", async () => {
  // Before: 176 + 128 MiB of kernel memory stayed after vm.dispose(), never given back.
  const lines = await runScript(script(0));
  for (const line of lines) console.log(JSON.stringify(line));
  const [first, idle, second, idleAgain] = lines;
  assert((first.kernelBytes as number) > 256 * MiB, "the kernels grew: the case is real");
  assert((idle.kernelBytes as number) <= 64 * MiB, `after idle: ${idle.kernelBytes} bytes`);
  assertEquals(idle.trims, 1);
  // A fresh memory (and a fresh worker pool on it) computes the same.
  assertEquals([second.c, second.o], [true, 0.25]);
  assert((second.kernelBytes as number) > 256 * MiB);
  assert((idleAgain.kernelBytes as number) <= 64 * MiB);
  assertEquals(idleAgain.trims, 2);
});

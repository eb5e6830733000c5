/**
 * The CPU kernels' worker pool (kernels/cpu/wasm/thread_pool.ts): the
 * thread count of `cpu()`, what `cpuKernelInfo()` reports, and that a
 * script using the pool still exits on its own (a worker waiting for work
 * would keep Deno alive; the pool stops when idle).
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { cpu, cpuThreadSetting } from "../devices/cpu_device.ts";
import { cpuKernelInfo, cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";

Deno.test("cpu() sets the kernels' thread count and rejects a bad one", async () => {
  const before = cpuThreadSetting();
  try {
    assertThrows(() => cpu(0, { threads: 0 }), RangeError, "threads must be an integer");
    assertThrows(() => cpu(0, { threads: 1.5 }), RangeError, "got 1.5");
    assertEquals(cpuThreadSetting(), before, "a rejected setting changes nothing");
    cpu(0, { threads: 3 });
    assertEquals(await cpuThreadsReady(), 3);
    const info = cpuKernelInfo();
    assertEquals([info.threads, info.threadsRequested, info.threadsReason], [3, 3, null]);
    cpu(0, { threads: 1 });
    assertEquals(await cpuThreadsReady(), 1);
  } finally {
    cpu(0, { threads: before });
  }
});

Deno.test("a script whose products ran on the worker pool exits by itself", async () => {
  const script = `
    import { installBuiltins } from "${new URL("../builtins/install.ts", import.meta.url)}";
    import { getGlobalFunc } from "${new URL("../ground/registry.ts", import.meta.url)}";
    import { tensor } from "${new URL("../devices/tensor.ts", import.meta.url)}";
    import { cpu } from "${new URL("../devices/cpu_device.ts", import.meta.url)}";
    import { cpuThreadsReady } from "${new URL("../kernels/cpu/wasm/runtime.ts", import.meta.url)}";
    installBuiltins();
    cpu(0, { threads: 2 });
    console.log("threads", await cpuThreadsReady());
    const n = 96;
    const a = tensor(Array.from({ length: n * n }, (_, i) => (i % 7) - 3), { shape: [n, n] });
    const b = tensor(Array.from({ length: n * n }, (_, i) => (i % 5) - 2), { shape: [n, n] });
    const c = getGlobalFunc("vm.op.matmul")(a, b);
    const got = c.cpuView();
    let want = 0;
    for (let k = 0; k < n; k++) want += ((k % 7) - 3) * (((k * n + 5) % 5) - 2);
    console.log("c[0][5]", got[5] === want);
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(script));
  await writer.close();
  const timer = setTimeout(() => child.kill(), 30_000);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(timer);
  const out = new TextDecoder().decode(stdout);
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  assert(out.includes("threads 2"), out);
  assert(out.includes("c[0][5] true"), out);
});

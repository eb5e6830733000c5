/**
 * The CPU kernels' worker pool (kernels/cpu/wasm/thread_pool.ts): the
 * thread count of `cpu()`, what `cpuKernelInfo()` reports, and that a
 * script using the pool still exits on its own (a worker waiting for work
 * would keep Deno alive; the pool stops when idle).
 *
 * @module
 */

import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import { cpu, cpuThreadSetting } from "../devices/cpu_device.ts";
import {
  cpuKernelInfo,
  cpuThreadsReady,
  forgetCpuKernels,
  setCpuKernelMode,
} from "../kernels/cpu/wasm/runtime.ts";
import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { randomValues } from "../bench/_random.ts";

installBuiltins();

/**
 * Runs `script` in a fresh Deno (read permission only), killed after
 * `timeoutMs`; asserts it exited with 0 (by itself: an idle pool must not keep
 * it alive) and returns what it printed.
 */
async function runScript(script: string, timeoutMs: number): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(script));
  await writer.close();
  const timer = setTimeout(() => child.kill(), timeoutMs);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(timer);
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  return new TextDecoder().decode(stdout);
}

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
    const description = cpu().description;
    assert(/^cpu\(0\): WebAssembly (relaxed-simd|simd128) kernels, 3 threads$/.test(description));
    setCpuKernelMode("typescript");
    assertEquals(cpu().description, "cpu(0): TypeScript kernels (setCpuKernelMode)");
    setCpuKernelMode("auto");
    cpu(0, { threads: 1 });
    assertEquals(await cpuThreadsReady(), 1);
    assertStringIncludes(cpu().description, "kernels, 1 thread");
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
  const out = await runScript(script, 30_000);
  assert(out.includes("threads 2"), out);
  assert(out.includes("c[0][5] true"), out);
});

Deno.test("the pool is used from the first product, without a turn of the event loop, and a pool closed as it starts lets the script exit", async () => {
  // A model called in a loop of awaits never lets the event loop take the workers' "ready"
  // messages: the pool must not wait for them. Here nothing awaits at all until the end.
  const script = `
    import { installBuiltins } from "${new URL("../builtins/install.ts", import.meta.url)}";
    import { getGlobalFunc } from "${new URL("../ground/registry.ts", import.meta.url)}";
    import { tensor } from "${new URL("../devices/tensor.ts", import.meta.url)}";
    import { cpu } from "${new URL("../devices/cpu_device.ts", import.meta.url)}";
    import { cpuKernelInfo, cpuPoolWorkerBlocks } from "${new URL(
    "../kernels/cpu/wasm/runtime.ts",
    import.meta.url,
  )}";
    installBuiltins();
    const matmul = getGlobalFunc("vm.op.matmul");
    const n = 96;
    const a = tensor(Array.from({ length: n * n }, (_, i) => (i % 7) - 3), { shape: [n, n] });
    const b = tensor(Array.from({ length: n * n }, (_, i) => (i % 5) - 2), { shape: [n, n] });
    let want = 0;
    for (let k = 0; k < n; k++) want += ((k % 7) - 3) * (((k * n + 5) % 5) - 2);
    // A pool of 3 closed at once (its workers may not have started): they must not keep us alive.
    cpu(0, { threads: 3 });
    let ok = matmul(a, b).cpuView()[5] === want;
    console.log("first pool", cpuKernelInfo().threads);
    cpu(0, { threads: 2 });
    const until = performance.now() + 20000;
    let products = 0;
    do {
      ok &&= matmul(a, b).cpuView()[5] === want;
      products++;
    } while (cpuPoolWorkerBlocks() === 0 && performance.now() < until);
    console.log("threads", cpuKernelInfo().threads, "worker blocks", cpuPoolWorkerBlocks() > 0);
    console.log("all equal", ok, products > 0);
  `;
  const out = await runScript(script, 60_000);
  assert(out.includes("first pool 3"), out);
  assert(out.includes("threads 2 worker blocks true"), out);
  assert(out.includes("all equal true true"), out);
});

Deno.test("switching the thread count between products, pools closed as they start, neither hangs nor loses a block", async () => {
  // Each switch closes a pool whose workers may be starting, running or spinning, and opens
  // another on the same memory at once: an old worker must leave, or compute its block right.
  const script = `
    import { installBuiltins } from "${new URL("../builtins/install.ts", import.meta.url)}";
    import { getGlobalFunc } from "${new URL("../ground/registry.ts", import.meta.url)}";
    import { tensor } from "${new URL("../devices/tensor.ts", import.meta.url)}";
    import { cpu } from "${new URL("../devices/cpu_device.ts", import.meta.url)}";
    installBuiltins();
    const matmul = getGlobalFunc("vm.op.matmul");
    const n = 96;
    const a = tensor(Array.from({ length: n * n }, (_, i) => (i % 7) - 3), { shape: [n, n] });
    const b = tensor(Array.from({ length: n * n }, (_, i) => (i % 5) - 2), { shape: [n, n] });
    const want = matmul(a, b).cpuView().slice();
    let bad = 0;
    for (let s = 0; s < 30; s++) {
      cpu(0, { threads: 2 + (s % 2) });
      for (let r = 0; r < 1 + (s % 4); r++) {
        const got = matmul(a, b).cpuView();
        for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) bad++;
      }
      if (s % 5 === 4) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    console.log("wrong elements", bad);
  `;
  const out = await runScript(script, 60_000);
  assert(out.includes("wrong elements 0"), out);
});

Deno.test("products larger than one block or chunk equal a plain loop, on one and two threads", async () => {
  const before = cpuThreadSetting();
  const linear = getGlobalFunc("vm.op.linear")!, matmul = getGlobalFunc("vm.op.matmul")!;
  // Decode-shaped linears over many weight chunks (K not a multiple of 8: padded rows),
  // and a product of several blocks of A and B (K large enough that B splits).
  const cases: { op: "linear" | "matmul"; M: number; K: number; N: number }[] = [
    { op: "linear", M: 2, K: 1001, N: 2100 },
    { op: "linear", M: 1, K: 4096, N: 700 },
    { op: "linear", M: 3, K: 1000, N: 1500 }, // several rows over each chunk
    { op: "matmul", M: 70, K: 2100, N: 530 },
    // Blocks of k (gemm.ts's KC): K = 1024 (A's rows padded against cache-set aliasing) with
    // few tile rows and a tail (the column-panel split), K = 517 (blocks of 260 and 257) with
    // many tile rows, and a linear's kept-free transposed B in blocks of k.
    { op: "matmul", M: 13, K: 1024, N: 20 },
    { op: "matmul", M: 125, K: 517, N: 37 },
    { op: "linear", M: 40, K: 777, N: 33 },
  ];
  try {
    setCpuKernelMode("wasm");
    for (const threads of [1, 2]) {
      cpu(0, { threads });
      assertEquals(await cpuThreadsReady(), threads);
      for (const { op, M, K, N } of cases) {
        const av = randomValues(M * K, 1), bv = randomValues(K * N, 2);
        using a = tensor(av, { shape: [M, K] });
        using b = tensor(bv, { shape: op === "linear" ? [N, K] : [K, N] });
        using c = (op === "linear" ? linear(a, b) : matmul(a, b)) as NDArray;
        const got = await c.data() as Float32Array;
        for (let i = 0; i < M; i++) {
          for (let j = 0; j < N; j++) {
            let want = 0;
            for (let k = 0; k < K; k++) {
              want += av[i * K + k] * (op === "linear" ? bv[j * K + k] : bv[k * N + j]);
            }
            const err = Math.abs(got[i * N + j] - want);
            if (err > 1e-5 * K) {
              throw new Error(
                `${op} ${M}×${K}×${N}, ${threads} thread(s): [${i}, ${j}] = ${
                  got[i * N + j]
                }, expected ${want}`,
              );
            }
          }
        }
      }
    }
  } finally {
    setCpuKernelMode("auto");
    cpu(0, { threads: before });
  }
});

Deno.test("batched products with broadcast batch axes over several blocks of k equal a plain loop", async () => {
  const before = cpuThreadSetting();
  const matmul = getGlobalFunc("vm.op.matmul")!;
  // [2, 1, M, K] @ [3, K, N] -> [2, 3, M, N]: each of the six products has its own pair of
  // operands (A repeated along the second axis, B along the first), M = 7 rows (one tile and a
  // tail row), K = 300 (blocks of 152 and 148 steps), N = 20 (a partial panel).
  const M = 7, K = 300, N = 20;
  const av = randomValues(2 * M * K, 3), bv = randomValues(3 * K * N, 4);
  try {
    setCpuKernelMode("wasm");
    for (const threads of [1, 2]) {
      cpu(0, { threads });
      assertEquals(await cpuThreadsReady(), threads);
      using a = tensor(av, { shape: [2, 1, M, K] });
      using b = tensor(bv, { shape: [3, K, N] });
      using c = matmul(a, b) as NDArray;
      assertEquals(c.shape, [2, 3, M, N]);
      const got = await c.data() as Float32Array;
      for (let i0 = 0; i0 < 2; i0++) {
        for (let j0 = 0; j0 < 3; j0++) {
          for (let i = 0; i < M; i++) {
            for (let j = 0; j < N; j++) {
              let want = 0;
              for (let k = 0; k < K; k++) {
                want += av[(i0 * M + i) * K + k] * bv[(j0 * K + k) * N + j];
              }
              const at = ((i0 * 3 + j0) * M + i) * N + j;
              assert(
                Math.abs(got[at] - want) <= 1e-5 * K,
                `${threads} thread(s): [${i0}, ${j0}, ${i}, ${j}] = ${got[at]}, expected ${want}`,
              );
            }
          }
        }
      }
    }
  } finally {
    setCpuKernelMode("auto");
    cpu(0, { threads: before });
  }
});

Deno.test("where workers cannot start, the kernels run on one thread, say why, and do not retry", async () => {
  const before = cpuThreadSetting();
  const RealWorker = globalThis.Worker;
  let attempts = 0;
  // What a page whose CSP has no `worker-src blob:` does to `new Worker(blobURL)`.
  globalThis.Worker = class {
    constructor() {
      attempts++;
      throw new DOMException("Refused to create a worker from a blob: URL", "SecurityError");
    }
  } as unknown as typeof Worker;
  forgetCpuKernels();
  try {
    cpu(0, { threads: 2 });
    assertEquals(await cpuThreadsReady(), 1);
    const info = cpuKernelInfo();
    assertEquals(info.threads, 1);
    assertStringIncludes(info.threadsReason ?? "", "Refused to create a worker");
    assertStringIncludes(cpu().description, "1 thread (Refused to create a worker");
    // Products still compute, on the calling thread, and the pool is not retried each call.
    const matmul = getGlobalFunc("vm.op.matmul")!;
    const av = randomValues(40 * 30, 7), bv = randomValues(30 * 50, 8);
    using a = tensor(av, { shape: [40, 30] });
    using b = tensor(bv, { shape: [30, 50] });
    setCpuKernelMode("wasm");
    for (let round = 0; round < 3; round++) {
      using c = matmul(a, b) as NDArray;
      const got = await c.data() as Float32Array;
      let want = 0;
      for (let k = 0; k < 30; k++) want += av[39 * 30 + k] * bv[k * 50 + 49];
      assert(Math.abs(got[39 * 50 + 49] - want) < 1e-4);
    }
    assertEquals(attempts, 1);
  } finally {
    globalThis.Worker = RealWorker;
    setCpuKernelMode("auto");
    forgetCpuKernels();
    cpu(0, { threads: before });
  }
});

Deno.test("where a shared memory cannot be reserved, the kernels take an ordinary one and one thread", async () => {
  const before = cpuThreadSetting();
  const RealMemory = WebAssembly.Memory;
  // What a 32-bit engine does when the shared memory's 2 GiB maximum cannot be reserved.
  (WebAssembly as { Memory: unknown }).Memory = function (d: WebAssembly.MemoryDescriptor) {
    if (d.shared) throw new RangeError("WebAssembly.Memory(): could not allocate memory");
    return new RealMemory(d);
  };
  forgetCpuKernels();
  try {
    cpu(0, { threads: 2 });
    assertEquals(await cpuThreadsReady(), 1);
    const info = cpuKernelInfo();
    assert(info.simd !== null, "WebAssembly kernels are still used");
    assertStringIncludes(info.threadsReason ?? "", "shared memory could not be reserved");
    setCpuKernelMode("wasm");
    const matmul = getGlobalFunc("vm.op.matmul")!;
    const av = randomValues(12 * 7, 9), bv = randomValues(7 * 10, 10);
    using a = tensor(av, { shape: [12, 7] });
    using b = tensor(bv, { shape: [7, 10] });
    using c = matmul(a, b) as NDArray;
    const got = await c.data() as Float32Array;
    let want = 0;
    for (let k = 0; k < 7; k++) want += av[11 * 7 + k] * bv[k * 10 + 9];
    assert(Math.abs(got[11 * 10 + 9] - want) < 1e-5);
  } finally {
    (WebAssembly as { Memory: unknown }).Memory = RealMemory;
    setCpuKernelMode("auto");
    forgetCpuKernels();
    cpu(0, { threads: before });
  }
});

Deno.test("a product whose scratch cannot be had (past 2 GiB) runs on the TypeScript kernel", async () => {
  const grow = WebAssembly.Memory.prototype.grow;
  forgetCpuKernels();
  await cpuThreadsReady(); // fresh kernels: a memory of one page, so any product must grow it
  let refused = 0;
  WebAssembly.Memory.prototype.grow = function () {
    refused++;
    throw new RangeError("WebAssembly.Memory.grow(): Maximum memory size exceeded");
  };
  setCpuKernelMode("wasm");
  try {
    const M = 600, K = 700, N = 500;
    const av = randomValues(M * K, 11), bv = randomValues(K * N, 12);
    using a = tensor(av, { shape: [M, K] });
    using b = tensor(bv, { shape: [K, N] });
    using c = getGlobalFunc("vm.op.matmul")!(a, b) as NDArray;
    const got = await c.data() as Float32Array;
    for (const [i, j] of [[0, 0], [M - 1, N - 1], [317, 211]]) {
      let want = 0;
      for (let k = 0; k < K; k++) want += av[i * K + k] * bv[k * N + j];
      assert(
        Math.abs(got[i * N + j] - want) < 1e-3,
        `[${i}, ${j}] = ${got[i * N + j]}, expected ${want}`,
      );
    }
    assert(refused > 0, "the WebAssembly path asked for more memory");
  } finally {
    WebAssembly.Memory.prototype.grow = grow;
    setCpuKernelMode("auto");
    forgetCpuKernels();
  }
});

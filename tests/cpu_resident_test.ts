/**
 * Sealed weights' copies in the CPU kernels' WebAssembly memory
 * (kernels/cpu/wasm/resident.ts): a decode `linear` over a sealed weight
 * equals a plain loop on one and two threads, reuses its copy, and never
 * reads a stale one: every way to write the weight ends the seal first.
 *
 * @module
 */

import { assert, assertEquals, assertNotEquals } from "@std/assert";
import { cpu, cpuThreadSetting } from "../devices/cpu_device.ts";
import {
  cpuThreadsReady,
  RESIDENT_BASE,
  setCpuKernelMode,
  wasmKernelsFor,
} from "../kernels/cpu/wasm/runtime.ts";
import {
  dropResidentCopies,
  residentCopy,
  residentLayout,
  residentRegion,
  residentStats,
} from "../kernels/cpu/wasm/resident.ts";
import { activateAllocators, defaultAllocator } from "../devices/allocation_context.ts";
import { MemoryLimit } from "../devices/allocator.ts";
import { cpuResidentSetting, DEFAULT_RESIDENT_BYTES } from "../devices/cpu_device.ts";
import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { dumpTensorCache, ExecBuilder, loadTensorCache, VirtualMachine } from "../mod.ts";
import { randomValues } from "../bench/_random.ts";

installBuiltins();
const linear = getGlobalFunc("vm.op.linear")!;
const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);

/** `x[M, K] @ w[N, K]ᵀ` in float64, a plain loop. */
function reference(xv: Float32Array, wv: Float32Array, M: number, K: number, N: number) {
  const out = new Float64Array(M * N);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += xv[i * K + k] * wv[j * K + k];
      out[i * N + j] = s;
    }
  }
  return out;
}

function assertClose(got: Float32Array, want: Float64Array, K: number, what: string): void {
  assertEquals(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i] - want[i]) <= 1e-5 * K)) {
      throw new Error(`${what}: [${i}] = ${got[i]}, expected ${want[i]}`);
    }
  }
}

/** Runs `fn` in "wasm" mode (every size on the WebAssembly path and its pool) on `threads`. */
async function onThreads(threads: number, fn: () => Promise<void> | void): Promise<void> {
  const before = cpuThreadSetting();
  try {
    setCpuKernelMode("wasm");
    cpu(0, { threads });
    assertEquals(await cpuThreadsReady(), threads);
    await fn();
  } finally {
    setCpuKernelMode("auto");
    cpu(0, { threads: before });
  }
}

Deno.test("a sealed weight's linear equals a plain loop on one and two threads, from one copy", async () => {
  // N not a multiple of the 4 rows per step (padded rows dropped); M up to MR - 1.
  for (const threads of [1, 2]) {
    await onThreads(threads, async () => {
      // M ≥ 6 (a prefill): the kept copy is gemm_tiles' panels; K odd and N past a panel.
      const cases = [{ M: 1, K: 512, N: 1030 }, { M: 5, K: 64, N: 7 }, { M: 20, K: 37, N: 50 }];
      for (const { M, K, N } of cases) {
        const xv = randomValues(M * K, 1), wv = randomValues(N * K, 2);
        using x = tensor(xv, { shape: [M, K] });
        using w = tensor(wv, { shape: [N, K] }).seal();
        const want = reference(xv, wv, M, K, N);
        for (let call = 0; call < 2; call++) {
          using y = linear(x, w) as NDArray;
          assertClose(await y.data() as Float32Array, want, K, `${M}×${K}×${N}, ${threads} t`);
          assert(w.sealed, "reading the weight leaves it sealed");
        }
        // The copy made by the first call is the one used: asking again copies nothing.
        const k = wasmKernelsFor(Infinity, 0)!;
        if (M < 6) {
          const at = residentCopy(k, w, w.readView() as Float32Array);
          assert(at >= RESIDENT_BASE);
          assertEquals(residentCopy(k, w, new Float32Array(w.size)), at);
        } else {
          const at = residentLayout(k, w, "gemm", 4, () => {
            throw new Error("the gemm panels were not kept");
          });
          assert(at >= RESIDENT_BASE);
        }
      }
    });
  }
});

for (const M of [1, 7]) {
  Deno.test(`a sealed weight written through cpuView, or in place by a builtin, is read anew (M = ${M})`, async () => {
    await onThreads(2, async () => {
      const K = 256, N = 300;
      const xv = randomValues(M * K, 3), wv = randomValues(N * K, 4);
      using x = tensor(xv, { shape: [M, K] });
      using w = tensor(wv, { shape: [N, K] }).seal();
      using y0 = linear(x, w) as NDArray; // makes the copy
      assertClose(await y0.data() as Float32Array, reference(xv, wv, M, K, N), K, "before");
      // A user's view: getting it ends the seal, so the write after it is seen.
      const view = w.cpuView() as Float32Array;
      assert(!w.sealed);
      view[5 * K + 1] += 10;
      wv[5 * K + 1] += 10;
      using y1 = linear(x, w) as NDArray;
      assertClose(await y1.data() as Float32Array, reference(xv, wv, M, K, N), K, "after cpuView");
      // Sealed again (as a loader would), then changed in place by a builtin.
      w.seal();
      using y2 = linear(x, w) as NDArray;
      assertClose(await y2.data() as Float32Array, reference(xv, wv, M, K, N), K, "resealed");
      call("vm.builtin.apply_softmax_with_temperature", w, 1);
      assert(!w.sealed, "an in-place builtin ends the seal");
      const changed = w.dataSync() as Float32Array;
      assertNotEquals(changed[0], wv[0]);
      using y3 = linear(x, w) as NDArray;
      assertClose(await y3.data() as Float32Array, reference(xv, changed, M, K, N), K, "in place");
    });
  });
}

Deno.test("a block reused after a sealed tensor is freed belongs to a tensor that is not sealed", () => {
  const w = tensor(randomValues(64, 5), { shape: [8, 8] }).seal();
  assert(w.sealed);
  const block = w.block;
  w.dispose();
  assert(!w.sealed, "a freed tensor is not sealed");
  using again = tensor(randomValues(64, 6), { shape: [8, 8] });
  assert(!again.sealed);
  // Whether or not the pool handed the same block out, only the sealed object counts.
  if (again.block === block) assert(!again.sealed);
});

Deno.test("a tensor cache loads CPU weights sealed; the decode linear over them equals a plain loop", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const M = 1, K = 128, N = 96;
    const xv = randomValues(M * K, 7), wv = randomValues(N * K, 8);
    {
      using w = tensor(wv, { shape: [N, K] });
      await dumpTensorCache({ w }, dir);
    }
    call("vm.builtin.tensor_cache.clear");
    await loadTensorCache(dir);
    const w = call("vm.builtin.tensor_cache.get", "w") as NDArray;
    assert(w.sealed, "a loaded CPU tensor is sealed");
    await onThreads(2, async () => {
      using x = tensor(xv, { shape: [M, K] });
      using y = linear(x, w) as NDArray;
      assertClose(await y.data() as Float32Array, reference(xv, wv, M, K, N), K, "loaded");
    });
    assert(w.sealed);
  } finally {
    call("vm.builtin.tensor_cache.clear");
    await Deno.remove(dir, { recursive: true });
  }
});

/** The bytes of `w`'s `dot` copy (`[N, K]`, rows padded to 4, a multiple of 64). */
const dotBytes = (N: number, K: number) => Math.ceil((Math.ceil(N / 4) * 4 * K * 4) / 64) * 64;

Deno.test("a freed tensor cache's copies are given back and reused: 10 load/dispose cycles do not grow the region", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const K = 128, N = 96, xv = randomValues(K, 9);
    const wv = [randomValues(N * K, 10), randomValues(N * K, 11)];
    {
      using a = tensor(wv[0], { shape: [N, K] });
      using b = tensor(wv[1], { shape: [N, K] });
      await dumpTensorCache({ a, b }, dir);
    }
    await onThreads(1, async () => {
      dropResidentCopies();
      using x = tensor(xv, { shape: [1, K] });
      let top = -1;
      for (let cycle = 0; cycle < 10; cycle++) {
        await loadTensorCache(dir);
        for (const [i, name] of ["a", "b"].entries()) {
          const w = call("vm.builtin.tensor_cache.get", name) as NDArray;
          using y = linear(x, w) as NDArray;
          assertClose(await y.data() as Float32Array, reference(xv, wv[i], 1, K, N), K, name);
        }
        assertEquals(residentStats().residentBytes, 2 * dotBytes(N, K), "both copies counted");
        if (cycle === 0) top = residentRegion().top;
        assertEquals(residentRegion().top, top, `cycle ${cycle}: the region did not grow`);
        call("vm.builtin.tensor_cache.clear"); // frees the weights: their seals end
        assertEquals(residentStats().residentBytes, 0, "given back when freed");
      }
      assertEquals(top, RESIDENT_BASE + 2 * dotBytes(N, K));
      assert(residentStats().residentPeakBytes >= 2 * dotBytes(N, K));
    });
  } finally {
    call("vm.builtin.tensor_cache.clear");
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("unsealing drops the copy and counts it down; the freed range is reused first fit", async () => {
  await onThreads(1, () => {
    dropResidentCopies();
    const K = 64, N = 32, xv = randomValues(K, 12);
    using x = tensor(xv, { shape: [1, K] });
    using a = tensor(randomValues(N * K, 13), { shape: [N, K] }).seal();
    using b = tensor(randomValues(N * K, 14), { shape: [N, K] }).seal();
    (linear(x, a) as NDArray).dispose();
    (linear(x, b) as NDArray).dispose();
    const k = wasmKernelsFor(Infinity, 0)!;
    const atA = residentCopy(k, a, a.readView() as Float32Array);
    assertEquals(atA, RESIDENT_BASE);
    assertEquals(residentStats().residentBytes, 2 * dotBytes(N, K));
    a.cpuView(); // may write from now on: the seal ends
    assertEquals(residentStats().residentBytes, dotBytes(N, K), "a's copy counted down");
    assertEquals(residentRegion().freeRanges, 1, "a's range is free");
    using c = tensor(randomValues(N * K, 15), { shape: [N, K] }).seal();
    assertEquals(residentCopy(k, c, c.readView() as Float32Array), atA, "reused first fit");
    assertEquals(residentRegion().freeRanges, 0);
    // b and c freed: neighbours coalesce, and the region's used end falls back to its start.
    b.dispose();
    c.dispose();
    assertEquals(residentRegion(), {
      end: residentRegion().end,
      top: RESIDENT_BASE,
      freeRanges: 0,
    });
    assertEquals(residentStats().residentBytes, 0);
  });
});

Deno.test("past cpu({ residentBytes }) or a VM's maxMemoryBytes, the linear copies its weight in, with the same results", async () => {
  assertEquals(cpuResidentSetting(), DEFAULT_RESIDENT_BYTES);
  await onThreads(1, async () => {
    dropResidentCopies();
    const M = 1, K = 256, N = 40, xv = randomValues(M * K, 16), wv = randomValues(N * K, 17);
    const want = reference(xv, wv, M, K, N);
    using x = tensor(xv, { shape: [M, K] });
    // Region off: no copy.
    try {
      cpu(0, { residentBytes: 0 });
      using w = tensor(wv, { shape: [N, K] }).seal();
      using y = linear(x, w) as NDArray;
      assertClose(await y.data() as Float32Array, want, K, "residentBytes 0");
      assertEquals(residentStats().residentBytes, 0);
    } finally {
      cpu(0, { residentBytes: DEFAULT_RESIDENT_BYTES });
    }
    // A copy made with a VM's limit active is charged to it; one that would pass it is not made.
    for (const maxBytes of [dotBytes(N, K) - 64, dotBytes(N, K)]) {
      const limit = new MemoryLimit(maxBytes);
      const previous = activateAllocators({ allocatorFor: defaultAllocator, limit });
      let y: NDArray;
      using w = tensor(wv, { shape: [N, K] }).seal();
      try {
        y = linear(x, w) as NDArray;
      } finally {
        activateAllocators(previous);
      }
      using _y = y;
      assertClose(await y.data() as Float32Array, want, K, `limit ${maxBytes}`);
      const fits = maxBytes >= dotBytes(N, K);
      assertEquals(residentStats().residentBytes, fits ? dotBytes(N, K) : 0);
      assertEquals(limit.heldBytes, fits ? dotBytes(N, K) : 0, "charged to the limit");
      w.dispose();
      assertEquals(limit.heldBytes, 0, "given back to the limit when freed");
    }
  });
});

Deno.test("when the memory cannot grow, no copy is made, counted or kept (the caller copies its weight in)", async () => {
  await onThreads(1, () => {
    dropResidentCopies();
    const k = wasmKernelsFor(Infinity, 0)!;
    const memory = k.memory as WebAssembly.Memory & { grow: (pages: number) => number };
    const have = memory.buffer.byteLength;
    memory.grow = () => {
      throw new RangeError("WebAssembly.Memory.grow(): Maximum memory size exceeded");
    };
    try {
      using w = tensor(randomValues(64, 18), { shape: [8, 8] }).seal();
      // A copy past the memory's end needs it to grow: refused, nothing counted or kept.
      const bytes = Math.max(64, have - RESIDENT_BASE + 65536);
      const at = residentLayout(k, w, "gemm", bytes, () => {
        throw new Error("nothing may be packed");
      });
      assertEquals(at, -1);
      assertEquals(residentStats().residentBytes, 0);
      assertEquals(residentRegion().top, RESIDENT_BASE, "the range went back");
    } finally {
      delete (memory as { grow?: unknown }).grow;
    }
    assertEquals(typeof memory.grow, "function");
  });
});

Deno.test("a VM's call charges the copy it makes to its maxMemoryBytes and memory_stats reports it; over the limit, no copy and the same result", async () => {
  const program = new ExecBuilder();
  program.function("lin", 2, () => {
    program.emit_call("vm.op.linear", [program.r(0), program.r(1)], { dst: program.r(2) });
    program.emit_ret(program.r(2));
  });
  const ex = program.get();
  await onThreads(1, async () => {
    dropResidentCopies();
    const M = 1, K = 1024, N = 64, xv = randomValues(M * K, 19), wv = randomValues(N * K, 20);
    const want = reference(xv, wv, M, K, N);
    using x = tensor(xv, { shape: [M, K] });
    // 64 KiB holds the result (256 bytes) but not the 256 KiB copy; 1 MiB holds both.
    for (const maxMemoryBytes of [64 * 1024, 2 ** 20]) {
      using vm = new VirtualMachine(ex, [cpu()], { maxMemoryBytes });
      const w = tensor(wv, { shape: [N, K] }).seal();
      using y = await vm.invoke("lin", x, w) as NDArray;
      assertClose(await y.data() as Float32Array, want, K, `maxMemoryBytes ${maxMemoryBytes}`);
      const made = maxMemoryBytes >= 2 ** 20 ? dotBytes(N, K) : 0;
      const stats = vm.memory_stats(cpu());
      assertEquals(stats.residentBytes, made);
      assertEquals(stats.residentBytes, residentStats().residentBytes);
      assert(stats.residentPeakBytes! >= made);
      w.dispose();
      assertEquals(vm.memory_stats().residentBytes, 0, "given back when the weight is freed");
    }
  });
});

Deno.test("a VM's tensor that would pass its limit takes the VM's copies' memory first", async () => {
  await onThreads(1, async () => {
    dropResidentCopies();
    const K = 256, N = 40, xv = randomValues(K, 21), wv = randomValues(N * K, 22);
    using x = tensor(xv, { shape: [1, K] });
    using w = tensor(wv, { shape: [N, K] }).seal();
    const limit = new MemoryLimit(dotBytes(N, K) + 1024);
    const previous = activateAllocators({ allocatorFor: defaultAllocator, limit });
    try {
      (linear(x, w) as NDArray).dispose(); // its output comes from an allocator without the limit
      assertEquals(limit.heldBytes, dotBytes(N, K));
      limit.take(2048, cpu(), 2048); // would not fit beside the copy: the copy goes
      assertEquals(limit.heldBytes, 2048);
      assertEquals(residentStats().residentBytes, 0);
      // The next call copies its weight in (no room for the copy), with the same result.
      using y = linear(x, w) as NDArray;
      assertClose(await y.data() as Float32Array, reference(xv, wv, 1, K, N), K, "after");
      assertEquals(residentStats().residentBytes, 0);
    } finally {
      activateAllocators(previous);
    }
  });
});

Deno.test("cpu({ residentBytes }) is checked, lowering it gives back the copies past the new end, and a split region starts again only as a last resort", () => {
  for (const bad of [-1, 1.5, NaN, Infinity]) {
    let message = "";
    try {
      cpu(0, { residentBytes: bad });
    } catch (e) {
      message = (e as Error).message;
    }
    assert(message.includes("residentBytes must be a non-negative integer"), `${bad}: ${message}`);
  }
  assertEquals(cpuResidentSetting(), DEFAULT_RESIDENT_BYTES);
  const k = wasmKernelsFor(Infinity, 0)!;
  const K = 64, N = 16, s = dotBytes(N, K);
  const sealed = (seed: number, n = N) =>
    tensor(randomValues(n * K, seed), { shape: [n, K] }).seal();
  const copy = (w: NDArray) => residentCopy(k, w, w.readView() as Float32Array);
  try {
    dropResidentCopies();
    using a = sealed(23), b = sealed(24), c = sealed(25);
    assertEquals([copy(a), copy(b), copy(c)], [0, 1, 2].map((i) => RESIDENT_BASE + i * s));
    cpu(0, { residentBytes: 2 * s });
    assertEquals(residentStats().residentBytes, 2 * s, "c, past the new end, is given back");
    assertEquals(residentRegion().top, RESIDENT_BASE + 2 * s);
    cpu(0, { residentBytes: 3 * s });
    a.dispose();
    assertEquals(residentRegion().freeRanges, 1, "a's range, below b's");
    // 2s fits in neither a's range nor past b; together they would: every copy is dropped.
    using d = sealed(26, 2 * N);
    assertEquals(copy(d), RESIDENT_BASE);
    assertEquals(residentStats().residentBytes, 2 * s, "only d's copy");
    // Too large for the whole region: no copy, nothing dropped.
    using e = sealed(27, 4 * N);
    assertEquals(copy(e), -1);
    assertEquals(copy(d), RESIDENT_BASE, "d's copy kept");
  } finally {
    cpu(0, { residentBytes: DEFAULT_RESIDENT_BYTES });
    dropResidentCopies();
  }
});

Deno.test("sealed weights dropped without dispose() give their copies back when collected", async () => {
  const script = new URL("./fixtures/dropped_sealed_weights.ts", import.meta.url);
  const { stdout, stderr, success } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", script.pathname],
  }).output();
  assert(success, new TextDecoder().decode(stderr));
  const out = new TextDecoder().decode(stdout).trim().split("\n");
  // 20 copies of [32, 64] float32, 8 KiB each.
  assertEquals(out, [`resident before ${20 * dotBytes(32, 64)}`, "resident after 0"]);
});

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
import { cpuThreadsReady, setCpuKernelMode, wasmKernelsFor } from "../kernels/cpu/wasm/runtime.ts";
import { RESIDENT_BASE, residentCopy, residentLayout } from "../kernels/cpu/wasm/resident.ts";
import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { dumpTensorCache, loadTensorCache } from "../mod.ts";

installBuiltins();
const linear = getGlobalFunc("vm.op.linear")!;
const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);

function random(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

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
        const xv = random(M * K, 1), wv = random(N * K, 2);
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
      const xv = random(M * K, 3), wv = random(N * K, 4);
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
  const w = tensor(random(64, 5), { shape: [8, 8] }).seal();
  assert(w.sealed);
  const block = w.block;
  w.dispose();
  assert(!w.sealed, "a freed tensor is not sealed");
  using again = tensor(random(64, 6), { shape: [8, 8] });
  assert(!again.sealed);
  // Whether or not the pool handed the same block out, only the sealed object counts.
  if (again.block === block) assert(!again.sealed);
});

Deno.test("a tensor cache loads CPU weights sealed; the decode linear over them equals a plain loop", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const M = 1, K = 128, N = 96;
    const xv = random(M * K, 7), wv = random(N * K, 8);
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

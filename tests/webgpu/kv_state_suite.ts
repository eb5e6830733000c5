// The paged KV cache with its pages on WebGPU: a fork's partial-page copy runs on the
// device (queued, no wait), and debug_get_kv reads the pages back to the CPU values.
import { assertEquals } from "@std/assert";
import { getGlobalFunc, PagedKVCache, shape, tensor } from "../../mod.ts";
import { gpuTest } from "./suite_registry.ts";

const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;

gpuTest("paged KV cache on WebGPU: a fork copies a partial page on the device", async (gpu) => {
  const L = 2, KH = 2, P = 4, D = 3;
  using kv = PagedKVCache.create({
    pageSize: P,
    maxTotalSequenceLength: 12,
    numLayers: L,
    numQoHeads: 2,
    numKvHeads: KH,
    headDim: D,
    device: gpu,
  });
  assertEquals(kv.pages(0).device, gpu);
  f("kv_state_add_sequence")(kv, 0);
  f("kv_state_begin_forward")(kv, shape(0), shape(6)); // pages 0 and 1
  f("kv_state_end_forward")(kv);
  // Every element of every layer's pages holds its own index plus 10,000 × the layer.
  const elements = kv.config.numPages * 2 * KH * P * D;
  for (let layer = 0; layer < L; layer++) {
    const pages = kv.pages(layer);
    const values = Float32Array.from({ length: elements }, (_, i) => i + 10_000 * layer);
    gpu.writeBlock(pages.block, pages.byteOffset, new Uint8Array(values.buffer));
  }
  const submits = gpu.submitCount;
  f("kv_state_fork_sequence")(kv, 0, 1, 5); // shares page 0, copies token 4 into page 2
  assertEquals(gpu.submitCount, submits, "the copy is queued, not waited for");
  assertEquals(kv.table.positionMap(1), Int32Array.from([0, 1, 2, 3, 8]));
  using k = tensor(new Float32Array(L * 5 * KH * D), { shape: [L, 5, KH, D] });
  using v = tensor(new Float32Array(L * 5 * KH * D), { shape: [L, 5, KH, D] });
  await f("attention_kv_cache_debug_get_kv")(kv, 1, 0, 5, k, v);
  // What the child's token at position p holds: its slot's values in the parent's pages, with
  // the copied token (slot 8, page 2) holding what page 1's first token (slot 4) held.
  const source = [0, 1, 2, 3, 4];
  const expected = (kvIndex: number) => {
    const out: number[] = [];
    for (let layer = 0; layer < L; layer++) {
      for (const slot of source) {
        const page = Math.floor(slot / P), off = slot % P;
        for (let h = 0; h < KH; h++) {
          for (let d = 0; d < D; d++) {
            out.push((((page * 2 + kvIndex) * KH + h) * P + off) * D + d + 10_000 * layer);
          }
        }
      }
    }
    return out;
  };
  assertEquals([...k.dataSync()], expected(0));
  assertEquals([...v.dataSync()], expected(1));
});

/** Seeded values in [-1, 1). */
function randoms(n: number, seed: number): Float32Array {
  let x = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 31 - 1;
  });
}

gpuTest(
  "vm.op.paged_attention on WebGPU gives the CPU kernel's outputs: head sizes of both kernel forms, grouped heads, pages crossed, decodes after a prefill",
  async (gpu) => {
    const op = getGlobalFunc("vm.op.paged_attention")!;
    // Head size 8 and 12: the vec4 form (generated for the size); 6: the general form.
    for (const D of [8, 12, 6]) {
      const H = 6, KH = 2, fused = H + 2 * KH, scale = 0.3;
      const make = (device?: typeof gpu) =>
        PagedKVCache.create({
          pageSize: 4,
          maxTotalSequenceLength: 64,
          numLayers: 1,
          numQoHeads: H,
          numKvHeads: KH,
          headDim: D,
          ...(device === undefined ? {} : { device }),
        });
      using onGpu = make(gpu);
      using onCpu = make();
      for (const kv of [onGpu, onCpu]) for (const s of [0, 1, 2]) f("kv_state_add_sequence")(kv, s);
      // A prefill of 13, 6 and 1 tokens (the first crossing three pages of 4), then decodes,
      // the last with one sequence left out.
      const steps: [number[], number[]][] = [
        [[0, 1, 2], [13, 6, 1]],
        [[0, 1, 2], [1, 1, 1]],
        [[2, 0], [3, 1]],
        [[1, 0], [1, 1]],
      ];
      for (const [step, [ids, lengths]] of steps.entries()) {
        const T = lengths.reduce((a, b) => a + b, 0);
        const data = randoms(T * fused * D, 40 + step + 10 * D);
        const outs: Float32Array[] = [];
        for (const [kv, device] of [[onGpu, gpu], [onCpu, undefined]] as const) {
          using qkv = tensor(data, { shape: [T, fused, D], ...(device ? { device } : {}) });
          f("kv_state_begin_forward")(kv, shape(...ids), shape(...lengths));
          try {
            using out = op(kv, 0, scale, qkv) as ReturnType<typeof tensor>;
            outs.push(await out.data() as Float32Array);
          } finally {
            f("kv_state_end_forward")(kv);
          }
        }
        const [got, want] = outs;
        assertEquals(got.length, T * H * D);
        for (let i = 0; i < want.length; i++) {
          if (!(Math.abs(got[i] - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])))) {
            throw new Error(`D ${D} step ${step} element ${i}: WebGPU ${got[i]}, CPU ${want[i]}`);
          }
        }
      }
    }
  },
);

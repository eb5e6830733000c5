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

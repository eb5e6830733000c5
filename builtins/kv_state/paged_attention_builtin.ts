/**
 * `vm.op.paged_attention(cache, layer, sm_scale, qkv) → out`: relaxvm's own paged
 * attention, the operator relaxvm-built models (models/gpt's paged program) call per
 * layer inside a forward of a `PagedKVCache`. It builds the kernel's view of the batch
 * (`PagedAttentionBatch`: each sequence's rows and the slots of all its tokens) from
 * the page table and runs the `pagedAttention` kernel of the pages' device kind, from
 * the kernel registry: no kernel for that kind is an error naming it, never a fallback.
 *
 * Unlike `attention_kv_cache_attention_with_fused_qkv` (TVM's builtin, whose executable
 * hands it TVM's kernels and an output it allocated), this is an operator: it allocates
 * its output from the running VM's allocator, as every `vm.op.*` does, and needs no
 * kernels from the executable. RoPE is not applied (relaxvm's GPT has learned position
 * embeddings): a cache created with a RoPE mode is refused.
 *
 * @module
 */

import { NDArray } from "../../devices/ndarray.ts";
import { backendFor, type PagedAttentionBatch } from "../../kernels/kernel_backend.ts";
import { chargeWork } from "../operators/kernel_cost.ts";
import { describe } from "../describe.ts";
import { integerArg, tensorArg } from "../validate.ts";
import { PagedKVCache } from "./paged_kv_cache.ts";
import type { BuiltinTable } from "../builtin_table.ts";

const WHO = "vm.op.paged_attention";

/** The kernel's view of the forward in progress on `cache`. */
export function pagedAttentionBatch(cache: PagedKVCache, who = WHO): PagedAttentionBatch {
  const plan = cache.forwardPlan(who);
  const maps = plan.seqIds.map((id) => cache.table.positionMap(id, who));
  const slotIndptr = new Int32Array(maps.length + 1);
  for (let i = 0; i < maps.length; i++) slotIndptr[i + 1] = slotIndptr[i] + maps[i].length;
  const slots = new Int32Array(slotIndptr[maps.length]);
  maps.forEach((m, i) => slots.set(m, slotIndptr[i]));
  const c = cache.config;
  return {
    numQoHeads: c.numQoHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    pageSize: c.pageSize,
    rowIndptr: plan.appendLengthIndptr,
    slotIndptr,
    slots,
  };
}

function pagedAttention(kv: unknown, layerId: unknown, smScale: unknown, qkvArg: unknown): NDArray {
  if (!(kv instanceof PagedKVCache)) {
    throw new TypeError(`${WHO}: expected a paged KV cache, got ${describe(kv)}`);
  }
  if (kv.disposed) throw new TypeError(`${WHO}: the paged KV cache was released`);
  const c = kv.config;
  if (c.ropeMode !== "none") {
    throw new RangeError(
      `${WHO}: the cache applies RoPE (mode ${c.ropeMode}); relaxvm's paged attention does not (use attention_kv_cache_attention_with_fused_qkv)`,
    );
  }
  const layer = kv.layerIndex(integerArg(layerId, "layer", WHO), WHO);
  if (typeof smScale !== "number" || !Number.isFinite(smScale)) {
    throw new TypeError(`${WHO}: sm_scale must be a finite number, got ${describe(smScale)}`);
  }
  const qkv = tensorArg(qkvArg, "qkv", WHO);
  const pages = kv.pages(layer);
  const H = c.numQoHeads, KH = c.numKvHeads, D = c.headDim;
  const batch = pagedAttentionBatch(kv);
  const T = batch.rowIndptr[batch.rowIndptr.length - 1];
  const fused = H + 2 * KH;
  if (
    qkv.shape.length !== 3 || qkv.shape[0] !== T || qkv.shape[1] !== fused || qkv.shape[2] !== D
  ) {
    throw new RangeError(
      `${WHO}: qkv has shape [${
        qkv.shape.join(", ")
      }], not [${T}, ${fused}, ${D}] (the forward's tokens, ${H} + 2 × ${KH} heads, head size ${D})`,
    );
  }
  if (qkv.dtype !== "float32" || c.dtype !== "float32") {
    throw new TypeError(
      `${WHO}: qkv (${qkv.dtype}) and the pages (${c.dtype}) must be float32`,
    );
  }
  if (qkv.device !== pages.device) {
    throw new RangeError(`${WHO}: qkv is on ${qkv.device} and the pages on ${pages.device}`);
  }
  let work = 0;
  for (let s = 0; s + 1 < batch.rowIndptr.length; s++) {
    const rows = batch.rowIndptr[s + 1] - batch.rowIndptr[s];
    work += rows * (batch.slotIndptr[s + 1] - batch.slotIndptr[s]) * H * D * 2;
  }
  chargeWork(WHO, work, qkv.device);
  const kernel = backendFor(qkv.device.kind);
  const out = NDArray.empty([T, H, D], "float32", qkv.device);
  try {
    kernel.pagedAttention(qkv, pages, batch, smScale, out);
  } catch (e) {
    out.releaseIfUnowned();
    throw e;
  }
  return out;
}

/** Adds `vm.op.paged_attention` to `table` (the paged KV cache's builtins). */
export function addPagedAttention(table: BuiltinTable): void {
  table.add(WHO, pagedAttention, {
    signature: "(cache, layer, sm_scale, qkv) → out",
    summary:
      "relaxvm's paged attention for its own models: `qkv` `[tokens, qo_heads + 2 kv_heads, head_dim]` of the forward in progress (sequence after sequence, as `begin_forward` ordered them); appends each token's K/V to its slot of layer `layer`'s pages, then each token attends causally to its sequence (the cached tokens and the new ones up to it), scaled by `sm_scale`. Returns `[tokens, qo_heads, head_dim]`. A batch gives each sequence what it gets alone. Runs the `pagedAttention` kernel of the pages' device kind; no RoPE.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` for a released cache or another kind of argument, a dtype other than float32; `RangeError` outside a forward, for a cache with RoPE, a layer not in the cache, a `qkv` of another shape or device; a device kind with no `pagedAttention` kernel names it.",
    tvm: null,
  });
}

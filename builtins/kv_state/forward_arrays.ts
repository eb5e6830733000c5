/**
 * The arrays `begin_forward` built (page_table.ts's `ForwardPlan`) on a device: one
 * int32 tensor, uploaded once per forward, and views of it that TVM's kernels read at
 * element offsets (their host functions declare `elem_offset`), as TVM's auxiliary data
 * manager packs them (`paged_kv_cache.cc`).
 *
 * @module
 */

import { NDArray } from "../../devices/ndarray.ts";
import type { ForwardPlan } from "./page_table.ts";

/** The forward's int32 arrays as device tensors (views of one packed tensor). */
export interface DeviceForwardArrays {
  /** `[0, l0, l0+l1, …]`, the queries (and ragged K/V) of each sequence. */
  readonly appendLengthIndptr: NDArray;
  /** Each sequence's length before the forward. */
  readonly kRaggedRopePosOffset: NDArray;
  /** Each new token's position. */
  readonly qRopePositionMap: NDArray;
  /** Each new token's slot in the pages. */
  readonly appendPositionMap: NDArray;
  /** Per depth: query and page index pointers, page ids, last page lengths, RoPE offsets. */
  readonly depths: readonly {
    readonly qoIndptr: NDArray;
    readonly pageIndptr: NDArray;
    readonly pageIndices: NDArray;
    readonly lastPageLen: NDArray;
    readonly kRopePosOffset: NDArray;
  }[];
  /** Frees the views and the tensor they share (when the plan changes). */
  dispose(): void;
}

/**
 * Uploads `plan`'s arrays to `device` as one int32 tensor (from the active allocator)
 * and returns views of it. One upload per forward.
 */
export function uploadForwardArrays(
  plan: ForwardPlan,
  device: NDArray["device"],
): DeviceForwardArrays {
  const parts: Int32Array[] = [
    plan.appendLengthIndptr,
    plan.kRaggedRopePosOffset,
    plan.qRopePositionMap,
    plan.appendPositionMap,
  ];
  for (const d of plan.depths) {
    parts.push(d.qoIndptr, d.pageIndptr, d.pageIndices, d.lastPageLen, d.kRopePosOffset);
  }
  const total = parts.reduce((n, p) => n + p.length, 0);
  const host = new Int32Array(Math.max(total, 1));
  const offsets: number[] = [];
  let at = 0;
  for (const p of parts) {
    offsets.push(at);
    host.set(p, at);
    at += p.length;
  }
  // Held by the cache (as its pages) from one attention call to the next of the forward.
  const packed = NDArray.empty([host.length], "int32", device).handToUser();
  device.writeBlock(packed.block, packed.byteOffset, new Uint8Array(host.buffer));
  const views: NDArray[] = [];
  const view = (i: number) => {
    const v = new NDArray(
      packed.storage,
      packed.byteOffset + 4 * offsets[i],
      [parts[i].length],
      "int32",
    )
      .handToUser();
    views.push(v);
    return v;
  };
  return {
    appendLengthIndptr: view(0),
    kRaggedRopePosOffset: view(1),
    qRopePositionMap: view(2),
    appendPositionMap: view(3),
    depths: plan.depths.map((_, d) => ({
      qoIndptr: view(4 + 5 * d),
      pageIndptr: view(5 + 5 * d),
      pageIndices: view(6 + 5 * d),
      lastPageLen: view(7 + 5 * d),
      kRopePosOffset: view(8 + 5 * d),
    })),
    dispose() {
      for (const v of views) v.dispose();
      packed.dispose();
    },
  };
}

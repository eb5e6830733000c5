/**
 * Host memory a builtin needs for its work (the sort of a sampling step,
 * say), counted against the running VM's `maxMemoryBytes` while the work
 * runs: a program cannot make one instruction take gigabytes the limit
 * never sees. Outside a VM nothing is counted.
 *
 * @module
 */

import { activeAllocators } from "../devices/allocation_context.ts";
import type { MemoryLimit } from "../devices/allocator.ts";
import { cpu } from "../devices/cpu_device.ts";
import { MemoryScope } from "../devices/memory_scope.ts";

/**
 * The memory limit of the VM running now, or null outside any VM. A
 * builtin that works after an await (on a GPU tensor read back) takes it
 * before, while its VM is the running one.
 */
export function runningLimit(): MemoryLimit | null {
  const active = activeAllocators();
  return active instanceof MemoryScope ? active.limit : null;
}

/**
 * Runs `work` with `bytes` of host memory charged to `limit` (default: the
 * running VM's), given back when it returns or throws; a `RangeError`
 * naming `who` if they do not fit.
 */
export function withHostScratch<T>(
  bytes: number,
  who: string,
  work: () => T,
  limit: MemoryLimit | null = runningLimit(),
): T {
  if (limit === null) return work();
  try {
    limit.take(bytes, cpu(), bytes);
  } catch (e) {
    throw new RangeError(
      `${who}: its work needs ${bytes} bytes of host memory: ${(e as Error).message}`,
    );
  }
  try {
    return work();
  } finally {
    limit.give(bytes);
  }
}

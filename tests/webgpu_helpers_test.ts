// WebGPU helpers that need no adapter, so they run under `deno test` itself;
// everything that touches the GPU is in tests/webgpu/ (see webgpu_test.ts).
import { assert, assertEquals, assertRejects } from "@std/assert";
import { dispatchSize } from "../devices/webgpu/command_batch.ts";
import { webgpu } from "../devices/webgpu/webgpu_device.ts";

Deno.test("dispatchSize() folds more than 65535 workgroups into two dimensions", () => {
  assertEquals(dispatchSize(0), [1, 1]);
  assertEquals(dispatchSize(65535), [65535, 1]);
  const [x, y] = dispatchSize(65536);
  assert(x <= 65535 && x * y >= 65536, `${x} × ${y}`);
  const [x2, y2] = dispatchSize(10_000_000);
  assert(x2 <= 65535 && y2 <= 65535 && x2 * y2 >= 10_000_000);
  // The padding stays small: fewer than y extra workgroups.
  assert(x2 * y2 - 10_000_000 < y2);
});

Deno.test("webgpu() rejects a negative id with a RangeError", async () => {
  await assertRejects(() => webgpu(-1), RangeError, "non-negative integer");
});

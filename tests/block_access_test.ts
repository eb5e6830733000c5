/**
 * A memory block's one writability state (`BlockAccess`, devices/storage.ts):
 * every transition of its table, seen through the tensors over the block, and
 * the two rules it keeps: a read-only block (a constant, a cached tensor, a
 * view of one) is refused by in-place builtins even after the host unseals it,
 * and any writable view (`cpuView()`) ends a seal.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { dumpTensorCache, loadTensorCache } from "../mod.ts";

installBuiltins();
const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
/** An in-place builtin: it writes the softmax of `logits` into `logits`. */
const softmaxInPlace = (logits: NDArray) =>
  call("vm.builtin.apply_softmax_with_temperature", logits, 1);

/** The block's state and the two things tensors say of it. */
function state(t: NDArray) {
  return { access: t.storage.memory.access, readOnly: t.readOnly, sealed: t.sealed };
}

Deno.test("a block's access: seal, pin, unseal and reclaim move it as the table says", () => {
  const t = tensor([1, 2, 3, 4]);
  assertEquals(state(t), { access: "writable", readOnly: false, sealed: false });
  t.seal();
  assertEquals(state(t), { access: "sealed", readOnly: false, sealed: true });
  t.pin();
  assertEquals(state(t), { access: "readOnlySealed", readOnly: true, sealed: true });
  t.cpuView(); // a view someone may write through ends the seal, not the read-only
  assertEquals(state(t), { access: "readOnly", readOnly: true, sealed: false });
  t.seal();
  assertEquals(state(t), { access: "readOnlySealed", readOnly: true, sealed: true });
  t.unseal();
  assertEquals(state(t), { access: "readOnly", readOnly: true, sealed: false });
  const memory = t.storage.memory;
  t.dispose();
  assertEquals(memory.access, "writable", "a block goes back to its allocator writable");
});

Deno.test("an in-place builtin writes a sealed tensor, ending its seal; reading leaves it sealed", () => {
  using t = tensor([0, 0]).seal();
  t.dataSync();
  assert(t.sealed, "a copy of the values leaves the seal");
  softmaxInPlace(t);
  assertEquals(state(t), { access: "writable", readOnly: false, sealed: false });
  assertEquals([...t.dataSync()], [0.5, 0.5]);
});

Deno.test("a seal covers its tensor only: a reshape over the same block is not sealed, and its view ends the seal", () => {
  using t = tensor([1, 2, 3, 4]).seal();
  using r = call("vm.builtin.reshape", t, [2, 2]) as NDArray;
  assert(t.sealed && !r.sealed);
  r.cpuView();
  assert(!t.sealed, "a writable view of any tensor over the block ends the seal");
});

Deno.test("a loaded weight is read-only and sealed; after a user's cpuView it is still refused by in-place builtins", async () => {
  const dir = await Deno.makeTempDir();
  try {
    {
      using w = tensor([1, 2, 3, 4]);
      await dumpTensorCache({ w }, dir);
    }
    call("vm.builtin.tensor_cache.clear");
    await loadTensorCache(dir);
    const w = call("vm.builtin.tensor_cache.get", "w") as NDArray;
    assertEquals(state(w), { access: "readOnlySealed", readOnly: true, sealed: true });
    assertThrows(() => softmaxInPlace(w), TypeError, "read-only");
    assert(w.sealed, "a refused write leaves the seal");
    w.cpuView();
    assertEquals(state(w), { access: "readOnly", readOnly: true, sealed: false });
    assertThrows(() => softmaxInPlace(w), TypeError, "read-only");
    assertEquals([...w.dataSync()], [1, 2, 3, 4]);
  } finally {
    call("vm.builtin.tensor_cache.clear");
    await Deno.remove(dir, { recursive: true });
  }
});

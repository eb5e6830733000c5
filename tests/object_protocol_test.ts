/**
 * The object protocol (ground/object.ts), tested once for every kind of VM
 * object: each rule below runs on a tensor, a storage, a closure and a tuple,
 * so the kinds cannot drift apart again. "Freed" is observed through what
 * each kind owns: the allocator's live bytes.
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { defaultAllocator } from "../devices/allocation_context.ts";
import { cpu } from "../devices/cpu_device.ts";
import { NDArray } from "../devices/ndarray.ts";
import { Closure } from "../ground/closure.ts";
import type { VMObject } from "../ground/object.ts";
import { Tuple } from "../ground/tuple.ts";

const allocator = defaultAllocator(cpu());
const liveBytes = () => allocator.stats().liveBytes;

/** A fresh, floating object of each kind that owns 16 bytes of CPU memory. */
const KINDS: Record<string, () => VMObject> = {
  NDArray: () => NDArray.empty([4], "float32"),
  Storage: () => allocator.alloc(16),
  Closure: () => new Closure("f", () => null, [NDArray.empty([4], "float32")]),
  Tuple: () => new Tuple([NDArray.empty([4], "float32"), 7, "x"]),
};

/** Kinds a user can hold: a tuple reaches users as a plain array instead (tested below). */
const HELD_BY_USERS = ["NDArray", "Storage", "Closure"];

function eachKind(
  rule: string,
  body: (make: () => VMObject) => void,
  kinds = Object.keys(KINDS),
): void {
  for (const [kind, make] of Object.entries(KINDS)) {
    if (!kinds.includes(kind)) continue;
    Deno.test(`object protocol (${kind}): ${rule}`, () => {
      const before = liveBytes();
      body(make);
      assertEquals(liveBytes(), before, "every test ends with the memory given back");
    });
  }
}

eachKind("a fresh object is floating; releaseIfUnowned frees it", (make) => {
  const before = liveBytes();
  const o = make();
  assertEquals([o.refCount, o.disposed], [0, false]);
  assertEquals(liveBytes(), before + 16);
  o.releaseIfUnowned();
  assertEquals([o.disposed, liveBytes()], [true, before]);
});

eachKind("the last release frees; releasing again does nothing", (make) => {
  const before = liveBytes();
  const o = make().retain().retain();
  o.release();
  assertEquals([o.refCount, o.disposed], [1, false]);
  o.release();
  assertEquals([o.disposed, liveBytes()], [true, before]);
  o.release();
  assertEquals(liveBytes(), before);
});

eachKind("releasing a floating object frees it (one rule for every kind)", (make) => {
  const o = make();
  o.release();
  assert(o.disposed);
});

eachKind("retain after free throws a ReferenceError naming the object", (make) => {
  const o = make();
  o.releaseIfUnowned();
  const e = assertThrows(() => o.retain(), ReferenceError, "used after its memory was released");
  assert(e.message.startsWith(String(o)), e.message);
});

eachKind("disown drops a holder without freeing: the object floats again", (make) => {
  const o = make().retain();
  o.disown();
  assertEquals([o.refCount, o.disposed], [0, false]);
  o.releaseIfUnowned();
  assert(o.disposed);
});

eachKind("kill frees at once, whoever holds the object", (make) => {
  const o = make().retain().retain();
  o.kill();
  assert(o.disposed);
  o.release(); // the holders' releases are harmless afterwards
  o.kill();
});

eachKind("the user is one holder however often handed over; dispose is idempotent", (make) => {
  const o = make();
  o.handToUser();
  o.handToUser();
  assertEquals(o.refCount, 1);
  o.dispose();
  assert(o.disposed);
  o.dispose();
}, HELD_BY_USERS);

eachKind("dispose while the VM still holds the object leaves it to the VM", (make) => {
  const o = make().retain(); // the VM's reference (a register, a constant)
  o.handToUser();
  o.dispose();
  assertEquals([o.refCount, o.disposed], [1, false]);
  o.release();
  assert(o.disposed);
}, HELD_BY_USERS);

eachKind("`using` disposes the user's reference at the end of the scope", (make) => {
  let escaped: VMObject;
  {
    using o = make();
    o.handToUser();
    escaped = o;
    assert(!o.disposed);
  }
  assert(escaped.disposed);
}, HELD_BY_USERS);

Deno.test("object protocol (Tuple): the user receives a plain array holding the fields", () => {
  const before = liveBytes();
  const field = NDArray.empty([4], "float32");
  const tuple = new Tuple([field, 7]);
  const out = tuple.handToUser();
  assert(Array.isArray(out));
  assertEquals(out[1], 7);
  assert(tuple.disposed, "a floating tuple goes once its fields are handed over");
  assertEquals([field.disposed, field.refCount], [false, 1], "the user holds the field");
  field.dispose();
  assertEquals(liveBytes(), before);
});

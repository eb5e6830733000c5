/**
 * Untrusted executables, round 2 (issue 18): each finding reproduced with
 * a crafted program, in every dispatch form where the VM is involved, and
 * what relaxvm does about it now.
 */

import { assert, assertEquals, assertRejects, assertStringIncludes } from "@std/assert";
import {
  ExecBuilder,
  type NDArray,
  shape,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";

/** The three dispatch forms: every VM-level finding is checked in each. */
export const FORMS: Record<string, VirtualMachineOptions> = {
  specialized: {},
  generic: { dispatch: "generic" },
  compiled: { mode: "compiled" },
};

Deno.test("finding 1: a reshape of a constant is read-only: in-place builtins refuse it", async () => {
  const ib = new ExecBuilder();
  const logits = ib.convert_constant(tensor([1, 2, 3, 4]));
  const heap = ib.convert_constant(tensor([0n, 0n], { dtype: "int64" }));
  ib.function("softmax", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.reshape", [logits, shape(2, 2)], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.apply_softmax_with_temperature", [ib.r(0), ib.convert_constant(1)]);
    ib.emit_ret(ib.r(0));
  });
  ib.function("penalty", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.reshape", [logits, shape(1, 4)], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.reshape", [ib.r(0), shape(4)], { dst: ib.r(1) });
    const ids = ib.convert_constant(tensor([0, 1], { dtype: "int32" }));
    ib.emit_call("vm.builtin.apply_repetition_penalty", [ib.r(1), ids, ib.convert_constant(2)]);
    ib.emit_ret(ib.r(1));
  });
  ib.function("store", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.reshape", [heap, shape(2)], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.store_shape", [shape(7, 8), ib.r(0), ib.imm(0), ib.imm(1)], {
      dst: ib.r(1),
    });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  for (const [form, options] of Object.entries(FORMS)) {
    using vm = new VirtualMachine(ex, undefined, options);
    for (const [fn, what] of [["softmax", "logits"], ["penalty", "logits"], ["store", "heap"]]) {
      const e = await assertRejects(() => vm.invoke(fn), VMError, "read-only", `${form} ${fn}`);
      assertStringIncludes(e.message, what);
    }
    assertEquals(vm.memory_stats().liveBytes, 0, form);
  }
  const [c0, c1] = ex.constants.filter((c) =>
    typeof c === "object" && c !== null && "dataSync" in c
  ) as NDArray[];
  assertEquals([...c0.dataSync()], [1, 2, 3, 4], "the logits constant is unchanged");
  assertEquals([...c1.dataSync()], [0n, 0n], "the heap constant is unchanged");
  // A copy is writable again, and the block of a freed constant goes back writable.
  using t = tensor([1, 2]);
  assert(!t.readOnly);
});

import { assertEquals, assertStringIncludes } from "@std/assert";
import { ExecBuilder, listGlobalFuncNames, registerFunc, VirtualMachine } from "../mod.ts";
import { editDistance, suggestName } from "../ground/suggest.ts";

Deno.test("suggestName: typos, case and a missing namespace find the registered name", () => {
  const names = listGlobalFuncNames();
  assertEquals(suggestName("vm.op.reluu", names), "vm.op.relu");
  assertEquals(suggestName("vm.op.rleu", names), "vm.op.relu", "two letters swapped");
  assertEquals(suggestName("vm.builtin.make_tupel", names), "vm.builtin.make_tuple");
  assertEquals(suggestName("VM.OP.ADD", names), "vm.op.add");
  assertEquals(suggestName("relu", names), "vm.op.relu");
  assertEquals(suggestName("my.own.function", names), undefined, "nothing close");
  assertEquals(suggestName("vm.op.add", ["vm.op.add"]), undefined, "the name itself is no hint");
});

Deno.test("editDistance: insertions, deletions, substitutions and swaps each count one", () => {
  assertEquals(editDistance("kitten", "sitting"), 3);
  assertEquals(editDistance("ab", "ba"), 1);
  assertEquals(editDistance("", "abc"), 3);
  assertEquals(editDistance("abc", "abc"), 0);
  assertEquals(editDistance("abcdef", "uvwxyz", 2), 3, "stops beyond the limit");
});

Deno.test("get: an unregistered packed function is a warning with a did-you-mean, not an error", () => {
  const ib = new ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.op.reluu", [ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("test.suggest.nothing_like_it", [ib.r(2)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  const ex = ib.get();
  assertEquals(ex.warnings, [
    "@main[1]: packed function vm.op.reluu is not registered; did you mean vm.op.relu? (register it before a VM calls it)",
    "@main[2]: packed function test.suggest.nothing_like_it is not registered (register it before a VM calls it)",
  ]);
});

Deno.test("get: a function registered after get() still runs; a later get() does not warn", async () => {
  const ib = new ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("test.suggest.twice", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const early = ib.get();
  assertStringIncludes(early.warnings.join("\n"), "test.suggest.twice is not registered");
  registerFunc("test.suggest.twice", (x: number) => 2 * x, { override: true });
  assertEquals(await new VirtualMachine(early).invoke("main", 21), 42);
  assertEquals(ib.get().warnings, []);
});

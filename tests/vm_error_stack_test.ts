/**
 * A `VMError`'s stack shows the user's frames, not the VM's: of the library only the API
 * function that was called (`VirtualMachine.invoke`) stays, in every dispatch mode.
 */

import { assert, assertEquals, assertRejects } from "@std/assert";
import { cpu, ExecBuilder, tensor, VirtualMachine, VMError } from "../mod.ts";
import { withoutInternalFrames } from "../ground/errors.ts";

const LIBRARY = new URL("../", import.meta.url).href;
const INTERNAL = ["ground/", "devices/", "program/", "builder/", "vm/", "builtins/", "kernels/"];

function internalFrames(stack: string): string[] {
  return stack.split("\n").filter((l) =>
    /^\s+at /.test(l) &&
    (l.includes("eval at") || INTERNAL.some((d) => l.includes(`${LIBRARY}${d}`)))
  );
}

async function userCall(vm: VirtualMachine): Promise<unknown> {
  using a = tensor([1, 2, 3]);
  using b = tensor([1, 2]);
  return await vm.invoke("main", a, b);
}

const MODES = {
  specialized: { dispatch: "specialized" },
  generic: { dispatch: "generic" },
  compiled: { mode: "compiled" },
} as const;

for (const [mode, options] of Object.entries(MODES)) {
  Deno.test(`VMError stack (${mode}): the user's frames, and only invoke of the library's`, async () => {
    const ib = new ExecBuilder();
    ib.function("main", { num_inputs: 2 }, () => {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    const vm = new VirtualMachine(ib.get(), cpu(), options);
    const e = await assertRejects(() => userCall(vm), VMError, "do not broadcast");
    const stack = e.stack ?? "";
    assert(stack.startsWith("VMError: vm.op.add: shapes [3] and [2]"), stack);
    assert(internalFrames(stack).length <= 1, stack);
    assert(stack.includes("at userCall ("), stack);
    // The cause keeps its full stack: where in the kernel it failed.
    assert(internalFrames((e.cause as Error).stack ?? "").length > 1);
  });
}

Deno.test("withoutInternalFrames: keeps the message, the outermost library frame and the rest", () => {
  const lib = (path: string, fn: string) => `    at ${fn} (${LIBRARY}${path}:1:1)`;
  const stack = [
    "VMError: boom",
    "  (two lines of message)",
    lib("vm/interpreter.ts", "Interpreter.#wrap"),
    "    at chunk0 (eval at makeFunction (x), <anonymous>:1:1)",
    lib("vm/virtual_machine.ts", "VirtualMachine.invoke"),
    "    at user (file:///home/me/app.ts:3:4)",
    lib("vm/virtual_machine.ts", "VirtualMachine.invoke"),
  ].join("\n");
  assertEquals(
    withoutInternalFrames(stack),
    [
      "VMError: boom",
      "  (two lines of message)",
      lib("vm/virtual_machine.ts", "VirtualMachine.invoke"),
      "    at user (file:///home/me/app.ts:3:4)",
      lib("vm/virtual_machine.ts", "VirtualMachine.invoke"),
    ].join("\n"),
  );
  assertEquals(withoutInternalFrames("Error: no frames"), "Error: no frames");
  const userOnly = "Error: x\n    at user (file:///home/me/app.ts:3:4)";
  assertEquals(withoutInternalFrames(userOnly), userOnly);
});

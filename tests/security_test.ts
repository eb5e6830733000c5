/**
 * Untrusted executables: each finding of the security review, reproduced
 * with a crafted program, and what relaxvm does about it now. Programs are
 * crafted as program data and written with the serializer, which (unlike
 * the builder) writes whatever it is given.
 */

import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import {
  CheckError,
  cpu,
  ExecBuilder,
  Executable,
  type FunctionInfo,
  LoadError,
  type ProgramData,
  tensor,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import { defaultAllocator } from "../devices/allocation_context.ts";
import { saveProgram } from "../program/serialize.ts";

/** The data of a small valid program: `main(x) = copy(x)`, calling one packed function. */
function validProgram(): ProgramData {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  return {
    functions: ex.functions,
    constants: ex.constants,
    instrOffset: ex.instrOffset,
    instrData: ex.instrData,
    liveness: ex.liveness,
  };
}

/** `validProgram()` with function-table entry `name` changed by `change`. */
function withFunction(name: string, change: Partial<FunctionInfo>): ProgramData {
  const p = validProgram();
  return {
    ...p,
    functions: p.functions.map((f) => (f.name === name ? { ...f, ...change } : f)),
  };
}

Deno.test("security: a function declaring 2^24 registers it never uses is rejected at load", () => {
  // Finding 1: the VM allocated a slot per declared register per call, so 152 bytes could
  // ask for gigabytes. The register file must be what the code names.
  const bytes = saveProgram(withFunction("main", { registerFileSize: 1 << 24 }));
  assert(bytes.length < 400, `${bytes.length} bytes`);
  const e = assertThrows(() => Executable.load(bytes), LoadError, "declares 16777216 registers");
  assertStringIncludes(e.message, "use 2");
});

Deno.test("security: every unused field of a packed-function entry must be 0", () => {
  // Finding 3: a packed entry's start/end range was never checked, and the VM constructor
  // looped over it (102 s for a 184-byte file).
  const cases: [Partial<FunctionInfo>, string][] = [
    [{ start: 0, end: 2 ** 31 }, "is a packed function but has end 2147483648 (must be 0)"],
    [{ start: 5, end: 5 }, "has start 5"],
    [{ numArgs: 3 }, "has numArgs 3"],
    [{ registerFileSize: 9 }, "has registerFileSize 9"],
    [{ paramNames: ["x"] }, "is a packed function but has parameter names"],
  ];
  for (const [change, message] of cases) {
    const t0 = performance.now();
    const bytes = saveProgram(withFunction("vm.builtin.copy", change));
    assertThrows(() => Executable.load(bytes), LoadError, message);
    assert(performance.now() - t0 < 1000, "rejected without looping over the range");
  }
});

Deno.test("security: a VM function's parameter names match its inputs", () => {
  const bytes = saveProgram(withFunction("main", { paramNames: ["a", "b", "c"] }));
  assertThrows(() => Executable.load(bytes), LoadError, "3 parameter names for 1 inputs");
});

Deno.test("security: the Executable constructor verifies and copies what it is given", () => {
  // Finding 10: an Executable built from data with a string jump offset ran that string
  // inside the VM's generated JavaScript.
  const g = globalThis as { pwned?: number };
  delete g.pwned;
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_goto(1);
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  const words = [...ex.instrData] as unknown[];
  words[1] = "1; globalThis.pwned = 1; //"; // the goto's offset
  const hostile = { ...ex, functions: ex.functions, instrData: words as unknown as Float64Array };
  const e = assertThrows(() => new Executable(hostile), CheckError);
  assertStringIncludes(e.message, "is not an integer");
  assertEquals(g.pwned, undefined);

  // Valid data is accepted, and the executable keeps its own copy of the code.
  const data = new Float64Array(ex.instrData);
  const copy = new Executable({ ...ex, instrData: data });
  data[1] = 40; // a jump out of the function, after verification
  assertEquals(copy.instrData[1], 1);
  assertEquals(copy.as_text(), ex.as_text());
});

Deno.test("security: hand-made function tables are verified too", async () => {
  const p = validProgram();
  const twice = { ...p, functions: [...p.functions, p.functions[0]] };
  assertThrows(() => new Executable(twice), CheckError, "is in the function table twice");
  const weird = { ...p, functions: [{ ...p.functions[0], kind: "native" as "vm" }] };
  assertThrows(() => new Executable(weird), CheckError, 'unknown kind "native"');
  const badConstant = { ...p, constants: [{ evil: true } as unknown as number] };
  assertThrows(() => new Executable(badConstant), CheckError, "constant c[0] is not");
  const vm = new VirtualMachine(new Executable(p));
  assertEquals(await vm.invoke("main", 21), 21);
});

Deno.test("security: a rejected load frees the tensor constants it had already read", () => {
  const host = defaultAllocator(cpu());
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [tensor(new Float32Array(256))], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const bytes = ib.get().save();
  const before = host.stats().liveBytes;
  // Cut inside the code section: the constants were read, the code was not.
  assertThrows(() => Executable.load(bytes.subarray(0, bytes.length - 8)), LoadError);
  assertEquals(host.stats().liveBytes, before);
});

Deno.test("security: names print escaped in dumps and errors, never as raw control characters", () => {
  // Finding 11: a crafted name faked instructions in `as_text` and injected terminal escapes.
  const fake = "evil\n  ret   %0\n@fake:\u001b[2J\u202e";
  const ib = new ExecBuilder();
  ib.function(fake, { num_inputs: 1 }, () => {
    ib.emit_call(fake + "_packed", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  const text = ex.as_text() + ex.stats();
  // deno-lint-ignore no-control-regex
  assert(!/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/.test(text), JSON.stringify(text));
  assertEquals(text.split("\n").filter((l) => l.startsWith("@")).length, 2, "no fake function");
  assertStringIncludes(text, "@evil\\n  ret   %0\\n@fake:\\x1b[2J\\u202e:");
  // The VM names the unknown packed function (and the function calling it) escaped too.
  const e = assertThrows(() => new VirtualMachine(ex), VMError, "Unknown packed function");
  // deno-lint-ignore no-control-regex
  assert(!/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/.test(e.message), JSON.stringify(e.message));
});

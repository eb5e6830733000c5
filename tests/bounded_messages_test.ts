/**
 * Every error message is bounded (issue 27, finding 7): what a program or a
 * file chose — a problem list, a function name, a record name, a reason
 * quoting the input — is cut, and no message of relaxvm's error classes
 * exceeds `MAX_MESSAGE_CHARS` (64 KiB), while the full data stays
 * available as fields.
 */

import {
  assert,
  assertEquals,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import {
  CheckError,
  ExecBuilder,
  Executable,
  LoadError,
  TensorCacheError,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import { PROBLEMS_LISTED } from "../ground/errors.ts";
import { MAX_MESSAGE_CHARS } from "../ground/printable.ts";
import { parseTensorCacheIndex } from "../builtins/tensor_cache/cache_format.ts";

const HUGE = 1_000_000;

function checkError(build: (ib: ExecBuilder) => void): CheckError {
  const ib = new ExecBuilder();
  build(ib);
  try {
    ib.get();
  } catch (e) {
    if (e instanceof CheckError) return e;
    throw e;
  }
  throw new Error("no CheckError");
}

Deno.test("messages: a CheckError of 100,001 problems lists 50 and counts the rest", () => {
  // A call of 100,000 operands, each a register never written: 6.6 MB of message before.
  const e = checkError((ib) =>
    ib.function("main", { num_inputs: 0 }, () => {
      const operands = Array.from({ length: 100_000 }, (_, i) => ib.r(i + 1));
      ib.emit_call("vm.builtin.make_tuple", operands, { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    })
  );
  assertEquals(e.problems.length, 100_001); // all of them, for a tool
  assert(e.message.length <= MAX_MESSAGE_CHARS, `${e.message.length} characters`);
  assert(e.message.length < 10_000, `${e.message.length} characters`);
  assertStringIncludes(e.message, "found 100001 problems");
  assertStringIncludes(e.message, "reads %49 before any write");
  assertStringIncludes(e.message, `… and ${100_001 - PROBLEMS_LISTED} more`);
  assertEquals(e.message.split("\n").length, 1 + PROBLEMS_LISTED + 1);
});

Deno.test("messages: a function name of a million characters is cut in every message", async () => {
  const name = "f".repeat(HUGE);
  const e = checkError((ib) => ib.function(name, { num_inputs: 0 }, () => ib.emit_ret(ib.r(3))));
  assert(e.message.length < 2000, `${e.message.length} characters`);
  assertStringIncludes(e.message, "more characters");
  assertEquals(e.problems[0].functionName, name);

  // A call of an unknown packed function of that name fails in the VM: a VMError.
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call(name, [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  using exe = ib.get();
  using vm = new VirtualMachine(exe);
  const v = await assertRejects(() => vm.invoke("main"), VMError);
  assert(v.message.length < 10_000, `${v.message.length} characters`);
  assertEquals(v.packedFunc, name); // the whole name, as a field
});

Deno.test("messages: a tensor cache record named with a million characters is cut", () => {
  const index = JSON.stringify({
    records: [{
      dataPath: "params_shard_0.bin",
      format: "raw-shard",
      nbytes: 4,
      records: [{
        name: "w".repeat(HUGE),
        shape: [1],
        dtype: "float32",
        format: "raw",
        nbytes: 8, // wrong: 1 float32 is 4 bytes
        byteOffset: 0,
      }],
    }],
  });
  const e = (() => {
    try {
      parseTensorCacheIndex(index, "tensor-cache.json");
    } catch (e) {
      return e as TensorCacheError;
    }
    throw new Error("no error");
  })();
  assert(e instanceof TensorCacheError);
  assertEquals(e.record?.length, HUGE); // the whole name, as a field
  assert(e.message.length < 10_000, `${e.message.length} characters`);
  assertStringIncludes(e.message, "nbytes 8 does not match");
});

Deno.test("messages: a LoadError quoting a function name of a million characters is cut", () => {
  // An own-format file with two functions of that name: "duplicate function …".
  const ib = new ExecBuilder();
  for (const letter of ["a", "b"]) {
    ib.function(letter.repeat(HUGE), { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  }
  using exe = ib.get();
  const bytes = exe.save();
  const b = bytes.indexOf(0x62); // the first "b": the second name
  bytes.fill(0x61, b, b + HUGE);
  const e = assertThrows(() => Executable.load(bytes), LoadError, "duplicate function");
  assert(e.message.length < 10_000, `${e.message.length} characters`);
  assertStringIncludes(e.message, "more characters");
});

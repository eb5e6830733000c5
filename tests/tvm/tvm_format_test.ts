/**
 * TVM's executable format without TVM: what the loader refuses (with a
 * `LoadError` naming section and offset) and what it keeps exactly — Int
 * constants apart from Floats, 64-bit integers, immediates up to relaxvm's
 * limit. The files are relaxvm-written TVM bytes (identical to TVM's, as the
 * differential suite shows) with one field changed.
 */

import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import {
  cpu,
  ExecBuilder,
  Executable,
  LoadError,
  shape,
  tensor,
  VirtualMachine,
} from "../../mod.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";

/** Offset of the first 8-byte little-endian occurrence of `value` in `bytes`. */
function find64(bytes: Uint8Array, value: bigint): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at + 8 <= bytes.length; at++) {
    if (view.getBigUint64(at, true) === BigInt.asUintN(64, value)) return at;
  }
  throw new Error(`${value} not found`);
}

function set64(bytes: Uint8Array, at: number, value: bigint): Uint8Array {
  const out = bytes.slice();
  new DataView(out.buffer).setBigUint64(at, BigInt.asUintN(64, value), true);
  return out;
}

function loadError(bytes: Uint8Array, ...fragments: string[]): LoadError {
  const e = assertThrows(() => Executable.load(bytes), LoadError);
  for (const f of fragments) assertStringIncludes(e.message, f);
  return e;
}

function program(build: (ib: ExecBuilder) => void): Uint8Array {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => build(ib));
  using ex = ib.get();
  return ex.save({ format: "tvm" });
}

const simple = program((ib) => {
  ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.imm(12345)], { dst: ib.r(1) });
  ib.emit_ret(ib.r(1));
});

Deno.test("TVM format: the header is TVM's magic and version string", () => {
  const view = new DataView(simple.buffer);
  assertEquals(view.getBigUint64(0, true), 0xD225DE2F4214151En);
  assertEquals(view.getBigUint64(8, true), 4n);
  assertEquals(new TextDecoder().decode(simple.subarray(16, 20)), "0.14");
});

Deno.test("TVM format: an older TVM's file is refused, naming the versions read", () => {
  const old = simple.slice();
  old[0] = 0x1d; // 0xD225DE2F4214151D: TVM before the memory-scope section and the tag renumbering
  const e = loadError(old, "before 0.23", "TVM 0.23 to 0.27");
  assertEquals([e.section, e.offset], ["header", 0]);
  const version = simple.slice();
  version[19] = "3".charCodeAt(0); // "0.13"
  assertEquals(loadError(version, 'version "0.13"', "TVM 0.23 to 0.27").offset, 8);
});

Deno.test("TVM format: what relaxvm cannot hold exactly is refused, never rounded", () => {
  // An immediate of 2^52: TVM's 56-bit operands hold it, relaxvm's words do not.
  const imm = find64(simple, (1n << 56n) | 12345n);
  const e = loadError(set64(simple, imm, (1n << 56n) | (2n ** 52n)), "immediate 4503599627370496");
  assertEquals([e.section, e.offset], ["code", imm]);
  // A negative immediate of -2^51 (one past relaxvm's -(2^51 - 1)).
  loadError(set64(simple, imm, (1n << 56n) | ((-(2n ** 51n)) & ((1n << 56n) - 1n))), "immediate");
  // A shape dimension past 2^53.
  const withShape = program((ib) => {
    ib.emit_call("vm.builtin.make_tuple", [ib.r(0), shape(777777)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const dim = find64(withShape, 777777n);
  assertEquals(
    loadError(set64(withShape, dim, 2n ** 60n), "constant 0", "shape element 1152921504606846976")
      .section,
    "constants",
  );
  // A tensor dtype relaxvm has no storage for (int64 turned uint64).
  const withTensor = program((ib) => {
    ib.emit_call("vm.builtin.copy", [tensor(new BigInt64Array([1n, 2n]))], { dst: ib.r(1) });
    ib.emit_ret(ib.r(0));
  });
  // A Float constant that is a NaN with a payload: a JS number would not keep its bits.
  const withFloat = program((ib) => {
    ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.convert_constant(NaN)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const nan = find64(withFloat, 0x7ff8000000000000n);
  loadError(set64(withFloat, nan, 0x7ff8000000000001n), "constant 0", "NaN with payload");
  const dtypeAt = find64(withTensor, 0xDD5E40F096B4A13Fn) + 28;
  const uint64 = withTensor.slice();
  uint64[dtypeAt] = 1; // kDLUInt
  loadError(uint64, "constant 0", "uint64");
});

Deno.test("TVM format: a tensor constant whose dimensions multiply past the file is a LoadError", () => {
  // Issue 27, finding 9: 20 dimensions of 2^53 - 1 multiplied to Infinity, and BigInt(Infinity)
  // threw a raw RangeError.
  const rank = 20;
  const bytes = program((ib) => {
    ib.emit_call("vm.builtin.copy", [tensor([7], { shape: Array(rank).fill(1) })], {
      dst: ib.r(1),
    });
    ib.emit_ret(ib.r(1));
  });
  // magic, reserved word, device (4 + 4), rank (4), dtype (4), then the dimensions.
  const dimsAt = find64(bytes, 0xDD5E40F096B4A13Fn) + 32;
  const sizeAt = dimsAt + 8 * rank;
  const withDims = (dims: bigint[]) => {
    let out = bytes;
    dims.forEach((d, i) => out = set64(out, dimsAt + 8 * i, d));
    return out;
  };
  const huge = withDims(Array(rank).fill(2n ** 53n - 1n));
  const e = loadError(huge, "constant 0", "needs more bytes than the", "left in the file");
  assertEquals([e.section, e.offset], ["constants", sizeAt]);
  // Finite but past the file, and a zero among huge ones (0 elements, not the 4 bytes written).
  loadError(withDims([2n ** 26n, 2n ** 26n]), "constant 0", "needs more bytes than the");
  loadError(
    withDims([0n, ...Array(rank - 1).fill(2n ** 53n - 1n)]),
    "constant 0",
    "has 0 bytes, not 4",
  );
  // The file as written still loads.
  using ok = Executable.load(bytes);
  assertEquals(ok.constants.length, 1);
});

Deno.test("TVM format: memory scopes and VM-TIR functions are refused by name", () => {
  // 1 function (main), 2 packed entries, 0 constants: the memory-scope count sits before
  // the constant count, which sits before the code.
  using ex = Executable.load(simple);
  const code = 8 + 8 * ex.instrOffset.length + 8 + 8 * ex.instrData.length;
  const scopes = simple.length - code - 16;
  assertEquals(
    loadError(set64(simple, scopes, 1n), "memory scopes").section,
    "memory scopes",
  );
  const tir = simple.slice();
  tir[28] = 2; // the first function's kind: kVMTIRFunc
  loadError(tir, "VM-TIR", 'exec_mode="bytecode"');
});

Deno.test("TVM format: every truncation is a LoadError and frees what was read", () => {
  const bytes = program((ib) => {
    ib.emit_call("vm.builtin.copy", [tensor(new Float32Array(64))], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(1), "s", 2n ** 60n, ib.convert_constant(0.5)], {
      dst: ib.r(2),
    });
    ib.emit_ret(ib.r(2));
  });
  const host = defaultAllocator(cpu());
  const before = host.stats().liveBytes;
  for (let n = 0; n < bytes.length; n++) {
    assertThrows(() => Executable.load(bytes.subarray(0, n)), LoadError);
  }
  assertThrows(() => Executable.load(new Uint8Array([...bytes, 0])), LoadError, "unexpected bytes");
  assertEquals(host.stats().liveBytes, before);
});

Deno.test("Int constants stay Int (bigint), Floats stay Float, through builder, both formats and the VM", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.make_tuple", [
      ib.convert_constant(2n ** 63n - 1n), // beyond TVM's immediates: an Int constant
      ib.convert_constant(-(2n ** 60n)),
      ib.convert_constant(7n), // small: an immediate, as TVM's builder makes it
      ib.convert_constant(7), // a JS number: a Float constant
    ], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  using ex = ib.get();
  assertEquals(ex.constants, [2n ** 63n - 1n, -(2n ** 60n), 7]);
  assertStringIncludes(ex.as_text(), "in: c[0], c[1], i7, c[2]");
  for (const bytes of [ex.save(), ex.save({ format: "tvm" })]) {
    using back = Executable.load(bytes);
    assertEquals(back.constants, ex.constants);
    assertEquals(typeof back.constants[0], "bigint");
    assertEquals(typeof back.constants[2], "number");
  }
  const tvm = ex.save({ format: "tvm" });
  assertEquals(new DataView(tvm.buffer).getInt32(find64(tvm, 2n ** 63n - 1n) - 4, true), 1); // Int
  using vm = new VirtualMachine(ex);
  // A 64-bit Int reaches builtins as a bigint (exact); one that fits a number, as a number.
  assertEquals(await vm.invoke("main"), [2n ** 63n - 1n, -(2n ** 60n), 7, 7]);
  assert(
    ex.stats().includes("[9223372036854775807, -1152921504606846976, 7]"),
    ex.stats(),
  );
});

Deno.test("convert_constant refuses an integer TVM makes an immediate that relaxvm cannot hold", () => {
  const ib = new ExecBuilder();
  assertThrows(() => ib.convert_constant(2n ** 52n), RangeError, "2^51");
  ib.function("main", { num_inputs: 0 }, () => {
    assertThrows(() => ib.emit_call("f", [-(2n ** 54n)]), RangeError, "2^55");
    ib.emit_call("f", [2n ** 55n], { dst: ib.r(0) }); // TVM's limit is 2^55 - 1: a constant
    ib.emit_ret(ib.r(0));
  });
  assertEquals(ib.get().constants, [2n ** 55n]);
});

Deno.test("stats() escapes control characters that TVM prints raw (the one difference)", () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.make_tuple", ["line\nbreak", 'quote " ok'], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  using ex = ib.get();
  assertStringIncludes(ex.stats(), '["line\\nbreak", "quote " ok"]');
});

Deno.test("as_text() pads names to TVM's widths in UTF-8 bytes, as std::setw does", () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("ext.café", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("ext.x", [ib.f("ext.café")], { dst: ib.r(2) });
    ib.emit_ret(ib.r(1));
  });
  using ex = ib.get();
  const lines = ex.as_text().split("\n");
  // "ext.café" is 8 characters and 9 bytes: TVM pads it with 7 spaces to 16 bytes, not 8;
  // "f[ext.café]" is 12 bytes, at the 12-byte width of the arguments, so it gets none.
  assertEquals(lines[1], "  call  ext.café        in: %0           dst: %1");
  assertEquals(lines[2], "  call  ext.x            in: f[ext.café] dst: %2");
});

/**
 * Apache TVM's executable format (`relax.VMExecutable`, TVM 0.23–0.27), read
 * and written byte for byte as TVM's `src/runtime/vm/executable.cc` does.
 * Checked against `apache-tvm==0.27.0.post1` by tests/tvm/ (tools/tvm/).
 * This file reads; program/tvm_format_save.ts writes.
 *
 * ```text
 * header     u64 magic 0xD225DE2F4214151E, string version "0.14"
 * functions  u64 count, then per function: i32 kind (0 packed, 1 VM, 2 VM-TIR),
 *            string name, i64 start, i64 end, i64 num_args, i64 register_file_size,
 *            u64 count + strings: parameter names
 *            (a packed function: start 0, end 0, num_args -2, register_file_size 0)
 * scopes     u64 count, then per entry: i64 constant index, string memory scope
 * constants  u64 count, then per constant an i32 tvm-ffi type index and its payload:
 *              70 Tensor    SaveDLTensor: u64 0xDD5E40F096B4A13F, u64 0, i32 device
 *                           type, i32 device id, i32 ndim, dtype, i64 dims[ndim],
 *                           i64 byte size, the bytes
 *              69 Shape     u64 count, i64 dims
 *              65 Str       u64 length, the bytes
 *               1 Int       i64
 *               3 Float     f64
 *               5 DataType  u8 code, u8 bits, u16 lanes
 * code       u64 count + i64 instr_offset[], u64 count + i64 instr_data[]
 * ```
 *
 * A string is a u64 length and its bytes; everything is little-endian.
 *
 * TVM's code words are int64s: an operand word is `kind << 56 | value` (a
 * 56-bit signed value), and the special registers are `%void` = 2^54 and
 * `%vm` = 2^54 + 1. relaxvm's words are float64s (program/bytecode.ts), so
 * this module converts word by word, led by the opcode table. What relaxvm
 * cannot hold exactly — an immediate of 2^51 or more, a shape dimension past
 * 2^53, a tensor dtype it has no storage for, memory scopes, VM-TIR
 * functions — is refused with a `LoadError` naming it; nothing is rounded.
 * An `Int` constant is loaded as a `bigint` and a `Float` as a number, so
 * saving writes back the kind it had.
 *
 * @module
 */

import { ByteReader } from "./byte_io.ts";
import {
  ArgKind,
  encodeArg,
  MAX_OPERAND_VALUE,
  type OpcodeInfo,
  opcodeInfo,
  VM_REGISTER,
  VOID_REGISTER,
} from "./bytecode.ts";
import { DataType, elementBytes, type TensorDType, tensorDType } from "../ground/dtype.ts";
import { LoadError } from "../ground/errors.ts";
import { printable } from "../ground/printable.ts";
import { NDArray, shapeSizeWithin } from "../devices/ndarray.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import type { ConstantValue, FunctionInfo } from "./program_data.ts";
import { type LoadedProgram, verifiedProgram } from "./serialize.ts";

/** The magic number of TVM ≥ 0.23's executables (`kTVMVMBytecodeMagicV2`). */
export const TVM_MAGIC = 0xD225DE2F4214151En;
/** The magic number of older TVM executables (`kTVMVMBytecodeMagic`): refused. */
export const TVM_OLD_MAGIC = 0xD225DE2F4214151Dn;
/** The version string TVM writes after the magic (`VM_VERSION`). */
export const TVM_VM_VERSION = "0.14";
/** The TVM releases whose executables this module reads and writes. */
export const TVM_SUPPORTED = "TVM 0.23 to 0.27 (magic 0xD225DE2F4214151E, version 0.14)";

/** tvm-ffi type indices of the constant pool's values (TVM ≥ 0.23). */
export const TvmTypeIndex = {
  Int: 1,
  Float: 3,
  DataType: 5,
  Str: 65,
  Shape: 69,
  Tensor: 70,
} as const;

/** `kTVMNDArrayMagic`: starts every tensor SaveDLTensor writes. */
export const TENSOR_MAGIC = 0xDD5E40F096B4A13Fn;
/** The kind word before each function of the table. */
export const FuncKind = { Packed: 0, VM: 1, VMTIR: 2 } as const;
/** A packed function's num_args in TVM's table (DeclareFunction marks it undefined). */
export const PACKED_NUM_ARGS = -2n;
const SPECIAL_REGISTER = 2n ** 54n;
/** TVM's `%void` and `%vm` register numbers. */
export const TVM_VOID = SPECIAL_REGISTER;
export const TVM_VM = SPECIAL_REGISTER + 1n;
/** An operand word is `kind << VALUE_BITS | value`, value masked by VALUE_MASK. */
export const VALUE_BITS = 56n;
export const VALUE_MASK = (1n << VALUE_BITS) - 1n;
const MAX_NDIM = 32;
/** The bits of the NaN that JS engines, Python and TVM make. */
const CANONICAL_NAN = 0x7ff8000000000000n;
const LIMIT = BigInt(MAX_OPERAND_VALUE);

/** Whether `bytes` starts with either of TVM's magic numbers. */
export function isTvmExecutable(bytes: Uint8Array): boolean {
  if (!(bytes instanceof Uint8Array) || bytes.byteLength < 8) return false;
  const magic = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  return magic === TVM_MAGIC || magic === TVM_OLD_MAGIC;
}

// ---------------------------------------------------------------- reading

/** A u64 count of items of at least `itemBytes` bytes each, checked against what is left. */
function count(r: ByteReader, itemBytes: number, what: string): number {
  const at = r.position;
  const n = r.u64(what);
  if (n > BigInt(Math.floor(r.remaining / itemBytes))) {
    throw r.fail(`${what} ${n} cannot fit in the ${r.remaining} bytes left`, at);
  }
  return Number(n);
}

function tvmString(r: ByteReader, what: string): string {
  return r.utf8(count(r, 1, `${what} length`), what);
}

/** An i64 that must be a safe integer within [min, max]. */
function int(r: ByteReader, what: string, min: number, max: number): number {
  const at = r.position;
  const v = r.i64(what);
  if (v < BigInt(min) || v > BigInt(max)) {
    throw r.fail(`${what} ${v} is out of range [${min}, ${max}]`, at);
  }
  return Number(v);
}

function readFunctions(r: ByteReader): FunctionInfo[] {
  r.section = "functions";
  const n = count(r, 4 + 8 * 6, "function count");
  const functions: FunctionInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < n; i++) {
    const at = r.position;
    const kind = r.i32("function kind");
    if (kind === FuncKind.VMTIR) {
      throw r.fail(
        `function ${i} is a VM-TIR function (exec_mode="compiled"), which relaxvm does not run; build with the default exec_mode="bytecode"`,
        at,
      );
    }
    if (kind !== FuncKind.Packed && kind !== FuncKind.VM) {
      throw r.fail(`function ${i} has unknown kind ${kind}`, at);
    }
    const name = tvmString(r, "function name");
    if (names.has(name)) throw r.fail(`duplicate function "${printable(name)}"`, at);
    names.add(name);
    const fieldsAt = r.position;
    const start = r.i64("start"), end = r.i64("end");
    const numArgs = r.i64("num_args"), registerFileSize = r.i64("register_file_size");
    const nparams = count(r, 8, "parameter count");
    const paramNames: string[] = [];
    for (let p = 0; p < nparams; p++) paramNames.push(tvmString(r, "parameter name"));
    if (kind === FuncKind.Packed) {
      if (
        start !== 0n || end !== 0n || numArgs !== PACKED_NUM_ARGS || registerFileSize !== 0n ||
        nparams !== 0
      ) {
        throw r.fail(
          `packed function "${
            printable(name)
          }" has start ${start}, end ${end}, num_args ${numArgs}, register_file_size ${registerFileSize}, ${nparams} parameters (TVM writes 0, 0, -2, 0, 0)`,
          fieldsAt,
        );
      }
      functions.push({
        kind: "packed",
        name,
        start: 0,
        end: 0,
        numArgs: 0,
        registerFileSize: 0,
        paramNames: [],
      });
      continue;
    }
    const fields = [start, end, numArgs, registerFileSize];
    if (fields.some((v) => v < 0n || v > 0xffffffffn)) {
      throw r.fail(
        `function "${
          printable(name)
        }" has start ${start}, end ${end}, num_args ${numArgs}, register_file_size ${registerFileSize}: each must be in [0, 2^32)`,
        fieldsAt,
      );
    }
    if (start > end) {
      throw r.fail(`function "${printable(name)}" ends (${end}) before it starts (${start})`, at);
    }
    if (nparams !== 0 && BigInt(nparams) !== numArgs) {
      throw r.fail(
        `function "${printable(name)}" has ${numArgs} inputs and ${nparams} parameter names`,
        at,
      );
    }
    functions.push({
      kind: "vm",
      name,
      start: Number(start),
      end: Number(end),
      numArgs: Number(numArgs),
      registerFileSize: Number(registerFileSize),
      paramNames,
    });
  }
  return functions;
}

function readMemoryScopes(r: ByteReader): void {
  r.section = "memory scopes";
  const at = r.position;
  const n = r.u64("memory scope count");
  if (n !== 0n) {
    throw r.fail(
      `${n} memory scopes (texture memory for constants): relaxvm keeps constants in plain buffers and does not support them`,
      at,
    );
  }
}

function readDataType(r: ByteReader, what: string): DataType {
  const at = r.position;
  const code = r.u8(`${what} code`), bits = r.u8(`${what} bits`), lanes = r.u16(`${what} lanes`);
  const dt = new DataType(code, bits, lanes);
  let same = false;
  try {
    same = DataType.parse(dt.toString()).equals(dt);
  } catch {
    // unknown to relaxvm: refused below
  }
  if (!same) {
    throw r.fail(`${what} (code ${code}, bits ${bits}, lanes ${lanes}) is not one relaxvm has`, at);
  }
  return dt;
}

function readTensor(r: ByteReader, index: number): NDArray {
  const at = r.position;
  if (r.u64("tensor magic") !== TENSOR_MAGIC) {
    throw r.fail(`constant ${index}: bad tensor magic`, at);
  }
  if (r.u64("tensor reserved word") !== 0n) {
    throw r.fail(`constant ${index}: nonzero reserved word`, at + 8);
  }
  const deviceAt = r.position;
  const deviceType = r.i32("device type"), deviceId = r.i32("device id");
  if (deviceType !== 1 || deviceId !== 0) {
    throw r.fail(
      `constant ${index}: a tensor on device (${deviceType}, ${deviceId}); TVM saves constants from cpu(0)`,
      deviceAt,
    );
  }
  const ndimAt = r.position;
  const ndim = r.i32("tensor rank");
  if (ndim < 0 || ndim > MAX_NDIM) {
    throw r.fail(`constant ${index}: tensor rank ${ndim} is not in [0, ${MAX_NDIM}]`, ndimAt);
  }
  const dtypeAt = r.position;
  const dt = readDataType(r, `constant ${index}: tensor dtype`);
  let tdt: TensorDType;
  try {
    tdt = tensorDType(dt);
  } catch (e) {
    throw new LoadError(r.section, dtypeAt, `constant ${index}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  const dims: number[] = [];
  for (let i = 0; i < ndim; i++) dims.push(int(r, "tensor dimension", 0, Number.MAX_SAFE_INTEGER));
  const sizeAt = r.position;
  const size = r.i64("tensor byte size");
  // Counted against what the file has left: 20 dimensions of 2^53 - 1 multiply to Infinity,
  // which no BigInt can hold.
  const count = shapeSizeWithin(dims, Math.floor(r.remaining / elementBytes(tdt)));
  if (count < 0) {
    throw r.fail(
      `constant ${index}: a ${tdt} tensor of shape [${
        dims.join(", ")
      }] needs more bytes than the ${r.remaining} left in the file`,
      sizeAt,
    );
  }
  const expected = count * elementBytes(tdt);
  if (size !== BigInt(expected)) {
    throw r.fail(
      `constant ${index}: a ${tdt} tensor of shape [${
        dims.join(", ")
      }] has ${expected} bytes, not ${size}`,
      sizeAt,
    );
  }
  const bytes = r.bytes(expected, "tensor data");
  const out = NDArray.empty(dims, tdt);
  new Uint8Array(out.block as ArrayBuffer, 0, bytes.length).set(bytes);
  return out; // floating: the Executable made from it holds it (until its dispose())
}

function readConstant(r: ByteReader, index: number): ConstantValue {
  const at = r.position;
  const tag = r.i32("constant type index");
  switch (tag) {
    case TvmTypeIndex.Tensor:
      return readTensor(r, index);
    case TvmTypeIndex.Shape: {
      const n = count(r, 8, "shape length");
      const dims: number[] = [];
      for (let i = 0; i < n; i++) {
        const dimAt = r.position;
        const d = r.i64("shape element");
        if (d > BigInt(Number.MAX_SAFE_INTEGER) || d < BigInt(Number.MIN_SAFE_INTEGER)) {
          throw r.fail(
            `constant ${index}: shape element ${d} is beyond 2^53, which relaxvm's shapes cannot hold exactly`,
            dimAt,
          );
        }
        dims.push(Number(d));
      }
      return new ShapeTuple(dims);
    }
    case TvmTypeIndex.Str:
      return tvmString(r, "string constant");
    case TvmTypeIndex.Int:
      return r.i64("integer constant");
    case TvmTypeIndex.Float: {
      // A NaN's payload does not survive as a JS number (engines may canonicalize it), so
      // only the canonical NaN (the one Python and TVM make) is kept, exactly.
      const bitsAt = r.position;
      const bits = r.u64("float constant");
      const isNaN = (bits & 0x7ff0000000000000n) === 0x7ff0000000000000n &&
        (bits & 0xfffffffffffffn) !== 0n;
      if (isNaN && bits !== CANONICAL_NAN) {
        throw r.fail(
          `constant ${index} is a NaN with payload 0x${
            bits.toString(16)
          }, which a JavaScript number cannot keep exactly`,
          bitsAt,
        );
      }
      const view = new DataView(new ArrayBuffer(8));
      view.setBigUint64(0, bits, true);
      return view.getFloat64(0, true);
    }
    case TvmTypeIndex.DataType:
      return readDataType(r, `constant ${index}: dtype`);
    default:
      throw r.fail(
        `constant ${index} has type index ${tag}, which ${TVM_SUPPORTED} does not write (70 Tensor, 69 Shape, 65 Str, 1 Int, 3 Float, 5 DataType)`,
        at,
      );
  }
}

function readConstants(r: ByteReader, constants: ConstantValue[]): void {
  r.section = "constants";
  const n = count(r, 4, "constant count");
  for (let i = 0; i < n; i++) constants.push(readConstant(r, i));
}

/** Converts TVM's code words to relaxvm's; `wordsAt` is where the words start in the file. */
class CodeConverter {
  readonly out: Float64Array;
  constructor(readonly words: BigInt64Array, readonly wordsAt: number) {
    this.out = new Float64Array(words.length);
  }

  fail(word: number, reason: string): LoadError {
    return new LoadError("code", this.wordsAt + word * 8, reason);
  }

  plain(at: number, what: string): number {
    const v = this.words[at];
    if (v < -LIMIT || v > LIMIT) {
      throw this.fail(at, `${what} ${v} exceeds what relaxvm's code words hold (|v| < 2^51)`);
    }
    return Number(v);
  }

  register(at: number, what: string): number {
    const v = this.words[at];
    if (v === TVM_VOID) return VOID_REGISTER;
    if (v === TVM_VM) return VM_REGISTER;
    if (v < 0n || v > LIMIT) throw this.fail(at, `${what} register ${v} is out of range`);
    return Number(v);
  }

  operand(at: number): number {
    const word = this.words[at];
    const kind = Number((word >> VALUE_BITS) & 0xffn);
    const value = BigInt.asIntN(Number(VALUE_BITS), word & VALUE_MASK);
    if (kind > ArgKind.FuncIdx) throw this.fail(at, `operand of unknown kind ${kind}`);
    if (kind === ArgKind.Register) {
      if (value === TVM_VOID) return encodeArg(ArgKind.Register, VOID_REGISTER);
      if (value === TVM_VM) return encodeArg(ArgKind.Register, VM_REGISTER);
    }
    if (value < -LIMIT || value > LIMIT) {
      const name = ["register", "immediate", "constant index", "function index"][kind];
      throw this.fail(
        at,
        `${name} ${value} is beyond 2^51, which relaxvm's code words cannot hold exactly`,
      );
    }
    if (kind !== ArgKind.Immediate && value < 0n) {
      throw this.fail(at, `negative ${["register", "", "constant", "function"][kind]} ${value}`);
    }
    return encodeArg(kind as ArgKind, Number(value));
  }

  /** Converts the instruction at word `at`; returns its length in words. */
  instruction(at: number, index: number): number {
    const op = this.words[at];
    const info: OpcodeInfo | undefined = op >= 1n && op <= 8n ? opcodeInfo(Number(op)) : undefined;
    if (info === undefined) throw this.fail(at, `instruction ${index}: unknown opcode ${op}`);
    let length = 1 + info.fields.length;
    if (at + length > this.words.length) {
      throw this.fail(at, `instruction ${index} (${info.name}) runs past the code`);
    }
    this.out[at] = Number(op);
    info.fields.forEach((field, k) => {
      const w = at + 1 + k;
      if (field.role === "write" || field.role === "read") {
        this.out[w] = this.register(w, field.name);
      } else {
        this.out[w] = this.plain(w, field.name);
      }
      if (field.role === "count") {
        if (this.out[w] < 0 || at + length + this.out[w] > this.words.length) {
          throw this.fail(w, `instruction ${index}: ${this.out[w]} operands run past the code`);
        }
        length += this.out[w];
      }
    });
    for (let w = at + 1 + info.fields.length; w < at + length; w++) this.out[w] = this.operand(w);
    return length;
  }
}

function readCode(r: ByteReader): { offsets: Uint32Array; data: Float64Array; dataStart: number } {
  r.section = "code";
  const n = count(r, 8, "instruction count");
  const offsets = new Uint32Array(n);
  const offsetsAt = r.position;
  for (let i = 0; i < n; i++) offsets[i] = int(r, "instruction offset", 0, 0xffffffff);
  const nwords = count(r, 8, "word count");
  const dataStart = r.position;
  const words = new BigInt64Array(nwords);
  for (let i = 0; i < nwords; i++) words[i] = r.i64("code word");
  const converter = new CodeConverter(words, dataStart);
  // Instructions must tile the words in order: each word converts as one kind of field.
  let next = 0;
  for (let i = 0; i < n; i++) {
    if (offsets[i] !== next) {
      throw new LoadError(
        "code",
        offsetsAt + 8 * i,
        `instruction ${i} starts at word ${
          offsets[i]
        }, expected ${next} (instructions follow one another)`,
      );
    }
    next += converter.instruction(next, i);
  }
  if (next !== nwords) {
    throw converter.fail(next, `${nwords - next} words after the last instruction`);
  }
  return { offsets, data: converter.out, dataStart };
}

/**
 * Reads an executable TVM wrote (`VMExecutable.SaveToBytes`, the bytes of
 * `ex.mod.write_to_file`). Anything malformed, or anything relaxvm cannot
 * hold exactly, is a `LoadError` naming the section and offset. The code is
 * verified as relaxvm's own format is; the program runs with liveness on.
 */
export function loadTvmProgram(bytes: Uint8Array): LoadedProgram {
  if (!(bytes instanceof Uint8Array)) throw new LoadError("header", 0, "expected a Uint8Array");
  const r = new ByteReader(bytes);
  const magic = r.u64("magic number");
  if (magic === TVM_OLD_MAGIC) {
    throw r.fail(
      `an executable of TVM before 0.23 (magic 0x${
        magic.toString(16).toUpperCase()
      }, other constant tags); relaxvm reads ${TVM_SUPPORTED}: rebuild it with TVM 0.23 or later`,
      0,
    );
  }
  if (magic !== TVM_MAGIC) throw r.fail("not a TVM executable (bad magic number)", 0);
  const versionAt = r.position;
  const version = tvmString(r, "version");
  if (version !== TVM_VM_VERSION) {
    throw r.fail(
      `TVM VM version "${printable(version)}" is not supported; relaxvm reads ${TVM_SUPPORTED}`,
      versionAt,
    );
  }
  const functions = readFunctions(r);
  readMemoryScopes(r);
  const constants: ConstantValue[] = [];
  try {
    readConstants(r, constants);
    const { offsets, data, dataStart } = readCode(r);
    if (r.remaining !== 0) {
      r.section = "trailer";
      throw r.fail(`${r.remaining} unexpected bytes after the last section`);
    }
    return verifiedProgram(
      { functions, constants, instrOffset: offsets, instrData: data, liveness: true },
      dataStart,
    );
  } catch (e) {
    for (const c of constants) if (c instanceof NDArray) c.dispose();
    throw e;
  }
}

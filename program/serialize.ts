/**
 * Binary serialization of an `Executable`, `save` and `load` side by side.
 *
 * ```text
 * header   magic "RLXVM\0\r\n" (8 bytes; the CR LF catches text-mode mangling)
 *          u32 format version, u32 flags (bit 0: liveness)
 * sections in this order, each: u32 tag, u32 payload length, payload
 *   FUNC   u32 count, then per function: u8 kind (0 vm, 1 packed), str name,
 *          u32 start, u32 end, u32 num_args, u32 register_file_size,
 *          u32 param count, str params…
 *   CONS   u32 count, then per constant: u8 tag, value (see writeConstant;
 *          tag 5, an Int constant, is a little-endian i64)
 *   CODE   u32 instruction count, u32 word count, padding to 8,
 *          u32 instr_offset[count], padding to 8, f64 instr_data[words]
 * ```
 *
 * Strings are u32 length + UTF-8; numbers little-endian. `load` checks every
 * read, then decodes every instruction and runs the checker over the result:
 * malformed input of any kind is a `LoadError` naming the section and offset.
 *
 * @module
 */

import { ByteReader, ByteWriter } from "./byte_io.ts";
import { DataType, elementBytes, tensorDType } from "../ground/dtype.ts";
import { formatProblem, LoadError } from "../ground/errors.ts";
import { printable } from "../ground/printable.ts";
import { NDArray, shapeSize } from "../devices/ndarray.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import type { ConstantValue, FunctionInfo, ProgramData } from "./program_data.ts";
import { verifyProgram } from "./verifier.ts";

/** `RLXVM\0\r\n`. */
export const MAGIC: readonly number[] = [0x52, 0x4c, 0x58, 0x56, 0x4d, 0x00, 0x0d, 0x0a];
/** Bumped whenever the layout changes. */
export const FORMAT_VERSION = 1;

const FLAG_LIVENESS = 1;
const Section = { FUNC: 0x434e5546, CONS: 0x534e4f43, CODE: 0x45444f43 } as const;
const ConstTag = { Number: 0, String: 1, Shape: 2, DType: 3, Tensor: 4, Int: 5 } as const;
/** A bound that keeps a hostile file from asking for absurd memory before it is checked. */
const MAX_NDIM = 32;
/** How many of the verifier's problems a `LoadError` message lists. */
const PROBLEMS_SHOWN = 10;

function writeConstant(w: ByteWriter, c: ConstantValue): void {
  if (typeof c === "number") {
    w.u8(ConstTag.Number);
    w.f64(c);
  } else if (typeof c === "bigint") {
    w.u8(ConstTag.Int); // an Int constant (TVM's kTVMFFIInt), kept apart from numbers
    w.i64(c);
  } else if (typeof c === "string") {
    w.u8(ConstTag.String);
    w.string(c);
  } else if (c instanceof ShapeTuple) {
    w.u8(ConstTag.Shape);
    w.u32(c.length);
    for (const d of c) w.f64(d);
  } else if (c instanceof DataType) {
    w.u8(ConstTag.DType);
    w.u8(c.code);
    w.u8(c.bits);
    w.u16(c.lanes);
  } else {
    w.u8(ConstTag.Tensor);
    w.string(c.dtype);
    w.u32(c.shape.length);
    for (const d of c.shape) w.f64(d);
    const data = c.cpuView(); // the stored bytes: bfloat16 bits, not their float32 values
    w.u32(data.byteLength);
    w.bytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }
}

function writeSection(w: ByteWriter, tag: number, body: () => void): void {
  w.u32(tag);
  const lengthAt = w.length;
  w.u32(0);
  body();
  w.patchU32(lengthAt, w.length - lengthAt - 4);
}

/** The bytes of a program. */
export function saveProgram(ex: ProgramData): Uint8Array {
  const w = new ByteWriter();
  for (const b of MAGIC) w.u8(b);
  w.u32(FORMAT_VERSION);
  w.u32(ex.liveness ? FLAG_LIVENESS : 0);
  writeSection(w, Section.FUNC, () => {
    w.u32(ex.functions.length);
    for (const f of ex.functions) {
      w.u8(f.kind === "vm" ? 0 : 1);
      w.string(f.name);
      w.u32(f.start);
      w.u32(f.end);
      w.u32(f.numArgs);
      w.u32(f.registerFileSize);
      w.u32(f.paramNames.length);
      for (const p of f.paramNames) w.string(p);
    }
  });
  writeSection(w, Section.CONS, () => {
    w.u32(ex.constants.length);
    for (const c of ex.constants) writeConstant(w, c);
  });
  writeSection(w, Section.CODE, () => {
    w.u32(ex.instrOffset.length);
    w.u32(ex.instrData.length);
    w.align(8);
    w.u32Array(ex.instrOffset);
    w.align(8);
    w.f64Array(ex.instrData);
  });
  return w.finish();
}

function enterSection(r: ByteReader, tag: number, name: string): number {
  r.section = name;
  const at = r.position;
  const found = r.u32("section tag");
  if (found !== tag) throw r.fail(`expected section "${name}"`, at);
  return r.limit(r.u32("section length"));
}

function readFunctions(r: ByteReader): FunctionInfo[] {
  const old = enterSection(r, Section.FUNC, "functions");
  const count = r.u32("function count");
  const functions: FunctionInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < count; i++) {
    const at = r.position;
    const kindByte = r.u8("function kind");
    if (kindByte > 1) throw r.fail(`function ${i} has unknown kind ${kindByte}`, at);
    const name = r.string("function name");
    if (names.has(name)) throw r.fail(`duplicate function "${printable(name)}"`, at);
    names.add(name);
    const start = r.u32("start"), end = r.u32("end"), numArgs = r.u32("num_args");
    const registerFileSize = r.u32("register_file_size");
    const nparams = r.u32("param count");
    if (nparams > r.remaining / 4) {
      throw r.fail(`function "${printable(name)}" claims ${nparams} parameters`, at);
    }
    const paramNames: string[] = [];
    for (let p = 0; p < nparams; p++) paramNames.push(r.string("parameter name"));
    if (start > end) {
      throw r.fail(`function "${printable(name)}" ends (${end}) before it starts (${start})`, at);
    }
    functions.push({
      kind: kindByte === 0 ? "vm" : "packed",
      name,
      start,
      end,
      numArgs,
      registerFileSize,
      paramNames,
    });
  }
  r.endLimit(old);
  return functions;
}

function readConstant(r: ByteReader): ConstantValue {
  const at = r.position;
  const tag = r.u8("constant tag");
  switch (tag) {
    case ConstTag.Number:
      return r.f64("number");
    case ConstTag.String:
      return r.string("string");
    case ConstTag.Int:
      return r.i64("integer");
    case ConstTag.Shape: {
      const n = r.u32("shape length");
      if (n > r.remaining / 8) throw r.fail(`shape of ${n} elements does not fit`, at);
      const dims: number[] = [];
      for (let i = 0; i < n; i++) {
        const d = r.f64("shape element");
        if (!Number.isSafeInteger(d)) {
          throw r.fail(`shape element ${d} is not an integer`, r.position - 8);
        }
        dims.push(d);
      }
      return new ShapeTuple(dims);
    }
    case ConstTag.DType: {
      const code = r.u8("dtype code"), bits = r.u8("dtype bits"), lanes = r.u16("dtype lanes");
      const dt = new DataType(code, bits, lanes);
      try {
        DataType.parse(dt.toString());
      } catch (e) {
        throw new LoadError(
          r.section,
          at,
          `invalid dtype (code ${code}, bits ${bits}, lanes ${lanes})`,
          { cause: e },
        );
      }
      return dt;
    }
    case ConstTag.Tensor: {
      const dtypeText = r.string("tensor dtype");
      let dt;
      try {
        dt = tensorDType(dtypeText);
      } catch (e) {
        throw new LoadError(r.section, at, `invalid tensor dtype "${dtypeText}"`, { cause: e });
      }
      const ndim = r.u32("tensor rank");
      if (ndim > MAX_NDIM) throw r.fail(`tensor rank ${ndim} exceeds ${MAX_NDIM}`, at);
      const dims: number[] = [];
      for (let i = 0; i < ndim; i++) {
        const d = r.f64("tensor dimension");
        if (!Number.isSafeInteger(d) || d < 0) {
          throw r.fail(`tensor dimension ${d} is invalid`, r.position - 8);
        }
        dims.push(d);
      }
      const nbytes = r.u32("tensor byte length");
      if (nbytes !== shapeSize(dims) * elementBytes(dt)) {
        throw r.fail(
          `tensor of shape [${dims.join(", ")}] and dtype ${dt} cannot hold ${nbytes} bytes`,
          at,
        );
      }
      const dataAt = r.position;
      const data = r.bytes(nbytes, "tensor data");
      if (dt === "bool") {
        // Elements are 0 or 1: another byte reads as true but writes back as 1, so the
        // executable would not survive its own dumps (as_typescript) byte for byte.
        const bad = data.findIndex((b) => b > 1);
        if (bad >= 0) throw r.fail(`bool element ${bad} is ${data[bad]}, not 0 or 1`, dataAt + bad);
      }
      return tensorFromBytes(data, dims, dt);
    }
    default:
      throw r.fail(`unknown constant tag ${tag}`, at);
  }
}

/** A CPU tensor holding a copy of `bytes`, for the executable being loaded to hold. */
function tensorFromBytes(
  bytes: Uint8Array,
  dims: number[],
  dt: ReturnType<typeof tensorDType>,
): NDArray {
  const out = NDArray.empty(dims, dt);
  new Uint8Array(out.block as ArrayBuffer, 0, bytes.length).set(bytes);
  return out; // floating: the Executable made from it holds it (until its dispose())
}

/** Reads the constant pool into `constants` (so a caller can free what was read if a later read fails). */
function readConstants(r: ByteReader, constants: ConstantValue[]): void {
  const old = enterSection(r, Section.CONS, "constants");
  const count = r.u32("constant count");
  if (count > r.remaining) throw r.fail(`${count} constants cannot fit in ${r.remaining} bytes`);
  for (let i = 0; i < count; i++) constants.push(readConstant(r));
  r.endLimit(old);
}

/** What `loadProgram` returns: the verified program and the verifier's warnings. */
export interface LoadedProgram {
  /** The program, verified. */
  readonly data: ProgramData;
  /** The verifier's warnings (unused inputs, ...). */
  readonly warnings: readonly string[];
}

/**
 * Runs the verifier over a program just read; a `LoadError` lists every
 * problem found (the first ten in the message) and points at the first
 * (`dataStart`: where the code words start in the file, 8 bytes each).
 * Shared by both formats (program/tvm_format.ts).
 */
export function verifiedProgram(program: ProgramData, dataStart: number): LoadedProgram {
  const { errors, warnings } = verifyProgram(program);
  if (errors.length > 0) {
    const first = errors[0];
    const shown = errors.slice(0, PROBLEMS_SHOWN).map(formatProblem).join("; ");
    const more = errors.length > PROBLEMS_SHOWN
      ? `; and ${errors.length - PROBLEMS_SHOWN} more`
      : "";
    throw new LoadError(
      "code",
      dataStart + Math.max(0, first.word) * 8,
      `the code does not check: ${errors.length} problem${
        errors.length === 1 ? "" : "s"
      }: ${shown}${more}`,
    );
  }
  return { data: program, warnings };
}

/**
 * Reads a program; anything malformed is a `LoadError`. The code is
 * verified, and a `LoadError` for code lists every problem the verifier
 * found (the first ten in the message) and points at the first.
 */
export function loadProgram(bytes: Uint8Array): LoadedProgram {
  if (!(bytes instanceof Uint8Array)) throw new LoadError("header", 0, "expected a Uint8Array");
  const r = new ByteReader(bytes);
  for (let i = 0; i < MAGIC.length; i++) {
    if (r.u8("magic number") !== MAGIC[i]) {
      throw r.fail("not a relaxvm executable (bad magic number)", i);
    }
  }
  const version = r.u32("format version");
  if (version !== FORMAT_VERSION) {
    throw r.fail(`format version ${version} is not supported (expected ${FORMAT_VERSION})`, 8);
  }
  const flags = r.u32("flags");
  if ((flags & ~FLAG_LIVENESS) !== 0) throw r.fail(`unknown flags ${flags}`, 12);
  const functions = readFunctions(r);
  // Tensor constants own memory: a load that fails after reading them frees them at once.
  const constants: ConstantValue[] = [];
  try {
    readConstants(r, constants);
    const old = enterSection(r, Section.CODE, "code");
    const ninstr = r.u32("instruction count");
    const nwords = r.u32("word count");
    r.align(8);
    const offsets = r.u32Array(ninstr, "instr_offset");
    r.align(8);
    const dataStart = r.position;
    const data = r.f64Array(nwords, "instr_data");
    // -0 decodes as 0 everywhere but writes back as -0 only here: the dumps (as_typescript)
    // could not rebuild the file byte for byte. No writer makes one.
    for (let i = 0; i < data.length; i++) {
      if (data[i] === 0 && 1 / data[i] < 0) {
        throw r.fail(`code word ${i} is -0`, dataStart + 8 * i);
      }
    }
    r.endLimit(old);
    if (r.remaining !== 0) {
      r.section = "trailer";
      throw r.fail(`${r.remaining} unexpected bytes after the last section`);
    }
    const program: ProgramData = {
      functions,
      constants,
      instrOffset: offsets,
      instrData: data,
      liveness: (flags & FLAG_LIVENESS) !== 0,
    };
    return verifiedProgram(program, dataStart);
  } catch (e) {
    for (const c of constants) if (c instanceof NDArray) c.dispose();
    throw e;
  }
}

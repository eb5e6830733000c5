/**
 * Writes Apache TVM's executable format (`VMExecutable.SaveToBytes`, TVM
 * 0.23–0.27), the layout described in program/tvm_format.ts, which reads it
 * and holds the constants both directions share.
 *
 * @module
 */

import { ByteWriter } from "./byte_io.ts";
import { ArgKind, argKind, argValue, opcodeInfo, VM_REGISTER, VOID_REGISTER } from "./bytecode.ts";
import { DataType } from "../ground/dtype.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import type { ConstantValue, ProgramData } from "./program_data.ts";
import {
  FuncKind,
  PACKED_NUM_ARGS,
  TENSOR_MAGIC,
  TVM_MAGIC,
  TVM_VM,
  TVM_VM_VERSION,
  TVM_VOID,
  TvmTypeIndex,
  VALUE_BITS,
  VALUE_MASK,
} from "./tvm_format.ts";

function writeString(w: ByteWriter, s: string): void {
  const b = new TextEncoder().encode(s);
  w.i64(b.length);
  w.bytes(b);
}

function writeConstant(w: ByteWriter, c: ConstantValue, index: number): void {
  if (typeof c === "number") {
    w.i32(TvmTypeIndex.Float);
    w.f64(c);
  } else if (typeof c === "bigint") {
    if (c !== BigInt.asIntN(64, c)) {
      throw new RangeError(`constant c[${index}] = ${c} does not fit TVM's int64`);
    }
    w.i32(TvmTypeIndex.Int);
    w.i64(c);
  } else if (typeof c === "string") {
    w.i32(TvmTypeIndex.Str);
    writeString(w, c);
  } else if (c instanceof ShapeTuple) {
    w.i32(TvmTypeIndex.Shape);
    w.i64(c.length);
    for (const d of c) w.i64(d);
  } else if (c instanceof DataType) {
    w.i32(TvmTypeIndex.DataType);
    w.u8(c.code);
    w.u8(c.bits);
    w.u16(c.lanes);
  } else {
    w.i32(TvmTypeIndex.Tensor);
    w.i64(TENSOR_MAGIC);
    w.i64(0);
    w.i32(1); // kDLCPU
    w.i32(0);
    w.i32(c.shape.length);
    const dt = DataType.parse(c.dtype);
    w.u8(dt.code);
    w.u8(dt.bits);
    w.u16(dt.lanes);
    for (const d of c.shape) w.i64(d);
    const data = c.cpuView(); // the stored bytes: bfloat16 bits, not their float32 values
    w.i64(data.byteLength);
    w.bytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }
}

function tvmRegister(reg: number): bigint {
  if (reg === VOID_REGISTER) return TVM_VOID;
  if (reg === VM_REGISTER) return TVM_VM;
  return BigInt(reg);
}

function tvmOperand(word: number): bigint {
  const kind = argKind(word), value = argValue(word);
  const v = kind === ArgKind.Register ? tvmRegister(value) : BigInt(value);
  return (BigInt(kind) << VALUE_BITS) | (v & VALUE_MASK);
}

/** TVM's code words for relaxvm's, led by the opcode table. */
function tvmWords(p: ProgramData): BigInt64Array {
  const out = new BigInt64Array(p.instrData.length);
  for (let i = 0; i < p.instrOffset.length; i++) {
    const at = p.instrOffset[i];
    const info = opcodeInfo(p.instrData[at])!;
    out[at] = BigInt(p.instrData[at]);
    let operands = 0;
    info.fields.forEach((field, k) => {
      const v = p.instrData[at + 1 + k];
      out[at + 1 + k] = field.role === "write" || field.role === "read"
        ? tvmRegister(v)
        : BigInt(v);
      if (field.role === "count") operands = v;
    });
    const first = at + 1 + info.fields.length;
    for (let w = first; w < first + operands; w++) out[w] = tvmOperand(p.instrData[w]);
  }
  return out;
}

/**
 * The bytes TVM 0.27 writes for this program (`VMExecutable.SaveToBytes`),
 * which TVM loads with `relax.ExecutableLoadFromFile` (a file) or
 * `ffi.Module.load_from_bytes.relax.VMExecutable` (bytes). relaxvm's
 * liveness flag has no place there (TVM frees values its own way) and is
 * dropped.
 */
export function saveTvmProgram(p: ProgramData): Uint8Array {
  const w = new ByteWriter();
  w.i64(TVM_MAGIC);
  writeString(w, TVM_VM_VERSION);
  w.i64(p.functions.length);
  for (const f of p.functions) {
    w.i32(f.kind === "vm" ? FuncKind.VM : FuncKind.Packed);
    writeString(w, f.name);
    if (f.kind === "vm") {
      w.i64(f.start);
      w.i64(f.end);
      w.i64(f.numArgs);
      w.i64(f.registerFileSize);
      w.i64(f.paramNames.length);
      for (const name of f.paramNames) writeString(w, name);
    } else {
      w.i64(0);
      w.i64(0);
      w.i64(PACKED_NUM_ARGS);
      w.i64(0);
      w.i64(0);
    }
  }
  w.i64(0); // memory scopes
  w.i64(p.constants.length);
  p.constants.forEach((c, i) => writeConstant(w, c, i));
  w.i64(p.instrOffset.length);
  for (const o of p.instrOffset) w.i64(o);
  const words = tvmWords(p);
  w.i64(words.length);
  for (const word of words) w.i64(word);
  return w.finish();
}

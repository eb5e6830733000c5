/**
 * ONNX tensors as relaxvm tensors: `TensorProto.DataType` codes mapped to
 * dtypes, and a `TensorProto`'s data (in `raw_data`, or in the typed field
 * its type uses) copied into a CPU `NDArray` after checking that the data
 * fills the dimensions exactly. `decodeTensor` reads a lone `TensorProto`
 * file (the `input_0.pb` of ONNX's node tests).
 *
 * @module
 */

import { elementBytes, type TensorDType } from "../ground/dtype.ts";
import type { LowPrecisionFormat } from "../builtins/host_operators/low_precision.ts";
import { NDArray, shapeSizeWithin } from "../devices/ndarray.ts";
import type { HeldFormat } from "./graph_values.ts";
import { ONNXImportError } from "./onnx_errors.ts";
import { readTensor, type TensorProto } from "./onnx_proto.ts";
import { WireReader } from "./wire_reader.ts";

/** `TensorProto.DataType` codes relaxvm has a dtype for. */
export const ONNX_DTYPES: Readonly<Record<number, TensorDType>> = {
  1: "float32",
  2: "uint8",
  3: "int8",
  4: "uint16",
  5: "int16",
  6: "int32",
  7: "int64",
  9: "bool",
  10: "float16",
  11: "float64",
  12: "uint32",
  // UINT64: its bits in int64 (the importer tags it; ops_uint64.ts computes unsigned).
  13: "int64",
  16: "bfloat16",
  // The 8- and 4-bit types, held as LOW_PRECISION_TYPES says.
  17: "uint8",
  18: "uint8",
  19: "uint8",
  20: "uint8",
  21: "uint8",
  22: "int8",
  23: "uint8",
  24: "uint8",
};

/**
 * The ONNX types relaxvm holds in a wider dtype, by code: the float8 types
 * (FLOAT8E8M0 too) and FLOAT4E2M1 as their bit patterns in uint8, INT4 and UINT4 as their
 * values in int8 and uint8 (one element a byte: a 4-bit tensor's packed
 * pairs are unpacked when read). builtins/host_operators/low_precision.ts
 * converts them.
 */
export const LOW_PRECISION_TYPES: Readonly<Record<number, LowPrecisionFormat>> = {
  17: "float8e4m3fn",
  18: "float8e4m3fnuz",
  19: "float8e5m2",
  20: "float8e5m2fnuz",
  21: "uint4",
  22: "int4",
  23: "float4e2m1",
  24: "float8e8m0",
};

/** The low-precision format of ONNX type `code`, or undefined for a type relaxvm has. */
export function lowPrecisionOf(code: number): LowPrecisionFormat | undefined {
  return Object.hasOwn(LOW_PRECISION_TYPES, code) ? LOW_PRECISION_TYPES[code] : undefined;
}

/** The type relaxvm holds ONNX type `code` as another dtype's bits or values, if any. */
export function heldFormatOf(code: number): HeldFormat | undefined {
  return code === 13 ? "uint64" : lowPrecisionOf(code);
}

/** Whether ONNX type `code` packs two elements a byte (INT4, UINT4, FLOAT4E2M1). */
function packedNibbles(code: number): boolean {
  return code === 21 || code === 22 || code === 23;
}

/** Unpacks `packed` (low nibble first) into `into`'s `count` elements; INT4's are sign-extended. */
function unpackNibbles(
  packed: ArrayLike<number>,
  count: number,
  signed: boolean,
  into: { [i: number]: number | bigint },
): void {
  for (let i = 0; i < count; i++) {
    const nibble = (packed[i >> 1] >> ((i & 1) * 4)) & 0xf;
    into[i] = signed && nibble >= 8 ? nibble - 16 : nibble;
  }
}

/** Names of every `TensorProto.DataType`, for messages. */
export const ONNX_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: "UNDEFINED",
  1: "FLOAT",
  2: "UINT8",
  3: "INT8",
  4: "UINT16",
  5: "INT16",
  6: "INT32",
  7: "INT64",
  8: "STRING",
  9: "BOOL",
  10: "FLOAT16",
  11: "DOUBLE",
  12: "UINT32",
  13: "UINT64",
  14: "COMPLEX64",
  15: "COMPLEX128",
  16: "BFLOAT16",
  17: "FLOAT8E4M3FN",
  18: "FLOAT8E4M3FNUZ",
  19: "FLOAT8E5M2",
  20: "FLOAT8E5M2FNUZ",
  21: "UINT4",
  22: "INT4",
  23: "FLOAT4E2M1",
  24: "FLOAT8E8M0",
};

/** The ONNX code of a relaxvm dtype (`Cast`'s `to`). */
export function onnxTypeName(code: number): string {
  return ONNX_TYPE_NAMES[code] ?? `data type ${code}`;
}

/** Most elements one tensor of a file may have (2^31: 8 GiB of float32). */
export const MAX_TENSOR_ELEMENTS = 2 ** 31;

/** The relaxvm dtype of an ONNX type code, or `null` when relaxvm has none. */
export function dtypeOf(code: number): TensorDType | null {
  return Object.hasOwn(ONNX_DTYPES, code) ? ONNX_DTYPES[code] : null;
}

/**
 * A CPU tensor holding `t`'s data, owned by the caller (as `tensor()`'s are:
 * a VM never frees it). `section` names the tensor in errors.
 * External data must have been resolved into `rawData` by the caller.
 */
export function tensorFromProto(t: TensorProto, section: string): NDArray {
  const fail = (reason: string) => new ONNXImportError(section, t.offset, reason);
  const dt = dtypeOf(t.dataType);
  if (dt === null) {
    throw fail(`tensor "${t.name}" has data type ${onnxTypeName(t.dataType)}, which relaxvm lacks`);
  }
  const count = shapeSizeWithin(t.dims, MAX_TENSOR_ELEMENTS);
  if (count < 0) {
    throw fail(`tensor "${t.name}" of dims [${t.dims.join(", ")}] has more than 2^31 elements`);
  }
  if (t.dataLocation === 1 && t.rawData === null) {
    throw fail(`tensor "${t.name}" keeps its data in an external file`);
  }
  const out = NDArray.empty(t.dims, dt);
  try {
    const view = out.cpuView();
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    const nibbles = packedNibbles(t.dataType);
    const want = nibbles ? Math.ceil(count / 2) : count * elementBytes(dt);
    if (nibbles && t.rawData === null && t.int32Data.length === want && want !== count) {
      unpackNibbles(
        t.int32Data,
        count,
        t.dataType === 22,
        view as unknown as { [i: number]: number },
      );
      return out.handToUser();
    }
    if (t.rawData !== null) {
      if (t.rawData.length !== want) {
        throw fail(
          `tensor "${t.name}" has ${t.rawData.length} bytes of raw_data, its dims [${
            t.dims.join(", ")
          }] of ${dt} need ${want}`,
        );
      }
      if (nibbles) {
        unpackNibbles(
          t.rawData,
          count,
          t.dataType === 22,
          view as unknown as { [i: number]: number },
        );
      } else bytes.set(t.rawData);
      return out.handToUser();
    }
    const typed = typedData(t, dt);
    if (typed.values.length !== count) {
      throw fail(
        `tensor "${t.name}" has ${typed.values.length} values in ${typed.field}, its dims [${
          t.dims.join(", ")
        }] need ${count}`,
      );
    }
    typed.write(view as unknown as { [i: number]: number | bigint });
    return out.handToUser();
  } catch (e) {
    out.dispose();
    throw e;
  }
}

interface TypedData {
  field: string;
  values: readonly (number | bigint)[];
  write(into: { [i: number]: number | bigint }): void;
}

/** The field that holds a tensor of `dt` when it has no `raw_data`, and how to store its values. */
function typedData(t: TensorProto, dt: TensorDType): TypedData {
  const plain = (field: string, values: readonly (number | bigint)[]): TypedData => ({
    field,
    values,
    write(into) {
      for (let i = 0; i < values.length; i++) into[i] = values[i];
    },
  });
  switch (dt) {
    case "float32":
      return plain("float_data", t.floatData);
    case "float64":
      return plain("double_data", t.doubleData);
    case "int64":
      // UINT64 travels in uint64_data: its bits, read as int64.
      return t.dataType === 13
        ? plain("uint64_data", t.uint64Data.map((v) => BigInt.asIntN(64, v)))
        : plain("int64_data", t.int64Data);
    case "uint32":
      return plain("uint64_data", t.uint64Data.map(Number));
    case "float16":
    case "bfloat16": {
      // int32_data holds the 16-bit patterns: write them as bits, whatever the storage type.
      const values = t.int32Data;
      return {
        field: "int32_data",
        values,
        write(into) {
          const bits = new Uint16Array(
            (into as unknown as ArrayBufferView).buffer as ArrayBuffer,
            (into as unknown as ArrayBufferView).byteOffset,
            values.length,
          );
          for (let i = 0; i < values.length; i++) bits[i] = values[i] & 0xffff;
        },
      };
    }
    default:
      // int32, int16, int8, uint16, uint8 and bool all travel in int32_data.
      return plain("int32_data", t.int32Data);
  }
}

/**
 * A lone `TensorProto` file (ONNX's node tests keep inputs and outputs so)
 * as a CPU tensor. The 8- and 4-bit types come as relaxvm holds them
 * (`LOW_PRECISION_TYPES`): float8 and FLOAT4E2M1 as their bit patterns in
 * uint8, INT4 and UINT4 as their values in int8 and uint8, one a byte.
 */
export function decodeTensor(bytes: Uint8Array): NDArray {
  const r = new WireReader(bytes, 0, bytes.length, 0, "TensorProto");
  return tensorFromProto(readTensor(r), "TensorProto");
}

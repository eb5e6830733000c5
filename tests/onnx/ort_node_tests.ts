/**
 * ONNX's node tests on onnxruntime-web's WebAssembly backend, in the harness
 * that runs them through relaxvm (`run_node_tests.ts --ort`), so that the two
 * counts are made alike: the same folders, `test_data_set_0`, ONNX's
 * tolerances (`compareValues`, as `compare` in node_tests.ts) and the same
 * three outcomes. A test is _unsupported_ when onnxruntime-web refuses the
 * model (`InferenceSession.create` throws: an operator, type or opset its
 * WebAssembly build lacks) or its test data holds a type onnxruntime-web has
 * no tensor for; it _fails_ when it runs and differs, or `run` throws.
 *
 * The test data is decoded here into onnxruntime's own tensor types rather
 * than through relaxvm's `decodeONNXTensor`, so that a dtype relaxvm lacks
 * (uint64, string) does not count against onnxruntime-web.
 *
 * @module
 */

import { float16BitsToFloat32 } from "../../ground/float_formats.ts";
import { readTensor, type TensorProto } from "../../onnx/onnx_proto.ts";
import { WireReader } from "../../onnx/wire_reader.ts";
import { elementsDiffer, type NodeTestResult, openNodeTest, testDataSet } from "./node_tests.ts";

/** The onnxruntime-web release compared, as bench/ pins it. */
export const ORT_WEB = "npm:onnxruntime-web@1.30.0";

/** What the harness uses of onnxruntime-web (its API is untyped here, as in bench/_peer.ts). */
// deno-lint-ignore no-explicit-any
type Ort = any;

/** A test-data value as onnxruntime holds it: its type name, dims and data. */
interface OrtValue {
  type: string;
  dims: number[];
  data: ArrayLike<number | bigint | string>;
}

/** onnxruntime's tensor type name and array for each `TensorProto.DataType` it has. */
const ORT_TYPES: Record<
  number,
  [string, { new (n: number): ArrayLike<number | bigint> } | null, number]
> = {
  1: ["float32", Float32Array, 4],
  2: ["uint8", Uint8Array, 1],
  3: ["int8", Int8Array, 1],
  4: ["uint16", Uint16Array, 2],
  5: ["int16", Int16Array, 2],
  6: ["int32", Int32Array, 4],
  7: ["int64", BigInt64Array, 8],
  8: ["string", null, 0],
  9: ["bool", Uint8Array, 1],
  10: ["float16", Uint16Array, 2],
  11: ["float64", Float64Array, 8],
  12: ["uint32", Uint32Array, 4],
  13: ["uint64", BigUint64Array, 8],
};

/** A `TensorProto` file as onnxruntime's type, dims and data; throws for a type it lacks. */
export function decodeOrtValue(bytes: Uint8Array): OrtValue {
  const t: TensorProto = readTensor(new WireReader(bytes, 0, bytes.length, 0, "TensorProto"));
  const entry = ORT_TYPES[t.dataType];
  if (entry === undefined) throw new Error(`test data of ONNX type ${t.dataType}`);
  const [type, Ctor, size] = entry;
  const count = t.dims.reduce((a, b) => a * b, 1);
  if (Ctor === null) {
    const text = new TextDecoder();
    return { type, dims: t.dims, data: t.stringData.map((s) => text.decode(s)) };
  }
  const data = new Ctor(count) as ArrayLike<number | bigint> & { buffer: ArrayBuffer };
  if (t.rawData !== null) {
    if (t.rawData.length !== count * size) throw new Error(`raw_data of ${t.rawData.length} bytes`);
    new Uint8Array(data.buffer).set(t.rawData);
    return { type, dims: t.dims, data };
  }
  const values: readonly (number | bigint)[] = t.dataType === 1
    ? t.floatData
    : t.dataType === 7
    ? t.int64Data
    : t.dataType === 11
    ? t.doubleData
    : t.dataType === 12 || t.dataType === 13
    ? t.uint64Data
    : t.int32Data;
  if (values.length !== count) throw new Error(`${values.length} values for ${count}`);
  const into = data as unknown as { [i: number]: number | bigint };
  for (let i = 0; i < count; i++) {
    into[i] = t.dataType === 12
      ? Number(values[i])
      : t.dataType === 10
      ? Number(values[i]) & 0xffff
      : values[i];
  }
  return { type, dims: t.dims, data };
}

/** `x` as numbers (float16 from its bit patterns) or strings, for comparing. */
function plain(v: OrtValue): (number | string)[] {
  const out: (number | string)[] = [];
  const halfBits = v.type === "float16" && v.data instanceof Uint16Array;
  for (let i = 0; i < v.data.length; i++) {
    const x = v.data[i];
    out.push(typeof x === "string" ? x : halfBits ? float16BitsToFloat32(x as number) : Number(x));
  }
  return out;
}

/** Whether `got` matches `want` as `assert_allclose(rtol, atol)` does; null when it does. */
export function compareValues(got: OrtValue, want: OrtValue): string | null {
  if (got.type !== want.type) return `type ${got.type}, expected ${want.type}`;
  if (got.dims.join() !== want.dims.join()) return `shape [${got.dims}], expected [${want.dims}]`;
  return elementsDiffer(plain(got), plain(want));
}

/** onnxruntime-web, loaded once, on one WebAssembly thread (the harness runs one test at a time). */
export async function loadOrtWeb(): Promise<Ort> {
  const ort = await import(ORT_WEB);
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = "fatal";
  return ort;
}

/** Runs the test in `root/name` on onnxruntime-web's WebAssembly backend. */
export async function runNodeTestOrt(
  root: string,
  name: string,
  ort: Ort,
): Promise<NodeTestResult> {
  const { dir, bytes, result } = await openNodeTest(root, name);
  let session;
  try {
    session = await ort.InferenceSession.create(bytes, {
      executionProviders: ["wasm"],
      logSeverityLevel: 4, // fatal only: not the unused-initializer warnings of every `*_expanded` test
    });
  } catch (e) {
    return result("unsupported", `create: ${(e as Error).message ?? e}`);
  }
  try {
    const data = testDataSet(dir);
    const feeds: Record<string, unknown> = {};
    const wants: OrtValue[] = [];
    try {
      const inputs: OrtValue[] = [];
      await data.readAll("input_", decodeOrtValue, inputs);
      for (const [i, v] of inputs.entries()) {
        feeds[session.inputNames[i]] = new ort.Tensor(v.type, v.data, v.dims);
      }
      await data.readAll("output_", decodeOrtValue, wants);
    } catch (e) {
      return result("unsupported", `test data: ${(e as Error).message}`);
    }
    let outs: Record<string, OrtValue>;
    try {
      outs = await session.run(feeds, { logSeverityLevel: 4 });
    } catch (e) {
      return result("fail", `run: ${(e as Error).message ?? e}`);
    }
    for (const [i, want] of wants.entries()) {
      const got = outs[session.outputNames[i]];
      if (got === undefined) return result("fail", `output ${i}: missing`);
      const problem = compareValues(got, want);
      if (problem !== null) return result("fail", `output ${i}: ${problem}`);
    }
    return result("pass");
  } finally {
    await session.release();
  }
}

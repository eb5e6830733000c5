/**
 * `importONNX`: an ONNX model as a relaxvm executable and its parameters.
 * The file is read with the bounded protobuf reader (onnx_proto.ts); every
 * node is checked against the operator table before anything is built, so a
 * model with unsupported operators or attributes fails once, listing them
 * all; then the graph is converted, node by node, into calls of `vm.op.*` and
 * `vm.builtin.*` recorded by the emitter, and written as one VM function.
 *
 * The executable has two functions:
 *
 * | function | arguments → result |
 * | --- | --- |
 * | `main` (or `functionName`) | the graph's inputs in order, then the parameter tuple (when the model has initializers) → the output, or a tuple of the outputs |
 * | `load_params` | `(url, device_type, device_id)` → the parameter tuple, from a tensor cache holding the initializers by their ONNX names (`dumpTensorCache(dir, result.params)` writes one) |
 *
 * @module
 */

import { ExecBuilder } from "../builder/exec_builder.ts";
import type { Operand } from "../builder/operand.ts";
import { fetchWhole } from "../builtins/tensor_cache/cache_access.ts";
import { resolveLocation } from "../builtins/tensor_cache/cache_files.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { pathOutside } from "../ground/contained_path.ts";
import type { TensorDType } from "../ground/dtype.ts";
import type { Executable } from "../program/executable.ts";
import { fuseConvEpilogues } from "./conv_fusion.ts";
import { fuseGelu } from "./gelu_fusion.ts";
import { foldResidualScales } from "./residual_scale.ts";
import { convertLoop, convertScan } from "./convert_loops.ts";
import { Emitter } from "./emitter.ts";
import { type Dim, Unsupported, type Value } from "./graph_values.ts";
import { NodeContext } from "./node_context.ts";
import { ONNXImportError, type UnsupportedNode, UnsupportedONNXError } from "./onnx_errors.ts";
import { decodeModel, type Graph, type Node, type TensorProto } from "./onnx_proto.ts";
import { dtypeOf, heldFormatOf, onnxTypeName, tensorFromProto } from "./onnx_tensor.ts";
import type { OpSpec } from "./op_spec.ts";
import { ATTENTION_OPS, ROTARY_OPS } from "./ops_attention.ts";
import { COMPOSITE_OPS } from "./ops_composite.ts";
import { CONV_OPS } from "./ops_conv.ts";
import { DYNAMIC_OPS } from "./ops_dynamic.ts";
import { RESIZE_OPS } from "./ops_resize.ts";
import { TEXT_OPS } from "./ops_text.ts";
import { ELEMENTWISE_OPS } from "./ops_elementwise.ts";
import { GATHER_OPS } from "./ops_gather.ts";
import { INDEX_OPS } from "./ops_index.ts";
import { LOW_PRECISION_OPS } from "./ops_low_precision.ts";
import { MATH_OPS } from "./ops_math.ts";
import { NN_OPS } from "./ops_nn.ts";
import { NORM_OPS } from "./ops_norm.ts";
import { OPTIONAL_OPS } from "./ops_optional.ts";
import { POOL_OPS } from "./ops_pool.ts";
import { QUANTIZE_OPS } from "./ops_quantize.ts";
import { RECURRENT_OPS } from "./ops_recurrent.ts";
import { SHAPE_OPS } from "./ops_shape.ts";
import { SIGNAL_OPS } from "./ops_signal.ts";
import { UINT64_OPS } from "./ops_uint64.ts";
import { VISION_OPS } from "./ops_vision.ts";
import { WIDENED_OPS } from "./ops_widened.ts";

/** Every operator of the standard domain the importer converts, by name. */
const ONNX_OPERATORS: Readonly<Record<string, OpSpec>> = {
  ...ELEMENTWISE_OPS,
  ...SHAPE_OPS,
  ...NN_OPS,
  ...COMPOSITE_OPS,
  ...ATTENTION_OPS,
  ...ROTARY_OPS,
  ...GATHER_OPS,
  ...CONV_OPS,
  ...RESIZE_OPS,
  ...QUANTIZE_OPS,
  ...RECURRENT_OPS,
  // After SHAPE_OPS and COMPOSITE_OPS: their entries that fall back to run-time sizes.
  ...DYNAMIC_OPS,
  ...INDEX_OPS,
  ...LOW_PRECISION_OPS,
  ...VISION_OPS,
  ...SIGNAL_OPS,
  ...WIDENED_OPS,
  ...MATH_OPS,
  ...NORM_OPS,
  ...OPTIONAL_OPS,
  ...TEXT_OPS,
  // After WIDENED_OPS, whose MaxPool it wraps.
  ...POOL_OPS,
  // After ELEMENTWISE_OPS, INDEX_OPS, LOW_PRECISION_OPS: UINT64 cases first, the rest to them.
  ...UINT64_OPS,
  // Converted by convertIf (it needs the graph's scope); listed here for the table and names.
  If: { attrs: ["then_branch", "else_branch"], convert: () => [] },
  // Converted by convert_loops.ts (they need the graph's scope); listed for the table and names.
  Loop: { attrs: ["body"], convert: () => [] },
  Scan: {
    attrs: [
      "body",
      "num_scan_inputs",
      "directions",
      "scan_input_axes",
      "scan_input_directions",
      "scan_output_axes",
      "scan_output_directions",
    ],
    convert: () => [],
  },
};

/** Operators whose graph attributes are converted in the graph's scope. */
const CONTROL_FLOW = new Set(["If", "Loop", "Scan"]);

/**
 * The operators of ONNX's standard domain that `importONNX` converts, sorted.
 *
 * @example
 * ```ts
 * import { ONNX_OPERATOR_NAMES } from "@relaxvm/relaxvm";
 * console.assert(ONNX_OPERATOR_NAMES.includes("MatMul"));
 * ```
 */
export const ONNX_OPERATOR_NAMES: readonly string[] = Object.freeze(
  Object.keys(ONNX_OPERATORS).sort(),
);

/** Options of `importONNX`. */
export interface ImportONNXOptions {
  /** Name of the VM function that runs the graph (default `"main"`). */
  functionName?: string;
  /** Most nodes the file may have, subgraphs included (default 1,000,000). */
  maxNodes?: number;
  /** Most bytes read for the model and for each external-data file (default 2 GiB). */
  maxBytes?: number;
  /** Aborts fetching. */
  signal?: AbortSignal;
  /**
   * Shapes to import graph inputs with, by input name, in place of the
   * file's (as onnxruntime's `freeDimensionOverrides`, per input): a number
   * fixes a dimension, so operators whose shapes must be known at import
   * convert, and the executable takes only that size; a string names a
   * symbol, which tells apart dimensions a file names alike (`?` used twice
   * by some exporters means "unknown", not "equal"). The rank and the
   * file's own fixed sizes must be kept. A streaming model whose chunk
   * length the file leaves open (Silero VAD's `input`) then folds its shape
   * arithmetic and convolution windows at import.
   *
   * @example A classifier whose file says `[-1, 3, "?", "?"]`, run on 48×192 crops
   * ```ts ignore
   * using model = await importONNX("cls.onnx", { inputShapes: { x: ["n", 3, 48, 192] } });
   * ```
   */
  inputShapes?: Readonly<Record<string, readonly (number | string)[]>>;
  /**
   * Graph inputs given at import, as TVM's `bind_params_by_name` binds
   * them: each becomes a constant of the executable and `main` no longer
   * takes it, so the shape arithmetic and `If` conditions that read it fold
   * (Silero VAD's `sr`, an int64 that WebGPU could not compare). The dtype
   * must be the one the file declares; the caller keeps the tensor.
   *
   * @example
   * ```ts ignore
   * await importONNX("silero_vad.onnx", { inputValues: { sr: tensor(new BigInt64Array([16000n]), { shape: [] }) } });
   * ```
   */
  inputValues?: Readonly<Record<string, NDArray>>;
}

/** A graph input or output: its name, dtype and shape (symbolic dimensions by name). */
export interface ONNXValueInfo {
  /** The ONNX name. */
  readonly name: string;
  /** Its dtype. */
  readonly dtype: TensorDType;
  /** Its dimensions: sizes, or the names of symbolic dimensions. */
  readonly shape: readonly (number | string)[];
}

/** What `importONNX` returns. */
export interface ImportedONNX extends Disposable {
  /** The program: `main(...inputs, params?)` and `load_params(url, device_type, device_id)`. */
  readonly executable: Executable;
  /** The initializers as CPU tensors, in the order of the parameter tuple. */
  readonly params: readonly NDArray[];
  /** Their ONNX names, in the same order. */
  readonly paramNames: readonly string[];
  /** The graph's inputs (initializers excluded), in the order `main` takes them. */
  readonly inputs: readonly ONNXValueInfo[];
  /** The graph's outputs, in the order `main` returns them. */
  readonly outputs: readonly ONNXValueInfo[];
  /**
   * The model's `metadata_props`, key to value, as the exporter wrote them
   * (onnxruntime's `customMetadataMap`): PaddleOCR's recognizers keep their
   * character list under `character`, one per line.
   */
  readonly metadata: Readonly<Record<string, string>>;
}

/** The standard domain's names. */
const STANDARD_DOMAINS = new Set(["", "ai.onnx"]);

/** Bytes of a model file read at most by default: protobuf's own limit. */
const DEFAULT_MAX_BYTES = 2 ** 31;

/**
 * Imports an ONNX model: `source` is the file's bytes, or a path or URL to
 * fetch (a path is relative to the working directory in Deno, to the page in
 * a browser). Returns the executable, its parameters (the initializers, CPU
 * tensors the caller owns: `using` the result disposes them) and the
 * graph's inputs and outputs.
 *
 * Throws `ONNXImportError` for a file it cannot read (with the byte offset)
 * and `UnsupportedONNXError` listing every node it cannot convert, before
 * anything is built.
 *
 * @example Import a one-node model (y = Relu(x), x of any length) and run it
 * ```ts
 * import { importONNX, type NDArray, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * // The bytes of a .onnx file (here inline; a path or URL is fetched).
 * const onnx = "CAhCAhANOjIKDAoBeBIBeSIEUmVsdVoQCgF4EgsKCQgBEgUKAxIBbmIQCgF5EgsKCQgBEgUKAxIBbg==";
 * using model = await importONNX(Uint8Array.from(atob(onnx), (c) => c.charCodeAt(0)));
 * assertEquals(model.inputs, [{ name: "x", dtype: "float32", shape: ["n"] }]);
 * const vm = new VirtualMachine(model.executable);
 * using x = tensor([-1, 2, -3]);
 * using y = await vm.invoke("main", x) as NDArray;
 * assertEquals([...y.dataSync()], [0, 2, 0]);
 * ```
 */
export async function importONNX(
  source: Uint8Array | string | URL,
  options: ImportONNXOptions = {},
): Promise<ImportedONNX> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  let bytes: Uint8Array, base: URL | null = null;
  if (source instanceof Uint8Array) bytes = source;
  else {
    base = resolveLocation(source);
    bytes = await fetchWhole(base, maxBytes, "the maxBytes option", options.signal);
  }
  const model = decodeModel(bytes, { maxNodes: options.maxNodes ?? 1_000_000 });
  const graph = model.graph;
  if (graph === null) throw new ONNXImportError("ModelProto", -1, "the model has no graph");
  checkSupported(graph);
  const opset = model.opsets.find((o) => STANDARD_DOMAINS.has(o.domain))?.version ??
    (model.irVersion < 3 ? 1 : 0);
  if (opset === 0) {
    throw new ONNXImportError("ModelProto.opset_import", -1, "no opset of the standard domain");
  }
  await resolveExternalData(graph.initializers, base, maxBytes, options.signal);
  const imported = convert(
    graph,
    opset,
    options.functionName ?? "main",
    options.inputShapes ?? {},
    options.inputValues ?? {},
  );
  return { ...imported, metadata: Object.freeze({ ...model.metadata }) };
}

/** Every node the table cannot take (operator, domain, attributes), listed at once. */
function checkSupported(graph: Graph, problems: UnsupportedNode[] = [], top = true): void {
  for (const n of graph.nodes) {
    if (CONTROL_FLOW.has(n.opType) && STANDARD_DOMAINS.has(n.domain)) {
      // Its branches' or body's nodes are checked as the graph's own.
      const unknown = n.attributes.filter((a) => !ONNX_OPERATORS[n.opType].attrs.includes(a.name));
      if (unknown.length > 0) {
        problems.push({
          name: n.name,
          op: n.opType,
          reason: `attribute ${unknown.map((a) => a.name).join(", ")} not supported`,
        });
      }
      for (const a of n.attributes) if (a.g !== null) checkSupported(a.g, problems, false);
      continue;
    }
    const op = STANDARD_DOMAINS.has(n.domain) ? n.opType : `${n.domain}.${n.opType}`;
    const spec = STANDARD_DOMAINS.has(n.domain) && Object.hasOwn(ONNX_OPERATORS, n.opType)
      ? ONNX_OPERATORS[n.opType]
      : undefined;
    if (spec === undefined) {
      problems.push({ name: n.name, op, reason: `operator ${op} is not supported` });
      continue;
    }
    const unknown = n.attributes.filter((a) => !spec.attrs.includes(a.name)).map((a) => a.name);
    if (unknown.length > 0) {
      problems.push({ name: n.name, op, reason: `attribute ${unknown.join(", ")} not supported` });
    }
  }
  if (top && problems.length > 0) throw new UnsupportedONNXError(problems);
}

/**
 * Reads initializers kept in external files (`data_location` EXTERNAL) into
 * their `rawData`: each `location` must be a plain relative path inside the
 * model's folder, and the model must have come from a path or URL.
 */
async function resolveExternalData(
  tensors: TensorProto[],
  base: URL | null,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<void> {
  const files = new Map<string, Uint8Array>();
  for (const t of tensors) {
    if (t.dataLocation !== 1) continue;
    const section = `initializer "${t.name}"`;
    const location = t.externalData.get("location") ?? "";
    const outside = location === "" ? "is empty" : pathOutside(location);
    if (outside !== null) {
      throw new ONNXImportError(
        section,
        t.offset,
        `external data location "${location}" ${outside}`,
      );
    }
    if (base === null) {
      throw new ONNXImportError(
        section,
        t.offset,
        "external data needs the model's path or URL (pass that instead of its bytes)",
      );
    }
    let file = files.get(location);
    if (file === undefined) {
      file = await fetchWhole(new URL(location, base), maxBytes, "the maxBytes option", signal);
      files.set(location, file);
    }
    const offset = Number(t.externalData.get("offset") ?? "0");
    const length = Number(t.externalData.get("length") ?? String(file.length - offset));
    if (
      !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 ||
      length < 0 || offset + length > file.length
    ) {
      throw new ONNXImportError(
        section,
        t.offset,
        `external data offset ${offset} and length ${length} fall outside "${location}" (${file.length} bytes)`,
      );
    }
    t.rawData = file.subarray(offset, offset + length);
  }
}

/**
 * The dims of a graph input, symbols by name (`null`: unknown, as is a
 * negative size, which some exporters write for "dynamic"); a size past 2^31
 * is unsupported.
 */
function protoShape(dims: readonly (number | string | null)[]): Dim[] {
  return dims.map((d) => {
    if (typeof d === "string") return `$${d}`;
    if (d === null || d < 0) return null;
    if (d >= 2 ** 31) throw new Unsupported(`a dimension of ${d}`);
    return d;
  });
}

/** A shape for users: symbols without the importer's prefix. */
function shownShape(shape: readonly Dim[]): (number | string)[] {
  return shape.map((d) => d === null ? "?" : typeof d === "string" ? d.replace(/^\$/, "") : d);
}

/**
 * The file's shape of input `name` with `override`'s dimensions (numbers kept,
 * strings as symbols); throws `Unsupported` when the rank or a fixed size differs.
 */
function overrideShape(shape: Dim[], override: readonly (number | string)[] | undefined): Dim[] {
  if (override === undefined) return shape;
  if (override.length !== shape.length) {
    throw new Unsupported(
      `inputShapes gives rank ${override.length}, the file declares ${shape.length}`,
    );
  }
  return override.map((d, i) => {
    if (typeof d === "number" && (!Number.isSafeInteger(d) || d < 0)) {
      throw new Unsupported(`inputShapes gives a dimension of ${d}`);
    }
    if (typeof shape[i] === "number" && d !== shape[i]) {
      throw new Unsupported(
        `inputShapes gives ${d} for dimension ${i}, which the file fixes at ${shape[i]}`,
      );
    }
    return typeof d === "number" ? d : `$${d}`;
  });
}

function convert(
  graph: Graph,
  opset: number,
  functionName: string,
  inputShapes: Readonly<Record<string, readonly (number | string)[]>>,
  inputValues: Readonly<Record<string, NDArray>>,
): Omit<ImportedONNX, "metadata"> {
  const made: NDArray[] = [];
  const params: NDArray[] = [];
  const paramNames: string[] = [];
  const values = new Map<string, Value | null>();
  const problems: UnsupportedNode[] = [];
  let ok = false;
  // Disposed at the end either way: the executable holds its own constants, and the builder's
  // references would otherwise keep them (and, on a failed import, everything) until GC.
  const ib = new ExecBuilder();
  let em: Emitter | undefined;
  let sealed: NDArray[] = [];
  try {
    // Initializers: parameters (folded too when they are small integer tensors).
    const initNames = new Set<string>();
    for (const [i, t] of graph.initializers.entries()) {
      const nd = tensorFromProto(t, `ModelProto.graph.initializer[${i}]`);
      params.push(nd);
      paramNames.push(t.name);
      initNames.add(t.name);
    }
    const bound = (name: string) => Object.hasOwn(inputValues, name);
    const inputs = graph.inputs.filter((v) => !initNames.has(v.name) && !bound(v.name));
    const numInputs = inputs.length + (params.length > 0 ? 1 : 0);
    const emitter = em = new Emitter(ib, numInputs);
    if (params.length > 0) emitter.params = ib.r(inputs.length);
    const inputInfo: ONNXValueInfo[] = [];
    for (const name of Object.keys(inputShapes)) {
      if (!inputs.some((v) => v.name === name)) {
        problems.push({
          name,
          op: "graph input",
          reason: "inputShapes names no input of the graph",
        });
      }
    }
    for (const [i, v] of inputs.entries()) {
      const type = v.type;
      const dt = type?.kind === "tensor" ? dtypeOf(type.elemType) : null;
      if (type === null || type.kind !== "tensor" || dt === null || type.shape === null) {
        const what = type === null || type.kind !== "tensor"
          ? `a ${type?.kind ?? "missing"} type`
          : dt === null
          ? `elements of ${onnxTypeName(type.elemType)}`
          : "no shape";
        problems.push({ name: v.name, op: "graph input", reason: `${what} is not supported` });
        values.set(v.name, null);
        continue;
      }
      let shape: Dim[];
      try {
        shape = overrideShape(
          protoShape(type.shape),
          Object.hasOwn(inputShapes, v.name) ? inputShapes[v.name] : undefined,
        );
      } catch (e) {
        if (!(e instanceof Unsupported)) throw e;
        problems.push({ name: v.name, op: "graph input", reason: e.message });
        values.set(v.name, null);
        continue;
      }
      const reg = ib.r(i);
      emitter.record("vm.builtin.check_tensor_info", [
        reg,
        ib.imm(shape.length),
        dt,
        `input "${v.name}"`,
      ], false);
      emitter.matchShape(reg, shape, `input "${v.name}"`);
      values.set(v.name, { dtype: dt, shape, reg, format: heldFormatOf(type.elemType) });
      inputInfo.push({ name: v.name, dtype: dt, shape: shownShape(shape) });
    }
    const holder = new NodeContext(graph.nodes[0] ?? ({} as Node), opset, emitter, [], made);
    for (const [i, nd] of params.entries()) {
      const known = holder.fromTensor(nd);
      values.set(paramNames[i], {
        ...known,
        param: i,
        format: heldFormatOf(graph.initializers[i].dataType),
      });
    }
    for (const v of graph.inputs) {
      if (initNames.has(v.name) || !bound(v.name)) continue;
      const t = inputValues[v.name];
      const declared = v.type?.kind === "tensor" ? dtypeOf(v.type.elemType) : null;
      if (declared !== t.dtype) {
        problems.push({
          name: v.name,
          op: "graph input",
          reason: `inputValues gives ${t.dtype}, the file declares ${declared ?? "another type"}`,
        });
        values.set(v.name, null);
      } else values.set(v.name, holder.fromTensor(t));
    }
    const fused = foldResidualScales(graph, fuseConvEpilogues(graph, opset));
    for (const n of fuseGelu({ ...graph, nodes: fused })) {
      convertNode(n, opset, emitter, values, made, problems);
    }
    const outputs: Operand[] = [];
    const outputInfo: ONNXValueInfo[] = [];
    for (const o of graph.outputs) {
      const v = values.get(o.name);
      if (v === undefined) {
        throw new ONNXImportError(
          "ModelProto.graph.output",
          -1,
          `output "${o.name}" is never written`,
        );
      }
      if (v === null) continue;
      try {
        outputs.push(emitter.result(v));
        outputInfo.push({ name: o.name, dtype: v.dtype, shape: shownShape(v.shape) });
      } catch (e) {
        if (!(e instanceof Unsupported)) throw e;
        problems.push({ name: o.name, op: "graph output", reason: e.message });
      }
    }
    if (problems.length > 0) throw new UnsupportedONNXError(problems);
    const paramNamesList = [...paramNames];
    ib.function(functionName, {
      num_inputs: numInputs,
      param_names: [...inputs.map((v) => v.name), ...(params.length > 0 ? ["params"] : [])],
    }, () => {
      emitter.flush();
      if (outputs.length === 1) ib.emit_ret(outputs[0]);
      else {
        const tuple = emitter.newReg();
        ib.emit_call("vm.builtin.make_tuple", outputs, { dst: tuple });
        ib.emit_ret(tuple);
      }
    });
    ib.function(
      "load_params",
      { num_inputs: 3, param_names: ["url", "device_type", "device_id"] },
      () => {
        ib.emit_call("vm.builtin.tensor_cache.load", [ib.r(0), ib.r(1), ib.r(2)]);
        ib.emit_call("vm.builtin.param_array_from_cache_by_name_unpacked", paramNamesList, {
          dst: ib.r(3),
        });
        ib.emit_ret(ib.r(3));
      },
    );
    const executable = ib.get();
    sealed = [...emitter.ownConstants(executable.constants, made), ...params];
    ok = true;
    return {
      executable,
      params,
      paramNames,
      inputs: inputInfo,
      outputs: outputInfo,
      [Symbol.dispose]() {
        for (const p of params) p.dispose();
      },
    };
  } finally {
    ib[Symbol.dispose]();
    // The executable's constants the import made itself, and the parameters, are sealed: nothing
    // outside holds a view of them yet, so the CPU kernels may keep a copy of a weight in their
    // WebAssembly memory instead of copying it in on every call (kernels/cpu/wasm/resident.ts), as
    // they do for the weights a tensor cache loads. Only now: the builder read their bytes through
    // views until it let go, which ends a seal. A tensor the caller gave (`inputValues`) is left
    // as it is: the caller may hold a view.
    for (const t of sealed) t.seal();
    em?.[Symbol.dispose]();
    for (const t of made) t.dispose();
    if (!ok) { for (const p of params) p.dispose(); }
  }
}

/** Operators that move or relabel data of any dtype: half floats pass through them as they are. */
const ANY_DTYPE = new Set([
  "Cast",
  "CastLike",
  "Concat",
  "Constant",
  "ConstantOfShape",
  "Dropout",
  "Flatten",
  "Gather",
  "Identity",
  "Reshape",
  "Shape",
  "Size",
  "Pad",
  "Slice",
  "Split",
  "Squeeze",
  "Transpose",
  "Unsqueeze",
]);

/** Operators that know the 8- and 4-bit formats (ops_low_precision.ts); no other takes them (UINT64: ops_uint64.ts's). */
const FORMAT_AWARE = new Set(["Cast", "CastLike", "QuantizeLinear", "DequantizeLinear"]);

/** Operators whose result depends on their half-float inputs' own rounding: given them as they are. */
const OWN_HALVES = new Set(["QLinearMatMul"]);

/**
 * Converts `n`; an arithmetic operator on float16 or bfloat16 computes in
 * float32 (the inputs widened, the float32 outputs narrowed back), as NumPy
 * and ONNX's reference compute half floats: one rounding at the end.
 * float64 takes the same path the other way (narrowed to float32, the
 * outputs widened back): relaxvm's kernels compute float32, and a second
 * set of float64 kernels on every device is more than the node tests'
 * float64 cases (within float32's precision of ONNX's tolerance) are worth.
 */
function convertWidened(
  n: Node,
  opset: number,
  em: Emitter,
  inputs: (Value | undefined)[],
  made: NDArray[],
): (Value | undefined)[] {
  const spec = ONNX_OPERATORS[n.opType];
  const held = inputs.find((v) => v?.format !== undefined);
  const aware = held?.format === "uint64"
    ? Object.hasOwn(UINT64_OPS, n.opType)
    : FORMAT_AWARE.has(n.opType);
  if (held !== undefined && !aware) {
    throw new Unsupported(`${held.format} elements (held in ${held.dtype}) in ${n.opType}`);
  }
  const half = inputs.find((v) =>
    v?.dtype === "float16" || v?.dtype === "bfloat16" || v?.dtype === "float64"
  )?.dtype;
  if (half === undefined || ANY_DTYPE.has(n.opType) || OWN_HALVES.has(n.opType)) {
    return spec.convert(new NodeContext(n, opset, em, inputs, made));
  }
  const widened = inputs.map((v) =>
    v === undefined || v.dtype !== half
      ? v
      : em.call("vm.op.cast", [em.reg(v), "float32"], "float32", v.shape)
  );
  const outputs = spec.convert(new NodeContext(n, opset, em, widened, made));
  return outputs.map((v) =>
    v === undefined || v.dtype !== "float32"
      ? v
      : em.call("vm.op.cast", [em.reg(v), half], half, v.shape)
  );
}

/**
 * `If`: a condition known at import takes its branch inline; else the VM
 * branches (`vm.builtin.read_if_cond`, `If`, `Goto`), each branch converted
 * in a scope of its own and copying its outputs into shared registers. A
 * dimension the branches disagree on is bound after they join. Parameters
 * and constants first used inside a branch are fetched again after it.
 */
function convertIf(
  n: Node,
  opset: number,
  em: Emitter,
  values: Map<string, Value | null>,
  made: NDArray[],
  problems: UnsupportedNode[],
  cond: Value | undefined,
): (Value | undefined)[] {
  const branch = (name: string) => {
    const g = n.attributes.find((a) => a.name === name)?.g;
    if (g === null || g === undefined) throw new Unsupported(`no ${name}`);
    if (g.initializers.length > 0 || g.inputs.length > 0) {
      throw new Unsupported(`a ${name} with initializers or inputs`);
    }
    return g;
  };
  const thenG = branch("then_branch"), elseG = branch("else_branch");
  if (cond === undefined) throw new Unsupported("no condition");
  /** Converts `g` in a scope over `values`; its outputs, or null when a node failed. */
  const run = (g: Graph): Value[] | null => {
    const scope = new Map(values);
    const before = problems.length;
    for (const node of g.nodes) convertNode(node, opset, em, scope, made, problems);
    if (problems.length > before) return null;
    return g.outputs.map((o) => {
      const v = scope.get(o.name);
      if (v === undefined || v === null) {
        throw new Unsupported(`branch output "${o.name}" is not written`);
      }
      return v;
    });
  };
  if (cond.ints !== undefined && cond.ints.length === 1 && typeof cond.ints[0] === "number") {
    const outs = run(cond.ints[0] !== 0 ? thenG : elseG);
    if (outs === null) throw new Unsupported("a branch that cannot be imported");
    return outs;
  }
  // Values not yet in registers (parameters, constants) are materialized inside a branch only
  // on its path: forget those registers after each branch.
  const lazy = [...values.values()].filter((v): v is Value => v !== null && v.reg === null);
  const forget = () => {
    for (const v of lazy) v.reg = null;
  };
  const c = em.record("vm.builtin.read_if_cond", [em.reg(cond)])!;
  const elseLabel = em.newLabel(), endLabel = em.newLabel();
  em.recordIf(c, elseLabel);
  const thenOuts = run(thenG);
  forget();
  if (thenOuts === null) throw new Unsupported("a then_branch that cannot be imported");
  const regs = thenOuts.map(() => em.newReg());
  thenOuts.forEach((v, i) => em.recordCopy(v, regs[i]));
  forget();
  em.recordGoto(endLabel);
  em.recordLabel(elseLabel);
  const elseOuts = run(elseG);
  if (elseOuts === null) throw new Unsupported("an else_branch that cannot be imported");
  elseOuts.forEach((v, i) => em.recordCopy(v, regs[i]));
  forget();
  em.recordLabel(endLabel);
  return thenOuts.map((t, i) => {
    const e = elseOuts[i];
    if (t.dtype !== e.dtype) throw new Unsupported(`branches of dtypes ${t.dtype} and ${e.dtype}`);
    const shape = t.shape.length === e.shape.length
      ? t.shape.map((d, k) => d === e.shape[k] ? d : null)
      : null;
    if (shape === null) throw new Unsupported("branches whose outputs differ in rank");
    const out: Value = { dtype: t.dtype, shape, reg: regs[i] };
    if (shape.includes(null)) em.matchShape(regs[i], out.shape, "");
    return out;
  });
}

/** Converts one node, recording its calls; a node it cannot convert joins `problems`. */
function convertNode(
  n: Node,
  opset: number,
  em: Emitter,
  values: Map<string, Value | null>,
  made: NDArray[],
  problems: UnsupportedNode[],
): void {
  const inputs: (Value | undefined)[] = [];
  let poisoned = false;
  for (const name of n.inputs) {
    if (name === "") {
      inputs.push(undefined);
      continue;
    }
    const v = values.get(name);
    if (v === undefined) {
      throw new ONNXImportError(
        `node "${n.name}"`,
        n.offset,
        `input "${name}" is read before any node writes it (the graph is cyclic or not sorted)`,
      );
    }
    if (v === null) poisoned = true;
    inputs.push(v ?? undefined);
  }
  // Outputs of a node that reads an unconvertible value are unconvertible too (not reported again).
  let outputs: (Value | undefined)[] = [];
  if (!poisoned) {
    try {
      const lc = { opset, em, values, made, problems, convertNode };
      outputs = n.opType === "If"
        ? convertIf(n, opset, em, values, made, problems, inputs[0])
        : n.opType === "Loop"
        ? convertLoop(n, lc, inputs)
        : n.opType === "Scan"
        ? convertScan(n, lc, inputs)
        : convertWidened(n, opset, em, inputs, made);
    } catch (e) {
      if (!(e instanceof Unsupported)) throw e;
      problems.push({ name: n.name, op: n.opType, reason: e.message });
      poisoned = true;
    }
  }
  for (const [i, name] of n.outputs.entries()) {
    if (name === "") continue;
    if (values.has(name)) {
      throw new ONNXImportError(`node "${n.name}"`, n.offset, `output "${name}" is written twice`);
    }
    if (!poisoned && outputs[i] === undefined) {
      problems.push({
        name: n.name,
        op: n.opType,
        reason: `output ${i} ("${name}") not supported`,
      });
    }
    values.set(name, poisoned ? null : outputs[i] ?? null);
  }
}

/**
 * What an operator's converter sees of one node: its inputs as `Value`s, its
 * attributes read with defaults and checked kinds, the opset it is at, and
 * the emitter to record calls with. Everything that cannot be imported
 * throws `Unsupported`, which the graph converter collects per node.
 *
 * @module
 */

import type { NDArray } from "../devices/ndarray.ts";
import type { TensorDType } from "../ground/dtype.ts";
import { tensor } from "../devices/tensor.ts";
import type { Operand } from "../builder/operand.ts";
import type { Emitter } from "./emitter.ts";
import { type Dim, Unsupported, type Value } from "./graph_values.ts";
import { type Attribute, AttributeType, type Node } from "./onnx_proto.ts";
import { tensorFromProto } from "./onnx_tensor.ts";

/** Integer dtypes whose known contents the importer folds (shape arithmetic). */
const INT_DTYPES: readonly TensorDType[] = ["int64", "int32"];

/** Most elements of a known integer tensor kept as numbers for folding. */
const MAX_FOLDED = 4096;

/** The converter's view of one node. */
export class NodeContext {
  readonly node: Node;
  readonly opset: number;
  readonly em: Emitter;
  readonly #inputs: (Value | undefined)[];
  readonly #attrs = new Map<string, Attribute>();
  /** Tensors made while converting (constants), disposed by the importer. */
  readonly made: NDArray[];

  /** The context of `node` at `opset`, its inputs resolved. */
  constructor(
    node: Node,
    opset: number,
    em: Emitter,
    inputs: (Value | undefined)[],
    made: NDArray[],
  ) {
    this.node = node;
    this.opset = opset;
    this.em = em;
    this.#inputs = inputs;
    this.made = made;
    for (const a of node.attributes) this.#attrs.set(a.name, a);
  }

  /** Input `i`, which must be present. */
  input(i: number): Value {
    const v = this.#inputs[i];
    if (v === undefined) throw new Unsupported(`input ${i} is missing`);
    return v;
  }

  /** Input `i`, or undefined when absent or given as `""`. */
  optional(i: number): Value | undefined {
    return this.#inputs[i];
  }

  /** The register of `v`, or `vm.builtin.null_value`'s (recorded now) when it is absent. */
  regOrNull(v: Value | undefined): Operand {
    return v === undefined ? this.em.record("vm.builtin.null_value", [])! : this.em.reg(v);
  }

  /** The register of optional input `i`, or `vm.builtin.null_value`'s (`regOrNull`). */
  optionalReg(i: number): Operand {
    return this.regOrNull(this.#inputs[i]);
  }

  /** How many inputs the node lists (trailing `""` included). */
  get inputCount(): number {
    return this.#inputs.length;
  }

  #attr(name: string, type: number): Attribute | undefined {
    const a = this.#attrs.get(name);
    if (a === undefined) return undefined;
    if (a.refAttrName !== "") throw new Unsupported(`attribute ${name} refers to a function's`);
    if (a.type !== 0 && a.type !== type) {
      throw new Unsupported(`attribute ${name} has type ${a.type}, expected ${type}`);
    }
    return a;
  }

  /** Whether attribute `name` is given. */
  has(name: string): boolean {
    return this.#attrs.has(name);
  }

  /** An INT attribute. */
  int(name: string, fallback: number): number {
    return this.#attr(name, AttributeType.INT)?.i ?? fallback;
  }

  /** A FLOAT attribute. */
  float(name: string, fallback: number): number {
    return this.#attr(name, AttributeType.FLOAT)?.f ?? fallback;
  }

  /** An INTS attribute. */
  ints(name: string): number[] | undefined {
    return this.#attr(name, AttributeType.INTS)?.ints;
  }

  /** A FLOATS attribute. */
  floats(name: string): number[] | undefined {
    return this.#attr(name, AttributeType.FLOATS)?.floats;
  }

  /** A STRING attribute as text. */
  string(name: string, fallback: string): string {
    const a = this.#attr(name, AttributeType.STRING);
    return a === undefined ? fallback : new TextDecoder().decode(a.s);
  }

  /** A TENSOR attribute as a CPU tensor (kept for disposal). */
  tensorAttr(name: string): NDArray | undefined {
    const a = this.#attr(name, AttributeType.TENSOR);
    if (a === undefined || a.t === null) return undefined;
    const t = tensorFromProto(a.t, `node ${this.node.name} attribute ${name}`);
    this.made.push(t);
    return t;
  }

  /**
   * The integer contents of input `i`, known before run time (an
   * initializer, a `Constant`, shape arithmetic): numbers only, no
   * symbols (`knownDims` takes those).
   */
  knownInts(i: number, what: string): number[] {
    const v = this.input(i);
    const ints = v.ints;
    if (ints === undefined) {
      throw new Unsupported(`${what} (input ${i}) must be known before run time`);
    }
    if (!ints.every((d) => typeof d === "number")) {
      throw new Unsupported(`${what} (input ${i}) depends on a symbolic dimension`);
    }
    return ints as number[];
  }

  /** The contents of input `i` as dimensions (numbers and symbols), known before run time. */
  knownDims(i: number, what: string): Dim[] {
    const ints = this.input(i).ints;
    if (ints === undefined) {
      throw new Unsupported(`${what} (input ${i}) must be known before run time`);
    }
    return [...ints];
  }

  /** A known value holding `data` (numbers or symbols) of `shape`, as int64. */
  knownValue(ints: readonly Dim[], shape: number[], dtype: TensorDType = "int64"): Value {
    let t: NDArray | undefined;
    if (ints.every((d) => typeof d === "number")) {
      t = intTensor(ints as number[], shape, dtype);
      this.made.push(t);
    }
    return { dtype, shape, reg: null, ints, tensor: t };
  }

  /** A known float32 scalar (a 0-d constant). */
  scalar(x: number, dtype: TensorDType = "float32"): Value {
    const t = dtype === "int64"
      ? tensor(new BigInt64Array([BigInt(x)]), { shape: [] })
      : tensor([x], { dtype, shape: [] });
    this.made.push(t);
    return { dtype, shape: [], reg: null, tensor: t };
  }

  /** A known value from a CPU tensor; integer tensors keep their contents for folding. */
  fromTensor(t: NDArray): Value {
    let ints: number[] | undefined;
    if (INT_DTYPES.includes(t.dtype) && t.size <= MAX_FOLDED) {
      ints = Array.from(t.dataSync() as ArrayLike<number | bigint>, Number);
    }
    return { dtype: t.dtype, shape: [...t.shape], reg: null, tensor: t, ints };
  }

  /** Checks that `v` has one of `dtypes`. */
  dtype(v: Value, dtypes: readonly TensorDType[], what = "input"): void {
    if (!dtypes.includes(v.dtype)) {
      throw new Unsupported(`${what} of dtype ${v.dtype} (supported: ${dtypes.join(", ")})`);
    }
  }
}

/** A CPU tensor of integers `data` with `shape` and integer `dtype`. */
export function intTensor(data: readonly number[], shape: number[], dtype: TensorDType): NDArray {
  if (dtype === "int64") return tensor(new BigInt64Array(data.map(BigInt)), { shape });
  return tensor(data as number[], { dtype, shape });
}

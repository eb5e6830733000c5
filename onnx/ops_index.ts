/**
 * Indexing, scanning and bitwise operators: `CumSum`, `TopK`,
 * `ScatterElements` (and the older `Scatter`), `ScatterND`, `OneHot`,
 * `Compress`, `NonZero`, `Unique`, `Einsum`, `TensorScatter`,
 * `BitwiseAnd`/`Or`/`Xor`/`Not` and `BitShift`, each one call of the host operator of the same meaning
 * (builtins/host_operators/host_index_operators.ts). Sizes that depend on the
 * data (`NonZero`'s count, `Unique`'s) are bound from the tensor the call
 * made; an operator with several outputs is one call an output.
 *
 * @module
 */

import { broadcastShapes, type Dim, normAxis, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";

/** The one number of known input `i` (a scalar or one-element tensor), or null. */
function knownScalar(cx: NodeContext, i: number): number | null {
  const v = cx.input(i);
  if (v.ints !== undefined && v.ints.length === 1 && typeof v.ints[0] === "number") {
    return v.ints[0];
  }
  if (v.tensor !== undefined && v.tensor.size === 1) return Number(v.tensor.dataSync()[0]);
  return null;
}

/** A `ScatterElements` (or `Scatter`) node as `vm.op.scatter_elements`. */
function scatterElements(cx: NodeContext): Value[] {
  const data = cx.input(0), r = data.shape.length;
  const axis = normAxis(cx.int("axis", 0), r);
  const reduction = cx.string("reduction", "none");
  const args = [0, 1, 2].map((i) => cx.em.reg(cx.input(i)));
  return [
    cx.em.call(
      "vm.op.scatter_elements",
      [...args, cx.em.imm(axis), reduction],
      data.dtype,
      data.shape,
    ),
  ];
}

/** A binary bitwise operator: NumPy broadcasting of two integer tensors of one dtype. */
function bitwise(op: string): OpSpec {
  return {
    attrs: op === "shift" ? ["direction"] : [],
    convert(cx) {
      const a = cx.input(0), b = cx.input(1);
      const name = op === "shift"
        ? cx.string("direction", "") === "LEFT" ? "left_shift" : "right_shift"
        : `bitwise_${op}`;
      if (op === "shift" && !["LEFT", "RIGHT"].includes(cx.string("direction", ""))) {
        throw new Unsupported(`BitShift direction "${cx.string("direction", "")}"`);
      }
      return [
        cx.em.call(
          `vm.op.${name}`,
          [cx.em.reg(a), cx.em.reg(b)],
          a.dtype,
          broadcastShapes(a.shape, b.shape),
        ),
      ];
    },
  };
}

/**
 * `equation` with each `...` spelled out in letters it does not use (capitals,
 * aligned at the right as NumPy broadcasts them), so the builtin sees plain
 * letters; without `->`, the ellipsis leads the implicit output.
 */
function withoutEllipsis(equation: string, ops: readonly Value[]): string {
  if (!equation.includes("...")) return equation;
  const [lhs, given] = equation.split("->");
  const spare = [..."ABCDEFGHIJKLMNOPQRSTUVWXYZ"].filter((l) => !equation.includes(l));
  let widest = 0;
  const terms = lhs.split(",").map((term, i) => {
    if (!term.includes("...")) return term;
    const k = (ops[i]?.shape.length ?? 0) - (term.length - 3);
    if (k < 0 || k > spare.length) throw new Unsupported(`equation "${equation}"`);
    widest = Math.max(widest, k);
    return term.replace("...", spare.slice(spare.length - k).join(""));
  });
  const dots = spare.slice(spare.length - widest).join("");
  const singles = [...new Set(lhs.replace(/[.,]/g, ""))]
    .filter((l) => lhs.split(l).length === 2)
    .sort()
    .join("");
  const out = given === undefined ? dots + singles : given.replace("...", dots);
  return `${terms.join(",")}->${out}`;
}

/** The operators of this module, by ONNX name. */
export const INDEX_OPS: Record<string, OpSpec> = {
  CumSum: {
    attrs: ["exclusive", "reverse"],
    convert(cx) {
      const x = cx.input(0);
      const axis = knownScalar(cx, 1);
      return [
        cx.em.call(
          "vm.op.cumsum",
          [
            cx.em.reg(x),
            axis === null ? cx.em.reg(cx.input(1)) : cx.em.imm(axis),
            cx.em.imm(cx.int("exclusive", 0)),
            cx.em.imm(cx.int("reverse", 0)),
          ],
          x.dtype,
          x.shape,
        ),
      ];
    },
  },
  TopK: {
    attrs: ["axis", "largest", "sorted"],
    convert(cx) {
      if (cx.opset < 10) throw new Unsupported("TopK-1 (k as an attribute)");
      const x = cx.input(0), axis = normAxis(cx.int("axis", -1), x.shape.length);
      if (cx.int("sorted", 1) !== 1) throw new Unsupported("sorted=0");
      const k = knownScalar(cx, 1);
      const shape: Dim[] = [...x.shape];
      shape[axis] = k;
      const call = (output: number, dtype: Value["dtype"]) =>
        cx.em.call(
          "vm.op.topk",
          [
            cx.em.reg(x),
            cx.em.reg(cx.input(1)),
            cx.em.imm(axis),
            cx.em.imm(cx.int("largest", 1)),
            cx.em.imm(output),
            // UINT64 (int64 bits, ops_uint64.ts) orders as unsigned.
            cx.em.imm(x.format === "uint64" ? 1 : 0),
          ],
          dtype,
          shape,
        );
      return [call(0, x.dtype), cx.node.outputs.length > 1 ? call(1, "int64") : undefined];
    },
  },
  ScatterElements: { attrs: ["axis", "reduction"], convert: scatterElements },
  Scatter: { attrs: ["axis"], convert: scatterElements },
  ScatterND: {
    attrs: ["reduction"],
    convert(cx) {
      const data = cx.input(0);
      const args = [0, 1, 2].map((i) => cx.em.reg(cx.input(i)));
      return [
        cx.em.call(
          "vm.op.scatter_nd",
          [...args, cx.string("reduction", "none")],
          data.dtype,
          data.shape,
        ),
      ];
    },
  },
  OneHot: {
    attrs: ["axis"],
    convert(cx) {
      const indices = cx.input(0), values = cx.input(2);
      const rank = indices.shape.length + 1;
      const axis = normAxis(cx.int("axis", -1), rank);
      const depth = knownScalar(cx, 1);
      const shape: Dim[] = [...indices.shape];
      shape.splice(axis, 0, depth === null ? null : Math.trunc(depth));
      const args = [0, 1, 2].map((i) => cx.em.reg(cx.input(i)));
      return [cx.em.call("vm.op.one_hot", [...args, cx.em.imm(axis)], values.dtype, shape)];
    },
  },
  Compress: {
    attrs: ["axis"],
    convert(cx) {
      const x = cx.input(0);
      const has = cx.has("axis");
      const axis = has ? normAxis(cx.int("axis", 0), x.shape.length) : 0;
      const shape: Dim[] = has ? [...x.shape] : [null];
      shape[axis] = null;
      return [
        cx.em.call(
          "vm.op.compress",
          [cx.em.reg(x), cx.em.reg(cx.input(1)), ...(has ? [cx.em.imm(axis)] : [])],
          x.dtype,
          shape,
        ),
      ];
    },
  },
  NonZero: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      return [cx.em.call("vm.op.nonzero", [cx.em.reg(x)], "int64", [x.shape.length, null])];
    },
  },
  Unique: {
    attrs: ["axis", "sorted"],
    convert(cx) {
      const x = cx.input(0);
      const has = cx.has("axis");
      const axis = has ? normAxis(cx.int("axis", 0), x.shape.length) : 0;
      const none = cx.em.record("vm.builtin.null_value", [])!;
      return cx.node.outputs.map((name, output) => {
        if (name === "") return undefined;
        const shape: Dim[] = output === 0 ? (has ? [...x.shape] : [null]) : [null];
        if (output === 0) shape[axis] = null;
        return cx.em.call(
          "vm.op.unique",
          [
            cx.em.reg(x),
            has ? cx.em.imm(axis) : none,
            cx.em.imm(cx.int("sorted", 1)),
            cx.em.imm(output),
          ],
          output === 0 ? x.dtype : "int64",
          shape,
        );
      });
    },
  },
  Einsum: {
    attrs: ["equation"],
    convert(cx) {
      const ops: Value[] = [];
      for (let i = 0; i < cx.inputCount; i++) ops.push(cx.input(i));
      for (const v of ops) cx.dtype(v, ["float32"]);
      const equation = withoutEllipsis(cx.string("equation", "").replace(/\s/g, ""), ops);
      const [lhs, given] = equation.split("->");
      const terms = lhs.split(",");
      if (terms.length !== ops.length || equation.includes(".")) {
        throw new Unsupported(`equation "${equation}" (no ellipsis)`);
      }
      const sizes = new Map<string, Dim>();
      terms.forEach((t, i) => [...t].forEach((l, a) => sizes.set(l, ops[i].shape[a] ?? null)));
      const out = given ??
        [...sizes.keys()].filter((l) => lhs.split(l).length === 2).sort().join("");
      return [
        cx.em.call(
          "vm.op.einsum",
          [equation, ...ops.map((v) => cx.em.reg(v))],
          "float32",
          [...out].map((l) => sizes.get(l) ?? null),
        ),
      ];
    },
  },
  TensorScatter: {
    attrs: ["axis", "mode"],
    convert(cx) {
      const cache = cx.input(0), update = cx.input(1);
      const axis = normAxis(cx.int("axis", -2), cache.shape.length);
      const indices = cx.optional(2);
      return [
        cx.em.call(
          "vm.op.tensor_scatter",
          [
            cx.em.reg(cache),
            cx.em.reg(update),
            cx.regOrNull(indices),
            cx.em.imm(axis),
            cx.string("mode", "linear"),
          ],
          cache.dtype,
          cache.shape,
        ),
      ];
    },
  },
  BitwiseAnd: bitwise("and"),
  BitwiseOr: bitwise("or"),
  BitwiseXor: bitwise("xor"),
  BitShift: bitwise("shift"),
  BitwiseNot: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      return [cx.em.call("vm.op.bitwise_not", [cx.em.reg(x)], x.dtype, x.shape)];
    },
  },
};

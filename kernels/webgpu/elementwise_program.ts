/**
 * The elementwise template: `out[i] = f(in0[j0(i)], in1[j1(i)])` for one or
 * two inputs read through strides. Unary ops, binary ops with broadcasting,
 * `cast` and `transpose` (the identity read through permuted strides) are all
 * instances; the per-op part is a WGSL function body from
 * `elementwise_ops.ts`.
 *
 * Three variants, chosen from the coalesced iteration space:
 *
 * - `vec4`: every input is contiguous like the output, the size is a multiple
 *   of 4 and every offset is too; one thread handles four elements with
 *   `vec4` loads (a bandwidth-bound add runs several times faster this way on
 *   a SIMD software adapter, and no slower on real GPUs).
 * - `flat`: contiguous inputs, one element per thread.
 * - `strided`: the rank of the coalesced space is baked into the shader, and
 *   sizes and strides come from uniforms, so one pipeline serves every shape
 *   of that rank.
 *
 * @module
 */

import { collapseDims } from "../broadcast.ts";
import { indexFields, indexValues, wgslIndices } from "./indexing.ts";
import { isNanSource } from "./workgroup_reduce.ts";
import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";

/** A WGSL scalar type of tensor elements. */
export type ScalarType = "f32" | "i32" | "u32";

/** The per-op part of an elementwise kernel. */
export interface ElementwiseFn {
  /** Names the function in the program key; equal names mean equal bodies for equal types. */
  readonly name: string;
  /**
   * The WGSL body of `fn op(x0: T0[, x1: T1]) -> TO`, where `T0`, `T1` and
   * `TO` are aliases of the input and output element types (scalars, or
   * `vec4`s in the vectorized variant, so write `TO(0.0)`, not `0.0`).
   */
  readonly body: string;
  /** The body of the `vec4` variant, where it differs from `body`. */
  readonly vectorBody?: string;
  /** WGSL functions `body` calls, placed before `op`. */
  readonly helpers?: string;
}

/** One input operand of an elementwise program. */
export interface ElementwiseInput {
  /** Element type. */
  readonly type: ScalarType;
  /** Element offset of the tensor in its buffer. */
  readonly offset: number;
  /** Strides over the output's dimensions (0 where broadcast). */
  readonly strides: readonly number[];
}

/**
 * Builds the program computing `fn` over `outShape` (contiguous output of
 * element type `outType` at element offset `outOffset`).
 */
export function elementwiseProgram(
  fn: ElementwiseFn,
  inputs: readonly ElementwiseInput[],
  outShape: readonly number[],
  outType: ScalarType,
  outOffset: number,
): Program {
  let size = 1;
  for (const d of outShape) size *= d;
  const space = collapseDims(outShape, inputs.map((x) => x.strides));
  const rank = space.shape.length;
  // One element, or one axis every input walks with stride 1.
  const contiguous = rank === 1 && (size === 1 || space.strides.every((s) => s[0] === 1));
  const offsets = inputs.map((x) => x.offset);
  const vec4 = contiguous && size % 4 === 0 && outOffset % 4 === 0 &&
    offsets.every((o) => o % 4 === 0);
  const types = inputs.map((x) => x.type);
  const variant = vec4 ? "vec4" : contiguous ? "flat" : `r${rank}`;
  const key = `ew:${fn.name}:${types.join(",")}>${outType}:${variant}`;
  const wg = WORKGROUP_SIZE;

  if (contiguous) {
    const lanes = vec4 ? 4 : 1;
    const n = size / lanes;
    return {
      key,
      source: () => flatSource(fn, types, outType, vec4),
      inputs: inputs.length,
      uniforms: new Uniforms()
        .u32(n)
        .u32(outOffset / lanes)
        .u32s(offsets.map((o) => o / lanes))
        .words(),
      workgroups: groupsFor(n, wg),
    };
  }
  return {
    key,
    source: () => stridedSource(fn, types, outType, rank),
    inputs: inputs.length,
    uniforms: new Uniforms().u32(size).u32(outOffset).u32s(indexValues(offsets, space)).words(),
    workgroups: groupsFor(size, wg),
  };
}

function prelude(
  fn: ElementwiseFn,
  types: readonly ScalarType[],
  outType: ScalarType,
  vec4: boolean,
): string {
  const t = (s: ScalarType) => (vec4 ? `vec4<${s}>` : s);
  let src = "";
  types.forEach((ty, k) => (src += storage(k, `in${k}`, t(ty), false)));
  src += storage(types.length, "out", t(outType), true);
  types.forEach((ty, k) => (src += `alias T${k} = ${t(ty)};\n`));
  src += `alias TO = ${t(outType)};\n`;
  if (types.includes("f32")) src += isNanSource(vec4 ? 4 : 1);
  const params = types.map((_, k) => `x${k}: T${k}`).join(", ");
  src += fn.helpers ?? "";
  const body = vec4 ? (fn.vectorBody ?? fn.body) : fn.body;
  src += `fn op(${params}) -> TO {\n${body}\n}\n`;
  return src;
}

function flatSource(
  fn: ElementwiseFn,
  types: readonly ScalarType[],
  outType: ScalarType,
  vec4: boolean,
): string {
  const fields = ["size", "offOut", ...types.map((_, k) => `off${k}`)];
  const args = types.map((_, k) => `in${k}[u.off${k} + idx]`).join(", ");
  return prelude(fn, types, outType, vec4) + uniformStruct(fields, types.length + 1) +
    mainHeader(WORKGROUP_SIZE) + `
  let idx = wg * ${WORKGROUP_SIZE}u + lid;
  if (idx >= u.size) { return; }
  out[u.offOut + idx] = op(${args});
}
`;
}

function stridedSource(
  fn: ElementwiseFn,
  types: readonly ScalarType[],
  outType: ScalarType,
  rank: number,
): string {
  const fields = ["size", "offOut", ...indexFields(rank, types.length)];
  const args = types.map((_, k) => `in${k}[i${k}]`).join(", ");
  return prelude(fn, types, outType, false) + uniformStruct(fields, types.length + 1) +
    mainHeader(WORKGROUP_SIZE) + `
  let idx = wg * ${WORKGROUP_SIZE}u + lid;
  if (idx >= u.size) { return; }
${wgslIndices(rank, types.length)}  out[u.offOut + idx] = op(${args});
}
`;
}

/**
 * The layer-norm template: per row of `n` elements (the trailing
 * `gamma.ndim` axes), `(x - mean) / sqrt(var + eps) * gamma + beta` with the
 * population variance computed in a second pass over the row (mean first,
 * then squared deviations: no cancellation from `E[x²] - E[x]²`).
 *
 * One thread per row when rows are many or short, one workgroup per row when
 * they are few and long.
 *
 * @module
 */

import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";
import { groupReduceSource, rowsNeedWorkgroups } from "./workgroup_reduce.ts";

/** Element offsets of the four tensors. */
export interface LayerNormOffsets {
  /** Input. */
  x: number;
  /** Scale, `n` elements. */
  gamma: number;
  /** Shift, `n` elements. */
  beta: number;
  /** Output. */
  out: number;
}

/** Layer norm over rows of `n` float32 elements, bindings x, gamma, beta, out. */
export function layerNormProgram(
  rows: number,
  n: number,
  eps: number,
  off: LayerNormOffsets,
): Program {
  const group = rowsNeedWorkgroups(rows, n);
  const uniforms = new Uniforms().u32s([rows, n, off.x, off.gamma, off.beta, off.out]).f32(eps)
    .words();
  const header = storage(0, "x", "f32", false) + storage(1, "gamma", "f32", false) +
    storage(2, "beta", "f32", false) + storage(3, "out", "f32", true) +
    uniformStruct(["rows", "n", "offX", "offGamma", "offBeta", "offOut", "eps"], 4) +
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n";
  // Both variants share the body; `first`/`step` pick the thread's share of the row.
  const body = (first: string, step: string, total: (v: string) => string) => `
  let src = u.offX + row * u.n;
  let dst = u.offOut + row * u.n;
  let count = f32(u.n);
  var s = 0.0;
  for (var j = ${first}; j < u.n; j += ${step}) { s += x[src + j]; }
  let mean = ${total("s")} / count;
  var q = 0.0;
  for (var j = ${first}; j < u.n; j += ${step}) { let d = x[src + j] - mean; q += d * d; }
  let rstd = 1.0 / sqrt(${total("q")} / count + bitcast<f32>(u.eps));
  for (var j = ${first}; j < u.n; j += ${step}) {
    out[dst + j] = (x[src + j] - mean) * rstd * gamma[u.offGamma + j] + beta[u.offBeta + j];
  }
}
`;
  if (!group) {
    return {
      key: "layer_norm:thread",
      source: () =>
        header + mainHeader(WORKGROUP_SIZE) + `
  let row = wg * ${WORKGROUP_SIZE}u + lid;
  if (row >= u.rows) { return; }` + body("0u", "1u", (v) => v),
      inputs: 3,
      uniforms,
      workgroups: groupsFor(rows, WORKGROUP_SIZE),
    };
  }
  return {
    key: "layer_norm:group",
    source: () =>
      header + groupReduceSource("f32", WORKGROUP_SIZE, "groupSum", "add") +
      mainHeader(WORKGROUP_SIZE) + `
  let row = wg;
  if (row >= u.rows) { return; }` + body("lid", `${WORKGROUP_SIZE}u`, (v) => `groupSum(${v}, lid)`),
    inputs: 3,
    uniforms,
    workgroups: rows,
  };
}

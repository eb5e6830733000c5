/**
 * The softmax template (last axis): per row, the maximum, the sum of
 * `exp(x - max)`, then `exp(x - max) / sum`. Subtracting the maximum keeps
 * `exp` from overflowing, as the CPU kernel does.
 *
 * Like the reductions, one thread per row when rows are many or short, one
 * workgroup per row (tree reductions in workgroup memory) when they are few
 * and long.
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
import {
  groupReduceSource,
  isNanSource,
  nanMaxSource,
  NEG_INF_F32,
  rowsNeedWorkgroups,
} from "./workgroup_reduce.ts";

/** Softmax over rows of `n` elements (float32) at element offsets `inOffset` → `outOffset`. */
export function softmaxProgram(
  rows: number,
  n: number,
  inOffset: number,
  outOffset: number,
): Program {
  const group = rowsNeedWorkgroups(rows, n);
  const uniforms = new Uniforms().u32s([rows, n, inOffset, outOffset]).words();
  const header = storage(0, "x", "f32", false) + storage(1, "out", "f32", true) +
    uniformStruct(["rows", "n", "offIn", "offOut"], 2) + isNanSource() + nanMaxSource("maxNaN") +
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n";
  if (!group) {
    return {
      key: "softmax:thread",
      source: () =>
        header + mainHeader(WORKGROUP_SIZE) + `
  let row = wg * ${WORKGROUP_SIZE}u + lid;
  if (row >= u.rows) { return; }
  let src = u.offIn + row * u.n;
  let dst = u.offOut + row * u.n;
  var m = ${NEG_INF_F32};
  for (var j = 0u; j < u.n; j++) { m = maxNaN(m, x[src + j]); }
  var s = 0.0;
  for (var j = 0u; j < u.n; j++) { s += exp(x[src + j] - m); }
  for (var j = 0u; j < u.n; j++) { out[dst + j] = exp(x[src + j] - m) / s; }
}
`,
      inputs: 1,
      uniforms,
      workgroups: groupsFor(rows, WORKGROUP_SIZE),
    };
  }
  return {
    key: "softmax:group",
    source: () =>
      header + groupReduceSource("f32", WORKGROUP_SIZE, "groupMax", "maxNaN") +
      groupReduceSource("f32", WORKGROUP_SIZE, "groupSum", "add") + mainHeader(WORKGROUP_SIZE) + `
  let row = wg;
  if (row >= u.rows) { return; }
  let src = u.offIn + row * u.n;
  let dst = u.offOut + row * u.n;
  var m = ${NEG_INF_F32};
  for (var j = lid; j < u.n; j += ${WORKGROUP_SIZE}u) { m = maxNaN(m, x[src + j]); }
  m = groupMax(m, lid);
  var s = 0.0;
  for (var j = lid; j < u.n; j += ${WORKGROUP_SIZE}u) { s += exp(x[src + j] - m); }
  s = groupSum(s, lid);
  for (var j = lid; j < u.n; j += ${WORKGROUP_SIZE}u) { out[dst + j] = exp(x[src + j] - m) / s; }
}
`,
    inputs: 1,
    uniforms,
    workgroups: rows,
  };
}

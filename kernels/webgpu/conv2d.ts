/**
 * The 2-D convolution template (`OpBackend.conv2d`): one thread per output
 * element, summing over its group's input channels and the kernel elements
 * whose input position holds an element (`Conv2dGeometry`: strides,
 * padding, dilations, and the input spacing of a transposed convolution),
 * plus the bias. Direct, with no im2col buffer: a window's inputs are read
 * where they are, so the memory is the output's alone.
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
import type { Conv2dGeometry } from "../kernel_backend.ts";

/** Shapes of a convolution's operands, `[N, C, H, W]`, `[M, C/G, KH, KW]`, `[N, M, OH, OW]`. */
export interface Conv2dShapes {
  /** Input shape. */
  x: readonly number[];
  /** Weight shape. */
  w: readonly number[];
  /** Output shape. */
  out: readonly number[];
}

const FIELDS = [
  "C",
  "H",
  "W",
  "M",
  "Cg",
  "KH",
  "KW",
  "OH",
  "OW",
  "Mg",
  "sh",
  "sw",
  "ph",
  "pw",
  "dh",
  "dw",
  "ih",
  "iw",
  "offX",
  "offW",
  "offB",
  "offOut",
  "total",
];

/**
 * Whether a convolution is a plain matrix product per image: 1×1, one
 * group, stride 1, no padding, not transposed. The op glue then runs it as
 * `w [M, C] @ x [N, C, H·W]` with the matmul template (register-blocked,
 * many outputs per thread) and adds the bias with `biasProgram`.
 */
export function isPointwise(shapes: Conv2dShapes, geometry: Conv2dGeometry): boolean {
  const [, , KH, KW] = shapes.w;
  return KH === 1 && KW === 1 && geometry.groups === 1 &&
    geometry.strides.every((s) => s === 1) && geometry.padBegin.every((p) => p === 0) &&
    geometry.inputDilations.every((d) => d === 1) &&
    shapes.out[2] === shapes.x[2] && shapes.out[3] === shapes.x[3];
}

/** `out[n, m, :] += b[m]` in place, over `out [N, M, plane]`: bindings b, out. */
export function biasProgram(
  total: number,
  plane: number,
  M: number,
  offB: number,
  offOut: number,
): Program {
  return {
    key: "conv2d:bias_add",
    source: () =>
      storage(0, "b", "f32", false) + storage(1, "out", "f32", true) +
      uniformStruct(["total", "plane", "M", "offB", "offOut"], 2) + mainHeader(WORKGROUP_SIZE) + `
  let i = wg * ${WORKGROUP_SIZE}u + lid;
  if (i >= u.total) { return; }
  out[u.offOut + i] += b[u.offB + (i / u.plane) % u.M];
}
`,
    inputs: 1,
    uniforms: new Uniforms().u32s([total, plane, M, offB, offOut]).words(),
    workgroups: groupsFor(total, WORKGROUP_SIZE),
  };
}

/** A convolution over bindings x, w, bias (x again when `bias` is false), out. */
export function conv2dProgram(
  shapes: Conv2dShapes,
  geometry: Conv2dGeometry,
  bias: boolean,
  offsets: readonly [number, number, number, number],
): Program {
  const [N, C, H, W] = shapes.x, [M, Cg, KH, KW] = shapes.w, [, , OH, OW] = shapes.out;
  const total = N * M * OH * OW;
  // An ordinary convolution needs no test of the input's spacing: its own shader.
  const spaced = geometry.inputDilations.some((d) => d !== 1);
  const uniforms = new Uniforms().u32s([
    C,
    H,
    W,
    M,
    Cg,
    KH,
    KW,
    OH,
    OW,
    M / geometry.groups,
    ...geometry.strides,
    ...geometry.padBegin,
    ...geometry.dilations,
    ...geometry.inputDilations,
    ...offsets,
    total,
  ]).words();
  return {
    key: `conv2d:${bias ? "bias" : "plain"}:${spaced ? "spaced" : "dense"}`,
    source: () =>
      storage(0, "x", "f32", false) + storage(1, "w", "f32", false) +
      storage(2, "b", "f32", false) + storage(3, "out", "f32", true) +
      uniformStruct(FIELDS, 4) + mainHeader(WORKGROUP_SIZE) + `
  let idx = wg * ${WORKGROUP_SIZE}u + lid;
  if (idx >= u.total) { return; }
  let ox = idx % u.OW;
  var t = idx / u.OW;
  let oy = t % u.OH;
  t = t / u.OH;
  let m = t % u.M;
  let n = t / u.M;
  let g = m / u.Mg;
  var sum = 0.0;
  for (var c = 0u; c < u.Cg; c++) {
    let xc = u.offX + (n * u.C + g * u.Cg + c) * u.H * u.W;
    let wc = u.offW + (m * u.Cg + c) * u.KH * u.KW;
    for (var ky = 0u; ky < u.KH; ky++) {
      let py = i32(oy * u.sh + ky * u.dh) - i32(u.ph);
      if (py < 0${spaced ? " || u32(py) % u.ih != 0u" : ""}) { continue; }
      let iy = u32(py) / u.ih;
      if (iy >= u.H) { continue; }
      for (var kx = 0u; kx < u.KW; kx++) {
        let px = i32(ox * u.sw + kx * u.dw) - i32(u.pw);
        if (px < 0${spaced ? " || u32(px) % u.iw != 0u" : ""}) { continue; }
        let ix = u32(px) / u.iw;
        if (ix >= u.W) { continue; }
        sum += w[wc + ky * u.KW + kx] * x[xc + iy * u.W + ix];
      }
    }
  }
  ${bias ? "sum += b[u.offB + m];" : ""}
  out[u.offOut + idx] = sum;
}
`,
    inputs: 3,
    uniforms,
    workgroups: groupsFor(total, WORKGROUP_SIZE),
  };
}

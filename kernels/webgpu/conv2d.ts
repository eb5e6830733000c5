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

/** A convolution over bindings x, w, bias (x again when `bias` is false), out. */
export function conv2dProgram(
  shapes: Conv2dShapes,
  geometry: Conv2dGeometry,
  bias: boolean,
  offsets: readonly [number, number, number, number],
): Program {
  const [N, C, H, W] = shapes.x, [M, Cg, KH, KW] = shapes.w, [, , OH, OW] = shapes.out;
  const total = N * M * OH * OW;
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
    key: `conv2d:${bias ? "bias" : "plain"}`,
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
      if (py < 0 || u32(py) % u.ih != 0u) { continue; }
      let iy = u32(py) / u.ih;
      if (iy >= u.H) { continue; }
      for (var kx = 0u; kx < u.KW; kx++) {
        let px = i32(ox * u.sw + kx * u.dw) - i32(u.pw);
        if (px < 0 || u32(px) % u.iw != 0u) { continue; }
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

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
import type { Conv2dEpilogueStep, Conv2dGeometry } from "../kernel_backend.ts";

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

/**
 * Whether a convolution goes through `im2colProgram` and the matmul
 * template: an ordinary one (not transposed) of one group with more than
 * one multiply-add per output, where the direct kernel's one thread per
 * output redoes every window's loads (3×3 convolutions of 96 channels were
 * most of a detector's 14 s on llvmpipe).
 */
export function viaIm2col(shapes: Conv2dShapes, geometry: Conv2dGeometry): boolean {
  return geometry.groups === 1 && geometry.inputDilations.every((d) => d === 1) &&
    !isPointwise(shapes, geometry);
}

/**
 * The windows of `x [N, C, H, W]` as `cols [N, C·KH·KW, OH·OW]` (0 in the
 * padding), one thread per element: bindings x, cols.
 */
export function im2colProgram(
  shapes: Conv2dShapes,
  geometry: Conv2dGeometry,
  offX: number,
  offCols: number,
): Program {
  const [N, C, H, W] = shapes.x, [, , KH, KW] = shapes.w, [, , OH, OW] = shapes.out;
  const total = N * C * KH * KW * OH * OW;
  const fields = ["C", "H", "W", "KH", "KW", "OH", "OW", "sh", "sw", "ph", "pw", "dh", "dw"];
  return {
    key: "conv2d:im2col",
    source: () =>
      storage(0, "x", "f32", false) + storage(1, "cols", "f32", true) +
      uniformStruct([...fields, "offX", "offCols", "total"], 2) + mainHeader(WORKGROUP_SIZE) + `
  let idx = wg * ${WORKGROUP_SIZE}u + lid;
  if (idx >= u.total) { return; }
  let ox = idx % u.OW;
  var t = idx / u.OW;
  let oy = t % u.OH;
  t = t / u.OH;
  let kx = t % u.KW;
  t = t / u.KW;
  let ky = t % u.KH;
  t = t / u.KH;
  let c = t % u.C;
  let n = t / u.C;
  let iy = i32(oy * u.sh + ky * u.dh) - i32(u.ph);
  let ix = i32(ox * u.sw + kx * u.dw) - i32(u.pw);
  var v = 0.0;
  if (iy >= 0 && ix >= 0 && u32(iy) < u.H && u32(ix) < u.W) {
    v = x[u.offX + ((n * u.C + c) * u.H + u32(iy)) * u.W + u32(ix)];
  }
  cols[u.offCols + idx] = v;
}
`,
    inputs: 1,
    uniforms: new Uniforms().u32s([
      C,
      H,
      W,
      KH,
      KW,
      OH,
      OW,
      ...geometry.strides,
      ...geometry.padBegin,
      ...geometry.dilations,
      offX,
      offCols,
      total,
    ]).words(),
    workgroups: groupsFor(total, WORKGROUP_SIZE),
  };
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

/** WGSL for one epilogue step on `v`, its parameters uniform words `k` and `k + 1`. */
function stepSource(op: Conv2dEpilogueStep["op"], k: number): string {
  const a = `bitcast<f32>(u.p${k})`, b = `bitcast<f32>(u.p${k + 1})`;
  switch (op) {
    case "affine":
      return `v = ${a} * v + ${b};`;
    case "relu":
      return "v = select(v, 0.0, v < 0.0);";
    case "clip":
      return `v = min(max(v, ${a}), ${b});`;
    case "hardsigmoid":
      return `v = max(0.0, min(1.0, ${a} * v + ${b}));`;
    case "hardswish":
      return `v = v * min(max(v + ${a}, 0.0), ${b}) / ${b};`;
    case "sigmoid":
      return "v = 1.0 / (1.0 + exp(-v));";
  }
}

/**
 * A convolution's epilogue (`Conv2dGeometry.epilogue`) in place over
 * `out[offOut .. offOut + total)`: one pass for all steps. The steps make
 * the pipeline's key, their parameters are uniforms, so one pipeline serves
 * every convolution with the same steps. Binding: out.
 */
export function epilogueProgram(
  total: number,
  steps: readonly Conv2dEpilogueStep[],
  offOut: number,
): Program {
  const params = steps.flatMap((_, i) => [`p${2 * i}`, `p${2 * i + 1}`]);
  const uniforms = new Uniforms().u32s([total, offOut]);
  for (const { a, b } of steps) uniforms.f32(a).f32(b);
  return {
    key: `conv2d:epilogue:${steps.map((s) => s.op).join(",")}`,
    source: () =>
      storage(0, "out", "f32", true) + uniformStruct(["total", "offOut", ...params], 1) +
      mainHeader(WORKGROUP_SIZE) + `
  let i = wg * ${WORKGROUP_SIZE}u + lid;
  if (i >= u.total) { return; }
  var v = out[u.offOut + i];
  ${steps.map((st, k) => stepSource(st.op, 2 * k)).join("\n  ")}
  out[u.offOut + i] = v;
}
`,
    inputs: 0,
    uniforms: uniforms.words(),
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
  // Spaced with undilated kernels: the kernel rows (columns) that land on an input element are
  // every ih-th from the first, so the loops start there and step by ih, with no test.
  const phased = spaced && geometry.dilations.every((d) => d === 1);
  const first = (o: string, s: string, p: string, d: string) =>
    phased
      ? `u32((i32(u.${p}) % i32(u.${d}) - i32((${o} * u.${s}) % u.${d}) + i32(u.${d})) % i32(u.${d}))`
      : "0u";
  const step = (d: string) => phased ? `u.${d}` : "1u";
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
  // Kernel = input spacing, stride 1, padding K − 1, the output s times the input (a transposed
  // convolution of kernel = stride without overlap or crop): each output reads one kernel element.
  const onePhase = phased && KH === geometry.inputDilations[0] &&
    KW === geometry.inputDilations[1] &&
    geometry.strides.every((v) => v === 1) && geometry.padBegin[0] === KH - 1 &&
    geometry.padBegin[1] === KW - 1 && OH === H * KH && OW === W * KW;
  // A 1×1 window over channel groups of one (a depthwise scale: inference batch normalization),
  // stride 1, no padding: each output reads the input at its own position, with no loop.
  const scale = Cg === 1 && KH === 1 && KW === 1 && !spaced && OH === H && OW === W &&
    geometry.strides.every((v) => v === 1) && geometry.padBegin.every((v) => v === 0);
  const body = onePhase
    ? `
  let iy = oy / u.KH;
  let ix = ox / u.KW;
  let k = (u.KH - 1u - oy % u.KH) * u.KW + (u.KW - 1u - ox % u.KW);
  for (var c = 0u; c < u.Cg; c++) {
    sum += w[u.offW + (m * u.Cg + c) * u.KH * u.KW + k] *
      x[u.offX + ((n * u.C + g * u.Cg + c) * u.H + iy) * u.W + ix];
  }`
    : `
  for (var c = 0u; c < u.Cg; c++) {
    let xc = u.offX + (n * u.C + g * u.Cg + c) * u.H * u.W;
    let wc = u.offW + (m * u.Cg + c) * u.KH * u.KW;
    for (var ky = ${first("oy", "sh", "ph", "ih")}; ky < u.KH; ky += ${step("ih")}) {
      let py = i32(oy * u.sh + ky * u.dh) - i32(u.ph);
      if (py < 0${spaced && !phased ? " || u32(py) % u.ih != 0u" : ""}) { continue; }
      let iy = u32(py) / u.ih;
      if (iy >= u.H) { continue; }
      for (var kx = ${first("ox", "sw", "pw", "iw")}; kx < u.KW; kx += ${step("iw")}) {
        let px = i32(ox * u.sw + kx * u.dw) - i32(u.pw);
        if (px < 0${spaced && !phased ? " || u32(px) % u.iw != 0u" : ""}) { continue; }
        let ix = u32(px) / u.iw;
        if (ix >= u.W) { continue; }
        sum += w[wc + ky * u.KW + kx] * x[xc + iy * u.W + ix];
      }
    }
  }`;
  // The output's element `idx` is plane `idx / (OH·OW)` (image × channel) at offset `idx %
  // (OH·OW)`, which is where it reads its input plane: two divisions, where the loop's
  // header makes seven (llvmpipe divides lane by lane).
  const scaleSource = () =>
    storage(0, "x", "f32", false) + storage(1, "w", "f32", false) +
    storage(2, "b", "f32", false) + storage(3, "out", "f32", true) +
    uniformStruct(FIELDS, 4) + mainHeader(WORKGROUP_SIZE) + `
  let idx = wg * ${WORKGROUP_SIZE}u + lid;
  if (idx >= u.total) { return; }
  let plane = u.OH * u.OW;
  let p = idx / plane;
  let m = p % u.M;
  let xi = ((p - m) / u.M * u.C + m / u.Mg) * plane + (idx - p * plane);
  var sum = w[u.offW + m] * x[u.offX + xi];
  ${bias ? "sum += b[u.offB + m];" : ""}
  out[u.offOut + idx] = sum;
}
`;
  return {
    key: `conv2d:${bias ? "bias" : "plain"}:${
      scale ? "scale" : onePhase ? "one-phase" : phased ? "phased" : spaced ? "spaced" : "dense"
    }`,
    source: scale
      ? scaleSource
      : () =>
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
  ${body}
  ${bias ? "sum += b[u.offB + m];" : ""}
  out[u.offOut + idx] = sum;
}
`,
    inputs: 3,
    uniforms,
    workgroups: groupsFor(total, WORKGROUP_SIZE),
  };
}

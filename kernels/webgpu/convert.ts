/**
 * The convert template: `cast` between any two tensor dtypes, and `transpose`
 * of dtypes that are not 32-bit, on data WGSL cannot name. WGSL has no
 * 8-, 16- or 64-bit types, so both tensors are bound as `array<u32>` and
 * elements are cut out of and packed into words by hand:
 *
 * - 8- and 16-bit elements are bytes of a word. An output of such a type is
 *   written one *word* per thread (several elements at once), reading the
 *   word first so bytes of a neighbouring tensor that share an edge word
 *   survive; two threads never write the same word.
 * - float64 is a `vec2<u32>` (low word, high word) converted bit by bit:
 *   float32 → float64 is exact, float64 → float32 rounds to nearest even
 *   (with float32 subnormals), float64 → integer truncates and saturates.
 *
 * The conversion rules are the CPU kernel's (kernels/cpu/cast.ts): float →
 * integer truncates toward zero, saturates at the target's range and maps
 * NaN to 0; anything → bool is `x != 0`; integer → integer wraps; integer →
 * float rounds to nearest.
 *
 * The source is read through strides (as in the elementwise template), so a
 * transpose is a convert from a dtype to itself.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import { collapseDims } from "../broadcast.ts";
import { indexFields, indexValues, wgslIndices } from "./indexing.ts";
import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
} from "../../devices/webgpu/kernel_program.ts";

const WORKGROUP = 64;

type Kind = "float" | "double" | "signed" | "unsigned" | "bool";

interface TypeInfo {
  readonly bytes: 1 | 2 | 4 | 8;
  readonly kind: Kind;
}

const TYPES: Record<TensorDType, TypeInfo> = {
  float32: { bytes: 4, kind: "float" },
  float64: { bytes: 8, kind: "double" },
  int8: { bytes: 1, kind: "signed" },
  int16: { bytes: 2, kind: "signed" },
  int32: { bytes: 4, kind: "signed" },
  uint8: { bytes: 1, kind: "unsigned" },
  uint16: { bytes: 2, kind: "unsigned" },
  uint32: { bytes: 4, kind: "unsigned" },
  bool: { bytes: 1, kind: "bool" },
};

/** The WGSL type a loaded element has before conversion. */
function loadedType(t: TypeInfo): string {
  return t.kind === "float"
    ? "f32"
    : t.kind === "double"
    ? "vec2<u32>"
    : t.kind === "signed"
    ? "i32"
    : "u32";
}

/** WGSL `fn load(e: u32) -> S`: element `e` (counted from the buffer start) of the input. */
function loadSource(t: TypeInfo): string {
  const s = loadedType(t);
  switch (t.bytes) {
    case 8:
      return `fn load(e: u32) -> ${s} { return vec2<u32>(src[2u * e], src[2u * e + 1u]); }\n`;
    case 4:
      return `fn load(e: u32) -> ${s} { return bitcast<${s}>(src[e]); }\n`;
    default: {
      const bits = t.bytes * 8;
      const mask = bits === 8 ? "0xffu" : "0xffffu";
      const raw = `(src[(e * ${t.bytes}u) >> 2u] >> (((e * ${t.bytes}u) & 3u) * 8u)) & ${mask}`;
      // Signed: move the element's sign bit to bit 31, then shift back arithmetically.
      return t.kind === "signed"
        ? `fn load(e: u32) -> i32 { return bitcast<i32>((${raw}) << ${32 - bits}u) >> ${
          32 - bits
        }u; }\n`
        : `fn load(e: u32) -> u32 { return ${raw}; }\n`;
    }
  }
}

/** The result type of `convert`: f32 bits as a u32, a vec2 for float64. */
function resultType(t: TypeInfo): string {
  return t.bytes === 8 ? "vec2<u32>" : "u32";
}

const F32_TO_F64 = `fn f32ToF64(x: f32) -> vec2<u32> {
  let b = bitcast<u32>(x);
  let sign = b & 0x80000000u;
  let e = (b >> 23u) & 0xffu;
  let m = b & 0x7fffffu;
  if (e == 255u) { return vec2<u32>((m & 7u) << 29u, sign | 0x7ff00000u | (m >> 3u)); }
  if (e == 0u) {
    if (m == 0u) { return vec2<u32>(0u, sign); }
    // Subnormal: m * 2^-149 with leading bit p is 2^(p - 149) * 1.f
    let p = firstLeadingBit(m);
    let f = (m << (23u - p)) & 0x7fffffu;
    return vec2<u32>((f & 7u) << 29u, sign | ((p + 874u) << 20u) | (f >> 3u));
  }
  return vec2<u32>((m & 7u) << 29u, sign | ((e + 896u) << 20u) | (m >> 3u));
}
`;

const F64_TO_F32 = `fn f64ToF32(v: vec2<u32>) -> u32 {
  let lo = v.x;
  let hi = v.y;
  let sign = hi & 0x80000000u;
  let e = (hi >> 20u) & 0x7ffu;
  let mhi = hi & 0xfffffu;
  if (e == 0x7ffu) { return select(sign | 0x7f800000u, sign | 0x7fc00000u, (mhi | lo) != 0u); }
  let E = i32(e) - 1023;
  // float64 subnormals and anything below half the smallest float32 subnormal round to zero.
  if (e == 0u || E < -150) { return sign; }
  if (E > 127) { return sign | 0x7f800000u; }
  // 24-bit significand and the 29 bits below it.
  let sig = (1u << 23u) | (mhi << 3u) | (lo >> 29u);
  let rest = lo & 0x1fffffffu;
  var be = E + 127;
  var shift = 0u;
  if (be <= 0) { shift = u32(1 - be); be = 0; }
  var kept = sig;
  var roundBit = (rest >> 28u) != 0u;
  var sticky = (rest & 0x0fffffffu) != 0u;
  if (shift > 0u) {
    kept = sig >> shift;
    roundBit = ((sig >> (shift - 1u)) & 1u) != 0u;
    sticky = (sig & ((1u << (shift - 1u)) - 1u)) != 0u || rest != 0u;
  }
  let up = select(0u, 1u, roundBit && (sticky || (kept & 1u) != 0u));
  // A carry out of the significand bumps the exponent, up to infinity: exactly right.
  if (be == 0) { return sign | (kept + up); }
  return sign | ((u32(be) << 23u) + (kept & 0x7fffffu) + up);
}
`;

const INT_TO_F64 = `fn magToF64(mag: u32, neg: bool) -> vec2<u32> {
  if (mag == 0u) { return vec2<u32>(0u, 0u); }
  let p = firstLeadingBit(mag);
  let rest = mag ^ (1u << p);
  var mh = rest << (20u - min(p, 20u));
  var ml = 0u;
  if (p > 20u) {
    mh = rest >> (p - 20u);
    ml = rest << (52u - p);
  }
  return vec2<u32>(ml, select(0u, 0x80000000u, neg) | ((p + 1023u) << 20u) | mh);
}
`;

/** Range of an integer target, as WGSL constants. */
function intLimits(to: TensorDType): { lo: number; hi: number } {
  const t = TYPES[to];
  const bits = t.bytes * 8;
  return t.kind === "signed"
    ? { lo: -(2 ** (bits - 1)), hi: 2 ** (bits - 1) - 1 }
    : { lo: 0, hi: 2 ** bits - 1 };
}

/** WGSL `fn convert(x: S) -> R` for one dtype pair, plus any helpers it needs. */
function convertSource(from: TensorDType, to: TensorDType): string {
  const f = TYPES[from], t = TYPES[to];
  const s = loadedType(f), r = resultType(t);
  const fn = (body: string, helpers = "") =>
    `${helpers}fn convert(x: ${s}) -> ${r} {\n  ${body}\n}\n`;
  if (from === to) return fn(f.bytes === 8 ? "return x;" : "return bitcast<u32>(x);");
  if (to === "bool") {
    if (f.kind === "float") return fn("return select(0u, 1u, x != 0.0);");
    if (f.kind === "double") return fn("return select(0u, 1u, ((x.y & 0x7fffffffu) | x.x) != 0u);");
    return fn(`return select(0u, 1u, x != ${s}(0));`);
  }
  if (t.kind === "float") {
    if (f.kind === "double") return fn("return f64ToF32(x);", F64_TO_F32);
    return fn("return bitcast<u32>(f32(x));");
  }
  if (t.kind === "double") {
    if (f.kind === "float") return fn("return f32ToF64(x);", F32_TO_F64);
    if (f.kind === "signed") {
      return fn("return magToF64(select(u32(x), 0u - bitcast<u32>(x), x < 0), x < 0);", INT_TO_F64);
    }
    return fn("return magToF64(x, false);", INT_TO_F64);
  }
  // Integer targets.
  const { lo, hi } = intLimits(to);
  const loBits = `${lo >>> 0}u`, hiBits = `${hi >>> 0}u`;
  if (f.kind === "float") {
    const cast = t.kind === "signed" ? "bitcast<u32>(i32(x))" : "u32(x)";
    return fn(
      `if (x != x) { return 0u; }
  if (x <= ${lo}.0) { return ${loBits}; }
  if (x >= ${hi}.0) { return ${hiBits}; }
  return ${cast};`,
    );
  }
  if (f.kind === "double") {
    // Truncated magnitude from the bits; 2^32 and beyond (and infinities) saturate.
    return fn(
      `let neg = (x.y >> 31u) == 1u;
  let e = (x.y >> 20u) & 0x7ffu;
  let mhi = x.y & 0xfffffu;
  if (e == 0x7ffu && (mhi | x.x) != 0u) { return 0u; }
  var mag = 0u;
  let huge = e >= 1055u;
  if (e >= 1023u && !huge) {
    let s = 1075u - e;
    let top = mhi | 0x100000u;
    if (s >= 32u) { mag = top >> (s - 32u); } else { mag = (top << (32u - s)) | (x.x >> s); }
  }
  if (neg) {
    if (huge || mag > ${-lo}u) { return ${loBits}; }
    return 0u - mag;
  }
  if (huge || mag > ${hiBits}) { return ${hiBits}; }
  return mag;`,
    );
  }
  // Integer or bool → integer: keep the low bits (the store truncates to the target width).
  return fn("return bitcast<u32>(x);");
}

/** Shapes, strides and byte offsets of one conversion. */
export interface ConvertArgs {
  /** Source dtype. */
  from: TensorDType;
  /** Target dtype. */
  to: TensorDType;
  /** Output shape (contiguous). */
  shape: readonly number[];
  /** Source strides over the output's axes, in elements. */
  strides: readonly number[];
  /** Source byte offset. */
  srcByte: number;
  /** Output byte offset. */
  dstByte: number;
}

/** The program converting (and possibly permuting) one tensor. */
export function convertProgram(args: ConvertArgs): Program {
  const { from, to, shape, strides, srcByte, dstByte } = args;
  const f = TYPES[from], t = TYPES[to];
  if (srcByte % f.bytes !== 0 || dstByte % Math.min(t.bytes, 4) !== 0) {
    throw new RangeError(
      `Cannot convert ${from} → ${to} at byte offsets ${srcByte} → ${dstByte}: misaligned`,
    );
  }
  let n = 1;
  for (const d of shape) n *= d;
  const space = collapseDims(shape, [strides]);
  const rank = space.shape.length;
  const srcElem = Math.floor(srcByte / f.bytes);
  const wide = t.bytes >= 4;
  const firstWord = Math.floor(dstByte / 4);
  const words = Math.ceil((dstByte + n * t.bytes) / 4) - firstWord;
  const threads = wide ? n : words;
  const fields = ["n", "dstByte", "firstWord", "threads", ...indexFields(rank, 1)];
  return {
    key: `convert:${from}>${to}:r${rank}`,
    source: () => {
      let src = storage(0, "src", "u32", false) + storage(1, "out", "u32", true) +
        uniformStruct(fields, 2) + loadSource(f) + convertSource(from, to) +
        `fn srcIndex(idx: u32) -> u32 {\n${wgslIndices(rank, 1)}  return i0;\n}\n` +
        mainHeader(WORKGROUP) +
        `  let k = wg * ${WORKGROUP}u + lid;\n  if (k >= u.threads) { return; }\n`;
      if (t.bytes === 8) {
        src += `  let v = convert(load(srcIndex(k)));
  let o = u.dstByte / 4u + 2u * k;
  out[o] = v.x;
  out[o + 1u] = v.y;
}
`;
      } else if (wide) {
        src += `  out[u.dstByte / 4u + k] = convert(load(srcIndex(k)));\n}\n`;
      } else {
        const per = 4 / t.bytes, mask = t.bytes === 1 ? "0xffu" : "0xffffu";
        src += `  let w = u.firstWord + k;
  var word = out[w];
  for (var j = 0u; j < ${per}u; j++) {
    let b = w * 4u + j * ${t.bytes}u;
    if (b >= u.dstByte && b - u.dstByte < u.n * ${t.bytes}u) {
      let e = (b - u.dstByte) / ${t.bytes}u;
      let v = convert(load(srcIndex(e))) & ${mask};
      let sh = (b & 3u) * 8u;
      word = (word & ~(${mask} << sh)) | (v << sh);
    }
  }
  out[w] = word;
}
`;
      }
      return src;
    },
    inputs: 1,
    uniforms: new Uniforms()
      .u32s([n, dstByte, firstWord, threads])
      .u32s(indexValues([srcElem], space))
      .words(),
    workgroups: groupsFor(threads, WORKGROUP),
  };
}

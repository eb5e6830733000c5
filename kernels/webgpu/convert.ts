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
 * - float64 and int64 are a `vec2<u32>` (low word, high word) converted bit
 *   by bit: float32 → float64 is exact, float64 → float32 rounds to nearest
 *   even (with float32 subnormals), float → int64 truncates and saturates,
 *   int64 → float rounds once to nearest even from the exact integer.
 * - float16 and bfloat16 are 16-bit words converted bit by bit too, so no
 *   device feature (`shader-f16`) is needed and every GPU rounds as the CPU
 *   does: to them, round to nearest even from the float32 value (overflow to
 *   infinity, NaN kept); from them, exactly.
 *
 * The conversion rules are the CPU kernel's (kernels/cpu/cast.ts): float →
 * integer truncates toward zero, saturates at the target's range and maps
 * NaN to 0; anything → bool is `x != 0`; integer → integer wraps; integer →
 * float rounds to nearest.
 *
 * Every source is first read as one of five base values — float32 bits,
 * float64 (`vec2`), i32, u32, int64 (`vec2`) — and each target has one rule
 * per base.
 *
 * The source is read through strides (as in the elementwise template), so a
 * transpose is a convert from a dtype to itself.
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
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";

type Kind =
  | "float"
  | "double"
  | "signed"
  | "unsigned"
  | "bool"
  | "half"
  | "bfloat"
  | "int64";

interface TypeInfo {
  readonly bytes: 1 | 2 | 4 | 8;
  readonly kind: Kind;
}

const TYPES: Record<TensorDType, TypeInfo> = {
  float32: { bytes: 4, kind: "float" },
  float64: { bytes: 8, kind: "double" },
  float16: { bytes: 2, kind: "half" },
  bfloat16: { bytes: 2, kind: "bfloat" },
  int8: { bytes: 1, kind: "signed" },
  int16: { bytes: 2, kind: "signed" },
  int32: { bytes: 4, kind: "signed" },
  int64: { bytes: 8, kind: "int64" },
  uint8: { bytes: 1, kind: "unsigned" },
  uint16: { bytes: 2, kind: "unsigned" },
  uint32: { bytes: 4, kind: "unsigned" },
  bool: { bytes: 1, kind: "bool" },
};

/** The WGSL type a loaded element has before conversion. */
function loadedType(t: TypeInfo): string {
  return t.kind === "float"
    ? "f32"
    : t.bytes === 8
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

/** The result type of `convert`: the element's bits as a u32, a vec2 for 64-bit targets. */
function resultType(t: TypeInfo): string {
  return t.bytes === 8 ? "vec2<u32>" : "u32";
}

/**
 * The WGSL helpers, each with the helpers it calls. Every one works on bits
 * (u32 words, vec2 for 64 bits) so no float operation can flush a subnormal
 * or quiet a NaN on the way.
 */
const HELPERS: Record<string, { deps: string[]; source: string }> = {
  f32ToF64: {
    deps: [],
    source: `fn f32ToF64(b: u32) -> vec2<u32> {
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
`,
  },
  f64ToF32: {
    deps: [],
    source: `fn f64ToF32(v: vec2<u32>) -> u32 {
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
`,
  },
  magToF64: {
    deps: [],
    source: `fn magToF64(mag: u32, neg: bool) -> vec2<u32> {
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
`,
  },
  f16ToF32: {
    deps: [],
    source: `fn f16ToF32(h: u32) -> u32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0x1fu) { return sign | 0x7f800000u | (m << 13u); }
  if (e == 0u) {
    if (m == 0u) { return sign; }
    // Subnormal: m * 2^-24 with leading bit p is 2^(p - 24) * 1.f
    let p = firstLeadingBit(m);
    return sign | ((p + 103u) << 23u) | ((m << (23u - p)) & 0x7fffffu);
  }
  return sign | ((e + 112u) << 23u) | (m << 13u);
}
`,
  },
  f32ToF16: {
    deps: [],
    source: `fn f32ToF16(b: u32) -> u32 {
  let sign = (b >> 16u) & 0x8000u;
  let e = (b >> 23u) & 0xffu;
  let m = b & 0x7fffffu;
  if (e == 255u) { return select(sign | 0x7c00u, sign | 0x7e00u | (m >> 13u), m != 0u); }
  let E = i32(e) - 112;
  if (E >= 31) { return sign | 0x7c00u; }
  if (E <= 0) {
    // A half subnormal (or zero): shift the whole significand, round to nearest even.
    if (E < -10) { return sign; }
    let full = m | 0x800000u;
    let shift = u32(14 - E);
    let h = full >> shift;
    let rest = full & ((1u << shift) - 1u);
    let halfway = 1u << (shift - 1u);
    let up = rest > halfway || (rest == halfway && (h & 1u) == 1u);
    return sign | (h + select(0u, 1u, up));
  }
  let h = (u32(E) << 10u) | (m >> 13u);
  let rest = m & 0x1fffu;
  let up = rest > 0x1000u || (rest == 0x1000u && (h & 1u) == 1u);
  // A carry out of the significand bumps the exponent, up to infinity: exactly right.
  return sign | (h + select(0u, 1u, up));
}
`,
  },
  f32ToBf16: {
    deps: [],
    source: `fn f32ToBf16(b: u32) -> u32 {
  if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
`,
  },
  int64Ops: {
    deps: [],
    source: `fn neg64(v: vec2<u32>) -> vec2<u32> {
  let lo = ~v.x + 1u;
  return vec2<u32>(lo, ~v.y + select(0u, 1u, lo == 0u));
}
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn shr64(v: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return v; }
  if (s >= 32u) { return vec2<u32>(v.y >> (s - 32u), 0u); }
  return vec2<u32>((v.x >> s) | (v.y << (32u - s)), v.y >> s);
}
fn shl64(v: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return v; }
  if (s >= 32u) { return vec2<u32>(0u, v.x << (s - 32u)); }
  return vec2<u32>(v.x << s, (v.y << s) | (v.x >> (32u - s)));
}
// Whether any of the bits below position s are set.
fn below64(v: vec2<u32>, s: u32) -> bool {
  if (s == 0u) { return false; }
  if (s < 32u) { return (v.x & ((1u << s) - 1u)) != 0u; }
  if (s == 32u) { return v.x != 0u; }
  return v.x != 0u || (v.y & ((1u << (s - 32u)) - 1u)) != 0u;
}
fn lead64(v: vec2<u32>) -> u32 {
  if (v.y != 0u) { return 32u + firstLeadingBit(v.y); }
  return firstLeadingBit(v.x);
}
fn mag64(v: vec2<u32>) -> vec2<u32> { return select(v, neg64(v), (v.y >> 31u) == 1u); }
`,
  },
  i64ToF32: {
    deps: ["int64Ops"],
    source: `fn i64ToF32(v: vec2<u32>) -> u32 {
  let sign = v.y & 0x80000000u;
  let m = mag64(v);
  if ((m.x | m.y) == 0u) { return 0u; }
  let p = lead64(m);
  if (p <= 23u) { return sign | ((p + 127u) << 23u) | ((m.x << (23u - p)) & 0x7fffffu); }
  let s = p - 23u;
  let kept = shr64(m, s).x;
  let roundBit = (shr64(m, s - 1u).x & 1u) == 1u;
  let up = select(0u, 1u, roundBit && (below64(m, s - 1u) || (kept & 1u) == 1u));
  return sign | (((p + 127u) << 23u) + (kept & 0x7fffffu) + up);
}
`,
  },
  i64ToF64: {
    deps: ["int64Ops"],
    source: `fn i64ToF64(v: vec2<u32>) -> vec2<u32> {
  let sign = v.y & 0x80000000u;
  let m = mag64(v);
  if ((m.x | m.y) == 0u) { return vec2<u32>(0u, 0u); }
  let p = lead64(m);
  var kept = m;
  var up = 0u;
  if (p <= 52u) {
    kept = shl64(m, 52u - p);
  } else {
    let s = p - 52u;
    kept = shr64(m, s);
    let roundBit = (shr64(m, s - 1u).x & 1u) == 1u;
    up = select(0u, 1u, roundBit && (below64(m, s - 1u) || (kept.x & 1u) == 1u));
  }
  // Exponent over the significand without its leading bit; a rounding carry bumps the exponent.
  let bits = add64(vec2<u32>(kept.x, kept.y & 0xfffffu), vec2<u32>(up, (p + 1023u) << 20u));
  return vec2<u32>(bits.x, bits.y | sign);
}
`,
  },
  f32ToI64: {
    deps: ["int64Ops"],
    source: `fn f32ToI64(b: u32) -> vec2<u32> {
  let e = (b >> 23u) & 0xffu;
  let m = b & 0x7fffffu;
  let neg = (b >> 31u) == 1u;
  if (e == 255u && m != 0u) { return vec2<u32>(0u, 0u); }
  if (e < 127u) { return vec2<u32>(0u, 0u); }
  if (e >= 190u) { return select(vec2<u32>(0xffffffffu, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), neg); }
  let sig = vec2<u32>(m | 0x800000u, 0u);
  let E = e - 127u;
  var mag = shr64(sig, 23u - min(E, 23u));
  if (E > 23u) { mag = shl64(sig, E - 23u); }
  return select(mag, neg64(mag), neg);
}
`,
  },
  f64ToI64: {
    deps: ["int64Ops"],
    source: `fn f64ToI64(v: vec2<u32>) -> vec2<u32> {
  let e = (v.y >> 20u) & 0x7ffu;
  let mhi = v.y & 0xfffffu;
  let neg = (v.y >> 31u) == 1u;
  if (e == 0x7ffu && (mhi | v.x) != 0u) { return vec2<u32>(0u, 0u); }
  if (e < 1023u) { return vec2<u32>(0u, 0u); }
  if (e >= 1086u) { return select(vec2<u32>(0xffffffffu, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), neg); }
  let sig = vec2<u32>(v.x, mhi | 0x100000u);
  let E = e - 1023u;
  var mag = shr64(sig, 52u - min(E, 52u));
  if (E > 52u) { mag = shl64(sig, E - 52u); }
  return select(mag, neg64(mag), neg);
}
`,
  },
};

/** The source of `names` and the helpers they call, each once. */
function helperSources(names: readonly string[]): string {
  const seen = new Set<string>();
  let out = "";
  const add = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    for (const d of HELPERS[name].deps) add(d);
    out += HELPERS[name].source;
  };
  names.forEach(add);
  return out;
}

/** What every source is read as before conversion. */
type Base = "f32bits" | "f64" | "i32" | "u32" | "i64";

/** The base of a source and the WGSL expression turning a loaded element `x` into it. */
function baseOf(t: TypeInfo): { base: Base; read: string; helpers: string[] } {
  switch (t.kind) {
    case "float":
      return { base: "f32bits", read: "bitcast<u32>(x)", helpers: [] };
    case "half":
      return { base: "f32bits", read: "f16ToF32(x)", helpers: ["f16ToF32"] };
    case "bfloat":
      return { base: "f32bits", read: "x << 16u", helpers: [] };
    case "double":
      return { base: "f64", read: "x", helpers: [] };
    case "int64":
      return { base: "i64", read: "x", helpers: [] };
    case "signed":
      return { base: "i32", read: "x", helpers: [] };
    default:
      return { base: "u32", read: "x", helpers: [] };
  }
}

/** The float32 bits of base value `v`, rounded to nearest even where needed. */
const F32_BITS: Record<Base, [string, string[]]> = {
  f32bits: ["v", []],
  f64: ["f64ToF32(v)", ["f64ToF32"]],
  i32: ["bitcast<u32>(f32(v))", []],
  u32: ["bitcast<u32>(f32(v))", []],
  i64: ["i64ToF32(v)", ["i64ToF32"]],
};

/** The body converting base value `v` to target `t`, and the helpers it calls. */
function targetBody(base: Base, to: TensorDType): [string, string[]] {
  const t = TYPES[to];
  const [f32, f32Helpers] = F32_BITS[base];
  switch (t.kind) {
    case "bool":
      return [
        {
          f32bits: "return select(0u, 1u, (v & 0x7fffffffu) != 0u);",
          f64: "return select(0u, 1u, ((v.y & 0x7fffffffu) | v.x) != 0u);",
          i32: "return select(0u, 1u, v != 0);",
          u32: "return select(0u, 1u, v != 0u);",
          i64: "return select(0u, 1u, (v.x | v.y) != 0u);",
        }[base],
        [],
      ];
    case "float":
      return [`return ${f32};`, f32Helpers];
    case "half":
      return [`return f32ToF16(${f32});`, [...f32Helpers, "f32ToF16"]];
    case "bfloat":
      return [`return f32ToBf16(${f32});`, [...f32Helpers, "f32ToBf16"]];
    case "double":
      return {
        f32bits: ["return f32ToF64(v);", ["f32ToF64"]],
        f64: ["return v;", []],
        i32: ["return magToF64(select(u32(v), 0u - bitcast<u32>(v), v < 0), v < 0);", [
          "magToF64",
        ]],
        u32: ["return magToF64(v, false);", ["magToF64"]],
        i64: ["return i64ToF64(v);", ["i64ToF64"]],
      }[base] as [string, string[]];
    case "int64":
      return {
        f32bits: ["return f32ToI64(v);", ["f32ToI64"]],
        f64: ["return f64ToI64(v);", ["f64ToI64"]],
        i32: ["return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));", []],
        u32: ["return vec2<u32>(v, 0u);", []],
        i64: ["return v;", []],
      }[base] as [string, string[]];
  }
  // Integer targets of 32 bits or fewer: floats saturate, integers keep their low bits
  // (the store truncates them to the target's width).
  const { lo, hi } = intLimits(to);
  const loBits = `${lo >>> 0}u`, hiBits = `${hi >>> 0}u`;
  switch (base) {
    case "f32bits": {
      const cast = t.kind === "signed" ? "bitcast<u32>(i32(y))" : "u32(y)";
      return [
        // NaN by its bits: compilers that assume no NaN fold `y != y` to false.
        `if ((v & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  let y = bitcast<f32>(v);
  if (y <= ${lo}.0) { return ${loBits}; }
  if (y >= ${hi}.0) { return ${hiBits}; }
  return ${cast};`,
        [],
      ];
    }
    case "f64":
      // Truncated magnitude from the bits; 2^32 and beyond (and infinities) saturate.
      return [
        `let neg = (v.y >> 31u) == 1u;
  let e = (v.y >> 20u) & 0x7ffu;
  let mhi = v.y & 0xfffffu;
  if (e == 0x7ffu && (mhi | v.x) != 0u) { return 0u; }
  var mag = 0u;
  let huge = e >= 1055u;
  if (e >= 1023u && !huge) {
    let s = 1075u - e;
    let top = mhi | 0x100000u;
    if (s >= 32u) { mag = top >> (s - 32u); } else { mag = (top << (32u - s)) | (v.x >> s); }
  }
  if (neg) {
    if (huge || mag > ${-lo}u) { return ${loBits}; }
    return 0u - mag;
  }
  if (huge || mag > ${hiBits}) { return ${hiBits}; }
  return mag;`,
        [],
      ];
    case "i64":
      return ["return v.x;", []];
    default:
      return ["return bitcast<u32>(v);", []];
  }
}

/** Range of an integer target, as WGSL constants. */
function intLimits(to: TensorDType): { lo: number; hi: number } {
  const t = TYPES[to];
  const bits = t.bytes * 8;
  return t.kind === "signed"
    ? { lo: -(2 ** (bits - 1)), hi: 2 ** (bits - 1) - 1 }
    : { lo: 0, hi: 2 ** bits - 1 };
}

/** WGSL `fn convert(x: S) -> R` for one dtype pair, plus the helpers it needs. */
function convertSource(from: TensorDType, to: TensorDType): string {
  const f = TYPES[from], t = TYPES[to];
  const s = loadedType(f), r = resultType(t);
  if (from === to) {
    return `fn convert(x: ${s}) -> ${r} {\n  ${
      f.bytes === 8 ? "return x;" : "return bitcast<u32>(x);"
    }\n}\n`;
  }
  const { base, read, helpers } = baseOf(f);
  const [body, bodyHelpers] = targetBody(base, to);
  return `${helperSources([...helpers, ...bodyHelpers])}fn convert(x: ${s}) -> ${r} {
  let v = ${read};
  ${body}
}
`;
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
        mainHeader(WORKGROUP_SIZE) +
        `  let k = wg * ${WORKGROUP_SIZE}u + lid;\n  if (k >= u.threads) { return; }\n`;
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
    workgroups: groupsFor(threads, WORKGROUP_SIZE),
  };
}

/**
 * The 8- and 4-bit number formats relaxvm has no dtype for (ONNX's float8
 * types, FLOAT8E8M0, FLOAT4E2M1, INT4, UINT4) and their conversions from and to
 * ordinary numbers, as ONNX's reference computes them (through
 * `ml_dtypes`): round to nearest, ties to even; past the largest finite
 * value, infinity where the format has one and NaN where it does not, or
 * the largest value when saturating; FLOAT4E2M1 always saturates; INT4 and
 * UINT4 truncate toward zero and wrap, as a C cast does. A float format's
 * element is held as its bit pattern in a uint8 tensor; INT4 and UINT4 as
 * their values in int8 and uint8 tensors.
 *
 * @module
 */

/** The formats, by ONNX's names in lower case. */
export const LOW_PRECISION_FORMATS = [
  "float8e4m3fn",
  "float8e4m3fnuz",
  "float8e5m2",
  "float8e5m2fnuz",
  "float4e2m1",
  "float8e8m0",
  "int4",
  "uint4",
] as const;

/** How FLOAT8E8M0 rounds a value between two powers of 2 (ONNX's `Cast` `round_mode`). */
export type RoundMode = "up" | "down" | "nearest";

/** One of `LOW_PRECISION_FORMATS`. */
export type LowPrecisionFormat = (typeof LOW_PRECISION_FORMATS)[number];

/** A float format's layout and what its special codes mean. */
interface FloatLayout {
  readonly bits: number;
  readonly exp: number;
  readonly man: number;
  readonly bias: number;
  /** `ieee`: all-ones exponent is inf/NaN; `fn`: only all-ones is NaN; `fnuz`: -0's code is NaN; `finite`: neither. */
  readonly kind: "ieee" | "fn" | "fnuz" | "finite";
}

const LAYOUTS: Readonly<Record<string, FloatLayout>> = {
  float8e4m3fn: { bits: 8, exp: 4, man: 3, bias: 7, kind: "fn" },
  float8e4m3fnuz: { bits: 8, exp: 4, man: 3, bias: 8, kind: "fnuz" },
  float8e5m2: { bits: 8, exp: 5, man: 2, bias: 15, kind: "ieee" },
  float8e5m2fnuz: { bits: 8, exp: 5, man: 2, bias: 16, kind: "fnuz" },
  float4e2m1: { bits: 4, exp: 2, man: 1, bias: 1, kind: "finite" },
};

/** Whether `format` is one of the float formats (held as bits) rather than INT4/UINT4. */
export function isFloatFormat(format: LowPrecisionFormat): boolean {
  return Object.hasOwn(LAYOUTS, format) || format === "float8e8m0";
}

const f32 = new Float32Array(1), f32Bits = new Uint32Array(f32.buffer);

/**
 * FLOAT8E8M0 (an unsigned power of 2, 2^(code − 127); 0xFF is NaN) of `v`,
 * as ONNX's `to_float8e8m0` computes it from float32's bits: the exponent
 * field, rounded by `mode` (its masks kept as the reference has them),
 * held below 0xFF when `saturate`; NaN and infinities give 0xFF.
 */
function encodeE8M0(v: number, saturate: boolean, mode: RoundMode): number {
  f32[0] = v;
  const bits = f32Bits[0];
  let exponent = (bits >>> 23) & 0xff;
  if (exponent === 0xff) return 0xff;
  let up = false;
  if (mode === "nearest") {
    const g = (bits & 0x400000) !== 0, r = (bits & 0x200000) !== 0, s = (bits & 0x1fffff) !== 0;
    up = g && (r || s || exponent > 0);
  } else if (mode === "up") up = (bits & 0x4fffff) !== 0;
  if (up && !(saturate && exponent === 0xfe)) exponent += 1;
  return exponent & 0xff;
}

/** The value of `code` in float layout `f`. */
function decodeWith(f: FloatLayout, code: number): number {
  const signBit = 1 << (f.bits - 1);
  const sign = code & signBit ? -1 : 1;
  const e = (code >> f.man) & ((1 << f.exp) - 1), m = code & ((1 << f.man) - 1);
  const top = (1 << f.exp) - 1;
  if (f.kind === "fnuz" && code === signBit) return NaN;
  if (f.kind === "fn" && e === top && m === (1 << f.man) - 1) return NaN;
  if (f.kind === "ieee" && e === top) return m === 0 ? sign * Infinity : NaN;
  const magnitude = e === 0
    ? m * 2 ** (1 - f.bias - f.man)
    : (1 + m / 2 ** f.man) * 2 ** (e - f.bias);
  return sign * magnitude;
}

/** Per layout: the non-negative finite values by code, then one more (the first past them). */
const TABLES = new Map<FloatLayout, number[]>();

function tableOf(f: FloatLayout): number[] {
  let t = TABLES.get(f);
  if (t === undefined) {
    t = [];
    for (let c = 0; c < 1 << (f.bits - 1); c++) {
      const v = decodeWith(f, c);
      if (!Number.isFinite(v)) break;
      t.push(v);
    }
    // The value the next code would have: rounding to it overflows.
    t.push(2 * t[t.length - 1] - t[t.length - 2]);
    TABLES.set(f, t);
  }
  return t;
}

/**
 * The code of `v` in float format `format`, rounded to nearest with ties to
 * even; `saturate` (always, for FLOAT4E2M1) clamps to the largest finite
 * value first.
 */
function encodeWith(f: FloatLayout, v: number, saturate: boolean): number {
  const signBit = 1 << (f.bits - 1);
  if (Number.isNaN(v)) {
    // ml_dtypes: fn's all-ones, IEEE's quiet NaN, fnuz's -0 code; FLOAT4E2M1 (no NaN) -0.
    if (f.kind === "fn") return 0x7f;
    if (f.kind === "ieee") return 0x7e;
    return signBit;
  }
  const negative = v < 0 || Object.is(v, -0);
  const table = tableOf(f), top = table.length - 2;
  let a = Math.abs(v);
  if ((saturate || f.kind === "finite") && a > table[top]) a = table[top];
  let code: number;
  if (a >= table[top + 1]) code = top + 1;
  else {
    // The last code whose value is <= a, then the nearer of it and the next (ties to even).
    let lo = 0, hi = top + 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (table[mid] <= a) lo = mid;
      else hi = mid;
    }
    const below = a - table[lo], above = table[lo + 1] - a;
    code = below < above || (below === above && lo % 2 === 0) ? lo : lo + 1;
  }
  if (code > top) {
    if (f.kind === "ieee") return (negative ? signBit : 0) | (0x7c);
    if (f.kind === "fn") return (negative ? signBit : 0) | 0x7f;
    return signBit; // fnuz: NaN
  }
  if (code === 0 && f.kind === "fnuz") return 0; // no negative zero
  return (negative ? signBit : 0) | code;
}

/** The number `code` (of `format`) stands for; INT4/UINT4 codes are their values. */
export function decodeLowPrecision(format: LowPrecisionFormat, code: number): number {
  if (format === "float8e8m0") return code === 0xff ? NaN : 2 ** (code - 127);
  return isFloatFormat(format) ? decodeWith(LAYOUTS[format], code) : code;
}

/**
 * `v` in `format`: a float format's code (`saturate`: clamp to its largest
 * finite value rather than overflow), or INT4/UINT4's value, truncated
 * toward zero and wrapped to 4 bits (NaN and infinities give 0).
 */
export function encodeLowPrecision(
  format: LowPrecisionFormat,
  v: number,
  saturate: boolean,
  mode: RoundMode = "up",
): number {
  if (format === "float8e8m0") return encodeE8M0(v, saturate, mode);
  if (isFloatFormat(format)) return encodeWith(LAYOUTS[format], v, saturate);
  if (!Number.isFinite(v)) return 0;
  const w = ((Math.trunc(v) % 16) + 16) % 16;
  return format === "int4" && w >= 8 ? w - 16 : w;
}

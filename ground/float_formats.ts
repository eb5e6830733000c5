/**
 * Bit conversions of the 16-bit float formats that tensors are stored in
 * but JavaScript cannot compute in: bfloat16 (float32's top 16 bits).
 *
 * @module
 */

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** `0x7F7F0000`: the largest finite bfloat16, as a float32. */
const BF16_LIMIT = 3.3895313892515355e38;

/**
 * The bfloat16 bits tvmjs's `dump_tensor_cache` writes for a float32 value
 * (`f32-to-bf16` caches): round to nearest, ties to even, for finite values
 * below the largest bfloat16 in magnitude; otherwise the top 16 bits as they
 * are, which keeps infinities and NaN (with a payload in the top bits) and
 * clips larger finite values to ±3.39e38 instead of rounding them to infinity.
 */
export function float32ToBfloat16Bits(value: number): number {
  scratch[0] = value;
  const bits = scratchBits[0];
  if (-BF16_LIMIT < scratch[0] && scratch[0] < BF16_LIMIT) {
    return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return bits >>> 16;
}

/** The float32 value of bfloat16 bits (exact: the bits become float32's top half). */
export function bfloat16BitsToFloat32(bits: number): number {
  scratchBits[0] = (bits & 0xffff) << 16;
  return scratch[0];
}

/**
 * The float32 values of a whole array of bfloat16 bits, in a new `Float32Array`.
 * A loop, never `Float32Array.from(bits, f)`: with a mapping function V8
 * first collects every element in a JS array, which cannot hold much beyond
 * 2^27 elements, and the process dies ("invalid array length").
 */
export function bfloat16ArrayToFloat32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  const outBits = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) outBits[i] = bits[i] << 16;
  return out;
}

/**
 * The bfloat16 bits nearest to a float32 value, as a cast computes them:
 * round to nearest, ties to even; values beyond the largest bfloat16 round
 * to infinity; NaN stays a (quiet) NaN. (TVM's compiled casts round the same
 * way; `float32ToBfloat16Bits` is the tensor cache writer's rule.)
 */
export function float32ToBfloat16BitsRounded(value: number): number {
  scratch[0] = value;
  const bits = scratchBits[0];
  if (Number.isNaN(scratch[0])) return ((bits >>> 16) | 0x0040) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * The IEEE binary16 bits nearest to `value`: round to nearest, ties to even
 * (subnormals included), beyond 65504 to infinity, NaN to a quiet NaN
 * keeping the top payload bits — what `Float16Array` stores.
 */
export function float32ToFloat16Bits(value: number): number {
  scratch[0] = value; // float32 first: a double is rounded once, to float32, as TVM's f32 input
  const bits = scratchBits[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) {
    return mantissa === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mantissa >>> 13);
  }
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow
  if (e <= 0) {
    // A subnormal half (or zero): shift the full significand and round to nearest even.
    if (e < -10) return sign;
    const full = mantissa | 0x800000;
    const shift = 14 - e;
    const half = full >>> shift;
    const rest = full & ((1 << shift) - 1), halfway = 1 << (shift - 1);
    const up = rest > halfway || (rest === halfway && (half & 1) === 1);
    return sign | (half + (up ? 1 : 0));
  }
  const half = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  const up = rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1);
  return sign | (half + (up ? 1 : 0)); // a carry into the exponent is still correct (up to inf)
}

/** The float32 value of IEEE binary16 bits (exact). */
export function float16BitsToFloat32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) {
    if (mantissa === 0) return sign * Infinity;
    scratchBits[0] = ((bits & 0x8000) << 16) | 0x7f800000 | (mantissa << 13);
    return scratch[0];
  }
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** The float32 values of a whole array of IEEE binary16 bits, in a new `Float32Array` (a loop, as `bfloat16ArrayToFloat32` says why). */
export function float16ArrayToFloat32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = float16BitsToFloat32(bits[i]);
  return out;
}

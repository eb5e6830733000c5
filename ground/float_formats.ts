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

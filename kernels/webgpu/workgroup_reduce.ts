/**
 * WGSL helpers for kernels where one workgroup cooperates on one result
 * (reductions over long axes, softmax and layer norm rows): each thread folds
 * a strided share of the row into a register, then the workgroup combines
 * the registers with a tree in workgroup memory.
 *
 * The helpers contain barriers, so WGSL's uniformity rules apply: call them
 * only from uniform control flow (every thread of the workgroup reaches the
 * call; an early `return` must depend only on the workgroup id or uniforms).
 *
 * @module
 */

/**
 * Whether a row-wise kernel (softmax, layer norm) should give each row a
 * workgroup of cooperating threads rather than one thread: only for rows
 * longer than 64 elements, and only when there are fewer than 2048 rows; with
 * more, one thread per row already keeps the device busy.
 */
export function rowsNeedWorkgroups(rows: number, n: number): boolean {
  return rows < 2048 && n > 64;
}

/**
 * WGSL defining `fn groupReduce(v: T, lid: u32) -> T`, combining each
 * thread's `v` with `combine(a, b)` (which the caller defines) across a
 * workgroup of `size` threads (a power of two); every thread gets the result.
 */
export function groupReduceSource(
  type: string,
  size: number,
  name = "groupReduce",
  combine = "combine",
): string {
  return `var<workgroup> ${name}Scratch: array<${type}, ${size}>;
fn ${name}(v: ${type}, lid: u32) -> ${type} {
  ${name}Scratch[lid] = v;
  workgroupBarrier();
  for (var s = ${size / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { ${name}Scratch[lid] = ${combine}(${name}Scratch[lid], ${name}Scratch[lid + s]); }
    workgroupBarrier();
  }
  let r = ${name}Scratch[0];
  // Nobody may overwrite the scratch (a second reduction) before all have read it.
  workgroupBarrier();
  return r;
}
`;
}

/**
 * WGSL testing a float (scalar or vector of `lanes`) for NaN by its bits:
 * NaN is any exponent of all ones with a nonzero mantissa. `x != x` says the
 * same to IEEE arithmetic, but shader compilers that assume no NaN (NVIDIA's
 * among them) fold it to `false`; a bit pattern cannot be folded away.
 */
export function isNanSource(lanes: 1 | 4 = 1): string {
  const u = lanes === 1 ? "u32" : "vec4<u32>", f = lanes === 1 ? "f32" : "vec4<f32>";
  const b = lanes === 1 ? "bool" : "vec4<bool>";
  return `fn is_nan(x: ${f}) -> ${b} { return (bitcast<${u}>(x) & ${u}(0x7fffffffu)) > ${u}(0x7f800000u); }\n`;
}

/**
 * WGSL for a NaN-propagating float max named `name` (WGSL's `max` may drop a
 * NaN): a NaN operand is the result, as with `Math.max`. Needs `is_nan`
 * (`isNanSource`) in the same shader.
 */
export function nanMaxSource(name = "maxNaN", type = "f32"): string {
  return `fn ${name}(a: ${type}, b: ${type}) -> ${type} { return select(select(max(a, b), b, is_nan(b)), a, is_nan(a)); }\n`;
}

/**
 * The WGSL expression for -infinity as an f32. It reads a private variable
 * that every shader gets (devices/webgpu/pipeline_cache.ts's
 * `SHARED_DECLARATIONS`): as a constant expression, -infinity is rejected by
 * Chromium's shader compiler.
 */
export const NEG_INF_F32 = "bitcast<f32>(NEG_INF_BITS)";

/** The WGSL expression for a quiet NaN as an f32 (read at run time, as `NEG_INF_F32`). */
export const NAN_F32 = "bitcast<f32>(NAN_BITS)";

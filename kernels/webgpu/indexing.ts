/**
 * WGSL index arithmetic shared by the templates. Spaces come from
 * `collapseDims` (kernels/broadcast.ts, the rules the CPU kernels use
 * too), so shaders index with as few div/mod steps as possible: a contiguous
 * `[64, 128, 3]` add is a flat loop of 24576, a bias add `[64, 128] + [128]`
 * needs two dimensions, not more.
 *
 * @module
 */

import type { CollapsedDims } from "../broadcast.ts";

/**
 * WGSL statements turning the linear index `idx` (a `u32` in scope) into
 * element indices `i0, i1, …` of each operand, for a space of `rank`
 * dimensions whose sizes are uniforms `dim{d}` and strides `st{k}_{d}`;
 * operand `k` starts at uniform `off{k}`. Rank 0 reads the offsets only.
 */
export function wgslIndices(rank: number, operands: number): string {
  const lines: string[] = [];
  for (let k = 0; k < operands; k++) lines.push(`  var i${k} = u.off${k};`);
  if (rank > 0) {
    lines.push(`  var rem = idx;`);
    for (let d = rank - 1; d >= 1; d--) {
      lines.push(`  { let c = rem % u.dim${d}; rem = rem / u.dim${d};`);
      for (let k = 0; k < operands; k++) lines.push(`    i${k} += c * u.st${k}_${d};`);
      lines.push(`  }`);
    }
    for (let k = 0; k < operands; k++) lines.push(`  i${k} += rem * u.st${k}_0;`);
  }
  return lines.join("\n") + "\n";
}

/** Uniform field names matching `wgslIndices`, in order: offsets, dims, strides. */
export function indexFields(rank: number, operands: number): string[] {
  const f: string[] = [];
  for (let k = 0; k < operands; k++) f.push(`off${k}`);
  for (let d = 0; d < rank; d++) f.push(`dim${d}`);
  for (let k = 0; k < operands; k++) for (let d = 0; d < rank; d++) f.push(`st${k}_${d}`);
  return f;
}

/** Uniform values matching `indexFields`. */
export function indexValues(offsets: readonly number[], space: CollapsedDims): number[] {
  return [...offsets, ...space.shape, ...space.strides.flat()];
}

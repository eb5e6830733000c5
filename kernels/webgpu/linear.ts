/**
 * The `linear` template: `out[M, N] = x[M, K] @ wᵀ + bias` (float32) with
 * the weight stored `[N, K]`, one dispatch, the bias added as each output is
 * stored.
 *
 * Every output is a dot product of two contiguous rows, so each thread keeps
 * an `R`-row × `C`-column block of them in registers and walks K in `vec4`s
 * (where K and the offsets of x and w are multiples of 4; scalars
 * otherwise): per step, `R` loads of x, `C` loads of w and `R·C` `dot`s, no
 * barriers and no workgroup memory (see matmul.ts for why barriers do not
 * pay on the software adapter this was measured on). Threads next to each
 * other take neighbouring column blocks of the same rows, so their loads of
 * x are one address (a broadcast).
 *
 * Blocks (`chooseTile`): for fewer than 4 rows (a decode step's
 * matrix-vector products) one row and 8 columns per thread, 32 threads
 * along N; up to 16 rows, up to 8 rows × 8 columns per thread, the
 * workgroup 8 × 8 threads; from 16 rows (a batch of decodes, a prefill),
 * mostly 16 × 16 per thread, 8 threads a workgroup.
 *
 * @module
 */

import {
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";

/** Sizes, options and element offsets of one `linear`. */
export interface LinearArgs {
  /** Rows of x and of the output. */
  M: number;
  /** Inner size: columns of x and of w. */
  K: number;
  /** Output columns: rows of w. */
  N: number;
  /** Whether a bias (binding 2) is added. */
  bias: boolean;
  /** Element offsets of x, w, the bias (any value without one) and the output. */
  offsets: readonly [number, number, number, number];
}

/**
 * The program for one `linear`; bindings x, w, bias, out (bind x as the
 * bias when there is none). `tile` overrides `chooseTile`'s blocks (to
 * measure others).
 */
export function linearProgram(
  { M, K, N, bias, offsets }: LinearArgs,
  tile?: { R: number; C: number; width: number; wg?: number },
): Program {
  const [offX, offW, offB, offOut] = offsets;
  const vec4 = K % 4 === 0 && offX % 4 === 0 && offW % 4 === 0;
  const lanes = vec4 ? 4 : 1;
  const [R, C, width, wgSize] = tile === undefined
    ? chooseTile(M)
    : [tile.R, tile.C, tile.width, tile.wg ?? WORKGROUP_SIZE];
  const groupsM = Math.ceil(M / (R * (wgSize / width)));
  const groupsN = Math.ceil(N / (C * width));
  return {
    key: `linear:${vec4 ? "vec4" : "f32"}:${R}x${C}:w${width}:g${wgSize}:${
      bias ? "bias" : "nobias"
    }`,
    source: () => linearSource(vec4 ? "vec4<f32>" : "f32", R, C, width, bias, wgSize),
    inputs: 3,
    uniforms: new Uniforms()
      .u32s([M, K / lanes, N, groupsN, offX / lanes, offW / lanes, offB, offOut])
      .words(),
    workgroups: groupsM * groupsN,
  };
}

/**
 * The block of outputs per thread (`R` rows × `C` columns), the threads
 * along N in a workgroup (`width`) and the workgroup size, by rows. Measured
 * on the software adapter (Mesa llvmpipe, 2 cores), GPT-small shapes
 * (K, N = 384 and 1536, 384 → 4096):
 * - one row: `1×8` blocks in workgroups of 32 along N, 0.14 ms for 384 → 384
 *   and 0.49 for 384 → 1536 (2.4 GFLOP/s, about 4.8 GB/s of weights); `1×4` in
 *   workgroups of 64 took 0.30 and 0.53, and left the 384-column products
 *   one workgroup, one core;
 * - 8 rows and more: `8×8` (or `8×4`) blocks, 8 × 8 threads, led at 13–18
 *   GFLOP/s at 64 rows depending on the shape and the load of the shared
 *   machine; `4×4` blocks reached 10, one row per thread 5;
 * - 16 rows and more: `16×16` blocks, 8 threads a workgroup (one SIMD row of
 *   llvmpipe's), where they pad the rows by no more than an eighth over 8-row
 *   blocks. llvmpipe loads a storage buffer lane by lane inside a loop, so a
 *   load costs far more than a `dot`, even one whose accumulators spill: more
 *   outputs per thread means fewer loads per `dot` (docs/performance.md has
 *   the figures, and the cost: the shader takes seconds to compile once).
 */
function chooseTile(M: number): [number, number, number, number] {
  if (M < 4) return [1, 8, 32, 32];
  if (M < 8) return [4, 4, 8, WORKGROUP_SIZE];
  const padded = (r: number) => Math.ceil(M / r) * r;
  if (M >= 16 && 8 * padded(16) <= 9 * padded(8)) return [16, 16, 8, 8];
  return [8, 8, 8, WORKGROUP_SIZE];
}

/** Repeats `f(i)` for i in [0, n). */
function each(n: number, f: (i: number) => string): string {
  return Array.from({ length: n }, (_, i) => f(i)).join("");
}

function linearSource(
  type: string,
  R: number,
  C: number,
  width: number,
  bias: boolean,
  wgSize: number,
): string {
  const dot = type === "f32"
    ? (a: string, b: string) => `${a} * ${b}`
    : (a: string, b: string) => `dot(${a}, ${b})`;
  return storage(0, "x", type, false) + storage(1, "w", type, false) +
    storage(2, "b", bias ? "f32" : type, false) + storage(3, "out", "f32", true) +
    uniformStruct(["M", "K", "N", "groupsN", "offX", "offW", "offB", "offOut"], 4) +
    mainHeader(wgSize) + `
  let row = ((wg / u.groupsN) * ${wgSize / width}u + lid / ${width}u) * ${R}u;
  let col = ((wg % u.groupsN) * ${width}u + lid % ${width}u) * ${C}u;
  if (row >= u.M || col >= u.N) { return; }
  // Rows and columns past the end re-read the last one; their results are not stored.
${each(R, (r) => `  let x${r} = u.offX + min(row + ${r}u, u.M - 1u) * u.K;\n`)}${
    each(C, (c) => `  let w${c} = u.offW + min(col + ${c}u, u.N - 1u) * u.K;\n`)
  }${each(R, (r) => each(C, (c) => `  var s${r}_${c} = 0.0;\n`))}  for (var k = 0u; k < u.K; k++) {
${each(R, (r) => `    let a${r} = x[x${r} + k];\n`)}${
    each(C, (c) => `    let b${c} = w[w${c} + k];\n`)
  }${each(R, (r) => each(C, (c) => `    s${r}_${c} += ${dot(`a${r}`, `b${c}`)};\n`))}  }
${
    each(R, (r) =>
      each(C, (c) => {
        const conds = [
          ...(r > 0 ? [`row + ${r}u < u.M`] : []),
          ...(c > 0 ? [`col + ${c}u < u.N`] : []),
        ];
        const value = bias ? `s${r}_${c} + b[u.offB + col + ${c}u]` : `s${r}_${c}`;
        const store = `out[u.offOut + (row + ${r}u) * u.N + col + ${c}u] = ${value};`;
        return conds.length === 0 ? `  ${store}\n` : `  if (${conds.join(" && ")}) { ${store} }\n`;
      }))
  }}
`;
}

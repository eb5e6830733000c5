/**
 * The reduction template: `sum`, `max` and `mean` over any set of axes.
 *
 * Any axes, no transposes. Size-1 axes are dropped and neighbouring axes of
 * the same kind (kept or reduced) merged, which leaves a short alternating
 * list; the output enumerates the kept axes in order (so it is contiguous,
 * keepdims or not) and each result walks the reduced axes through strides.
 * Reducing axis 0 of `[4096, 4096]` thus reads columns in place instead of
 * transposing 64 MiB first.
 *
 * Two variants:
 *
 * - `thread`: one thread per result, nested loops over the reduced axes.
 *   Right when results are many (the GPU is busy anyway) or short.
 * - `group`: one workgroup per chunk of one result, a tree in workgroup
 *   memory, partial results written to a temporary and reduced again by the
 *   same template until one value per result remains. Right for few, long
 *   reductions (a full sum of 16M values would otherwise run on one thread).
 *
 * @module
 */

import type { ReduceOp } from "../kernel_backend.ts";
import { shapeSize } from "../../devices/ndarray.ts";
import { contiguousStrides } from "../broadcast.ts";
import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";
import type { ScalarType } from "./elementwise_program.ts";
import { groupReduceSource, isNanSource, nanMaxSource, NEG_INF_F32 } from "./workgroup_reduce.ts";

/** Workgroup sizes of the thread-per-result and group-per-result forms. */
const THREAD_WORKGROUP = WORKGROUP_SIZE;
const GROUP_WORKGROUP = WORKGROUP_SIZE;
/** Fewer results than this, each longer than `SHORT`, use the `group` variant. */
const FEW_RESULTS = 2048;
const SHORT = 64;
/** The `group` variant aims for at least this many workgroups in flight. */
const TARGET_WORKGROUPS = 128;
/** …but gives each at least this many elements per thread. */
const MIN_PER_THREAD = 16;

/** Axes after merging: sizes and element strides of the kept and of the reduced ones. */
export interface ReductionSpace {
  /** Kept axes (outermost first): sizes. */
  keptDims: number[];
  /** Kept axes: strides in the input. */
  keptStrides: number[];
  /** Reduced axes (outermost first): sizes. */
  redDims: number[];
  /** Reduced axes: strides in the input. */
  redStrides: number[];
}

/** Splits `shape` into merged kept and reduced axes. `axes` must be sorted and unique. */
export function reductionSpace(shape: readonly number[], axes: readonly number[]): ReductionSpace {
  const strides = contiguousStrides(shape);
  const space: ReductionSpace = { keptDims: [], keptStrides: [], redDims: [], redStrides: [] };
  let lastKind: boolean | null = null;
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const reduced = axes.includes(d);
    const dims = reduced ? space.redDims : space.keptDims;
    const st = reduced ? space.redStrides : space.keptStrides;
    // The input is contiguous, so two neighbours of the same kind always merge.
    if (lastKind === reduced) {
      dims[dims.length - 1] *= shape[d];
      st[st.length - 1] = strides[d];
    } else {
      dims.push(shape[d]);
      st.push(strides[d]);
    }
    lastKind = reduced;
  }
  return space;
}

/** How a reduction pass combines and finishes. */
interface PassSpec {
  /** `sum` or `max` when combining; a `mean` combines as a sum. */
  readonly combine: "sum" | "max";
  /** Divide by `count` at the end (the last pass of a mean). */
  readonly mean: boolean;
  readonly type: ScalarType;
}

/** A planned reduction: the passes to run, and the shapes of their temporaries. */
export interface ReductionPlan {
  /** Programs in order. Pass `i` reads buffer `i` (0: the input) and writes buffer `i + 1` (last: the output). */
  readonly passes: Program[];
  /** Element counts of the temporaries between passes. */
  readonly temporaries: number[];
}

/**
 * Plans `op` over `axes` of a tensor of `shape` at element offset `inOffset`,
 * into a contiguous output at `outOffset`.
 */
export function planReduction(
  op: ReduceOp,
  type: ScalarType,
  shape: readonly number[],
  axes: readonly number[],
  inOffset: number,
  outOffset: number,
): ReductionPlan {
  const space = reductionSpace(shape, axes);
  const results = shapeSize(space.keptDims);
  const count = shapeSize(space.redDims);
  const combine = op === "max" ? "max" : "sum";
  const passes: Program[] = [];
  const temporaries: number[] = [];
  if (results === 0) return { passes, temporaries };
  if (results >= FEW_RESULTS || count <= SHORT) {
    passes.push(
      threadProgram({ combine, mean: op === "mean", type }, space, count, inOffset, outOffset),
    );
    return { passes, temporaries };
  }
  // Split each result into chunks, reduce the chunks, then reduce the partials the same way.
  let length = count, offset = inOffset, current = space;
  for (;;) {
    const chunks = Math.max(
      1,
      Math.min(
        Math.ceil(TARGET_WORKGROUPS / results),
        Math.floor(length / (GROUP_WORKGROUP * MIN_PER_THREAD)),
      ),
    );
    const last = chunks === 1;
    const spec = { combine, mean: last && op === "mean", type } as const;
    passes.push(groupProgram(spec, current, length, chunks, count, offset, last ? outOffset : 0));
    if (last) break;
    temporaries.push(results * chunks);
    // The partials form a contiguous [results, chunks] tensor reduced over its last axis.
    current = { keptDims: [results], keptStrides: [chunks], redDims: [chunks], redStrides: [1] };
    length = chunks;
    offset = 0;
    if (chunks <= SHORT) {
      passes.push(
        threadProgram({ combine, mean: op === "mean", type }, current, count, 0, outOffset),
      );
      break;
    }
  }
  return { passes, temporaries };
}

function commonSource(spec: PassSpec): string {
  const t = spec.type;
  const identity = spec.combine === "sum"
    ? `${t}(0)`
    : t === "f32"
    ? NEG_INF_F32
    : t === "i32"
    ? "i32(-2147483647 - 1)"
    : "0u";
  // A function, not a `const`: naga cannot evaluate `bitcast` (the -inf) in a constant.
  let src = `alias T = ${t};\nfn identity() -> T { return ${identity}; }\n`;
  if (spec.combine === "sum") src += "fn combine(a: T, b: T) -> T { return a + b; }\n";
  else if (t === "f32") src += isNanSource() + nanMaxSource("combine");
  else src += "fn combine(a: T, b: T) -> T { return max(a, b); }\n";
  // A mean divides once at the end: float division rounds like the CPU's sum / n;
  // an integer mean truncates toward zero, as int32 division does.
  src += spec.mean
    ? `fn finish(v: T) -> T { return v / T(u.count); }\n`
    : "fn finish(v: T) -> T { return v; }\n";
  return src;
}

/** WGSL computing `base` (the input offset of result `o`) from the kept axes. */
function baseSource(keptRank: number): string {
  let src = "  var base = u.offIn;\n  var rem = o;\n";
  for (let d = keptRank - 1; d >= 1; d--) {
    src += `  base += (rem % u.kd${d}) * u.ks${d}; rem = rem / u.kd${d};\n`;
  }
  if (keptRank > 0) src += "  base += rem * u.ks0;\n";
  return src;
}

function spaceFields(space: ReductionSpace): string[] {
  return [
    ...space.keptDims.map((_, d) => `kd${d}`),
    ...space.keptStrides.map((_, d) => `ks${d}`),
    ...space.redDims.map((_, d) => `rd${d}`),
    ...space.redStrides.map((_, d) => `rs${d}`),
  ];
}

function spaceValues(space: ReductionSpace): number[] {
  return [...space.keptDims, ...space.keptStrides, ...space.redDims, ...space.redStrides];
}

function threadProgram(
  spec: PassSpec,
  space: ReductionSpace,
  count: number,
  inOffset: number,
  outOffset: number,
): Program {
  const kr = space.keptDims.length, rr = space.redDims.length;
  const results = shapeSize(space.keptDims);
  const wg = THREAD_WORKGROUP;
  const fields = ["results", "count", "offIn", "offOut", ...spaceFields(space)];
  return {
    key: `reduce:thread:${spec.combine}:${spec.mean}:${spec.type}:k${kr}:r${rr}`,
    source: () => {
      let loops = "";
      let index = "base";
      for (let d = 0; d < rr; d++) {
        loops += `${"  ".repeat(d + 1)}for (var j${d} = 0u; j${d} < u.rd${d}; j${d}++) {\n`;
        index += ` + j${d} * u.rs${d}`;
      }
      const body = `${"  ".repeat(rr + 1)}acc = combine(acc, x[${index}]);\n`;
      let close = "";
      for (let d = rr - 1; d >= 0; d--) close += `${"  ".repeat(d + 1)}}\n`;
      return storage(0, "x", "T", false) + storage(1, "out", "T", true) + uniformStruct(fields, 2) +
        commonSource(spec) + mainHeader(wg) + `
  let o = wg * ${wg}u + lid;
  if (o >= u.results) { return; }
${baseSource(kr)}  var acc = identity();
${loops}${body}${close}  out[u.offOut + o] = finish(acc);
}
`;
    },
    inputs: 1,
    uniforms: new Uniforms().u32(results).u32(count).u32(inOffset).u32(outOffset).u32s(
      spaceValues(space),
    ).words(),
    workgroups: groupsFor(results, wg),
  };
}

function groupProgram(
  spec: PassSpec,
  space: ReductionSpace,
  length: number,
  chunks: number,
  count: number,
  inOffset: number,
  outOffset: number,
): Program {
  const kr = space.keptDims.length, rr = space.redDims.length;
  const results = shapeSize(space.keptDims);
  const wg = GROUP_WORKGROUP;
  const chunk = Math.ceil(length / chunks);
  const fields = [
    "results",
    "count",
    "offIn",
    "offOut",
    "chunks",
    "chunk",
    "length",
    ...spaceFields(space),
  ];
  return {
    key: `reduce:group:${spec.combine}:${spec.mean}:${spec.type}:k${kr}:r${rr}`,
    source: () => {
      // Position j along the merged reduced axes → input offset.
      let index = "  var p = base;\n  var rest = j;\n";
      for (let d = rr - 1; d >= 1; d--) {
        index += `  p += (rest % u.rd${d}) * u.rs${d}; rest = rest / u.rd${d};\n`;
      }
      index += "  p += rest * u.rs0;\n";
      return storage(0, "x", "T", false) + storage(1, "out", "T", true) + uniformStruct(fields, 2) +
        commonSource(spec) + groupReduceSource("T", wg) +
        `fn at(base: u32, j: u32) -> T {\n${index}  return x[p];\n}\n` +
        mainHeader(wg) + `
  if (wg >= u.results * u.chunks) { return; }
  let o = wg / u.chunks;
  let c = wg % u.chunks;
${baseSource(kr)}  let start = c * u.chunk;
  let end = min(start + u.chunk, u.length);
  var acc = identity();
  for (var j = start + lid; j < end; j += ${wg}u) { acc = combine(acc, at(base, j)); }
  let total = groupReduce(acc, lid);
  if (lid == 0u) {
    if (u.chunks == 1u) { out[u.offOut + o] = finish(total); } else { out[wg] = total; }
  }
}
`;
    },
    inputs: 1,
    uniforms: new Uniforms()
      .u32s([results, count, inOffset, outOffset, chunks, chunk, length])
      .u32s(spaceValues(space))
      .words(),
    workgroups: results * chunks,
  };
}

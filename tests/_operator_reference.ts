/**
 * Plain-JavaScript reference implementations of the `vm.op.*` operators,
 * written for obviousness rather than speed: every output element is
 * computed from its multi-index, in float64, with no shared code from the
 * kernels under test. The operator suite compares every device against
 * these.
 *
 * @module
 */

/** A reference tensor: a shape and its elements in row-major order. */
export interface Ref {
  shape: number[];
  data: number[];
}

/** Number of elements of a shape. */
export function sizeOf(shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

/** The multi-index of flat position `i` in `shape`. */
export function unravel(i: number, shape: readonly number[]): number[] {
  const idx = new Array<number>(shape.length).fill(0);
  for (let k = shape.length - 1; k >= 0; k--) {
    idx[k] = i % shape[k];
    i = Math.floor(i / shape[k]);
  }
  return idx;
}

/** The flat position of multi-index `idx` in `shape`. */
export function ravel(idx: readonly number[], shape: readonly number[]): number {
  let i = 0;
  for (let k = 0; k < shape.length; k++) i = i * shape[k] + idx[k];
  return i;
}

/** NumPy's broadcast shape, or `undefined`. */
export function refBroadcastShape(
  a: readonly number[],
  b: readonly number[],
): number[] | undefined {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let k = 0; k < rank; k++) {
    const da = k < rank - a.length ? 1 : a[k - (rank - a.length)];
    const db = k < rank - b.length ? 1 : b[k - (rank - b.length)];
    if (da !== db && da !== 1 && db !== 1) return undefined;
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** The element of `x` that broadcast multi-index `idx` (of a higher or equal rank) reads. */
function broadcastRead(x: Ref, idx: readonly number[]): number {
  const off = idx.length - x.shape.length;
  const own = x.shape.map((d, k) => (d === 1 ? 0 : idx[k + off]));
  return x.data[ravel(own, x.shape)];
}

/** `f(a, b)` elementwise with broadcasting. */
export function refBinary(a: Ref, b: Ref, f: (x: number, y: number) => number): Ref {
  const shape = refBroadcastShape(a.shape, b.shape);
  if (shape === undefined) throw new Error("reference: shapes do not broadcast");
  const data: number[] = [];
  for (let i = 0; i < sizeOf(shape); i++) {
    const idx = unravel(i, shape);
    data.push(f(broadcastRead(a, idx), broadcastRead(b, idx)));
  }
  return { shape, data };
}

/** `f(x)` elementwise. */
export function refUnary(x: Ref, f: (v: number) => number): Ref {
  return { shape: [...x.shape], data: x.data.map(f) };
}

/** erf by its Maclaurin series (|x| < 3) or its asymptotic expansion (|x| ≥ 3), to ~1e-12. */
export function refErf(x: number): number {
  const z = Math.abs(x);
  if (z >= 3) {
    // erfc(z) = exp(-z²)/(z√π) · (1 - 1/(2z²) + 3/(2z²)² - 15/(2z²)³ + 105/(2z²)⁴)
    const u = 1 / (2 * z * z);
    const series = 1 - u + 3 * u ** 2 - 15 * u ** 3 + 105 * u ** 4;
    return Math.sign(x) * (1 - Math.exp(-z * z) / (z * Math.sqrt(Math.PI)) * series);
  }
  // erf(x) = 2/√π · Σ (-1)^n x^(2n+1) / (n! (2n+1))
  let sum = 0, term = x;
  for (let n = 0; n < 60; n++) {
    sum += term / (2 * n + 1);
    term *= -x * x / (n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

/** The reference unary functions, by operator name. */
export const REF_UNARY: Record<string, (v: number) => number> = {
  negative: (v) => -v,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  tanh: Math.tanh,
  sigmoid: (v) => 1 / (1 + Math.exp(-v)),
  relu: (v) => (v > 0 ? v : 0),
  gelu: (v) => 0.5 * v * (1 + refErf(v / Math.SQRT2)),
  abs: Math.abs,
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  asin: Math.asin,
  acos: Math.acos,
  atan: Math.atan,
  sinh: Math.sinh,
  cosh: Math.cosh,
  asinh: Math.asinh,
  acosh: Math.acosh,
  atanh: Math.atanh,
  floor: Math.floor,
  ceil: Math.ceil,
  // Halves to even (NumPy's and WGSL's rule).
  round: (v) => Math.abs(v % 1) === 0.5 ? 2 * Math.round(v / 2) : Math.round(v),
  erf: refErf,
};

/** The reference binary functions on floats, by operator name. */
export const REF_BINARY_FLOAT: Record<string, (x: number, y: number) => number> = {
  add: (x, y) => x + y,
  subtract: (x, y) => x - y,
  multiply: (x, y) => x * y,
  divide: (x, y) => x / y,
  maximum: (x, y) => (x > y ? x : y),
  minimum: (x, y) => (x < y ? x : y),
};

/** The reference binary functions on int32 (wrapping; WGSL's division rules). */
export const REF_BINARY_INT: Record<string, (x: number, y: number) => number> = {
  add: (x, y) => Number(BigInt.asIntN(32, BigInt(x) + BigInt(y))),
  subtract: (x, y) => Number(BigInt.asIntN(32, BigInt(x) - BigInt(y))),
  multiply: (x, y) => Number(BigInt.asIntN(32, BigInt(x) * BigInt(y))),
  divide: (x, y) => (y === 0 ? x : Number(BigInt.asIntN(32, BigInt(x) / BigInt(y)))),
  maximum: (x, y) => (x > y ? x : y),
  minimum: (x, y) => (x < y ? x : y),
};

/** NumPy's `matmul`, including 1-D operands and broadcast batch axes. */
export function refMatmul(a: Ref, b: Ref): Ref {
  const a2 = a.shape.length === 1 ? [1, a.shape[0]] : a.shape;
  const b2 = b.shape.length === 1 ? [b.shape[0], 1] : b.shape;
  const M = a2[a2.length - 2], K = a2[a2.length - 1], N = b2[b2.length - 1];
  const batch = refBroadcastShape(a2.slice(0, -2), b2.slice(0, -2))!;
  const full = [...batch, M, N];
  const A: Ref = { shape: a2, data: a.data }, B: Ref = { shape: b2, data: b.data };
  const data: number[] = [];
  for (let i = 0; i < sizeOf(full); i++) {
    const idx = unravel(i, full);
    const bi = idx.slice(0, -2), m = idx[idx.length - 2], n = idx[idx.length - 1];
    let s = 0;
    for (let k = 0; k < K; k++) {
      s += broadcastRead(A, [...bi, m, k]) * broadcastRead(B, [...bi, k, n]);
    }
    data.push(s);
  }
  const shape = [...batch];
  if (a.shape.length > 1) shape.push(M);
  if (b.shape.length > 1) shape.push(N);
  return { shape, data };
}

/** `x @ wᵀ + bias` for `x [..., K]`, `w [N, K]`, `bias [N]` or null. */
export function refLinear(x: Ref, w: Ref, bias: Ref | null): Ref {
  const [N, K] = w.shape;
  const M = K === 0 ? sizeOf(x.shape.slice(0, -1)) : x.data.length / K;
  const data: number[] = [];
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += x.data[m * K + k] * w.data[n * K + k];
      data.push(s + (bias === null ? 0 : bias.data[n]));
    }
  }
  return { shape: [...x.shape.slice(0, -1), N], data };
}

/** `sum`, `max` or `mean` over `axes` (non-negative; all when empty). */
export function refReduce(op: string, x: Ref, axes: readonly number[], keepdims: boolean): Ref {
  const all = axes.length === 0 ? x.shape.map((_, k) => k) : axes;
  const kept = x.shape.map((_, k) => k).filter((k) => !all.includes(k));
  const outShape = kept.map((k) => x.shape[k]);
  const groups: number[][] = Array.from({ length: sizeOf(outShape) }, () => []);
  for (let i = 0; i < x.data.length; i++) {
    const idx = unravel(i, x.shape);
    groups[ravel(kept.map((k) => idx[k]), outShape)].push(x.data[i]);
  }
  const data = groups.map((g) => {
    if (op === "max") return g.reduce((m, v) => (v > m || Number.isNaN(v) ? v : m), -Infinity);
    const s = g.reduce((t, v) => t + v, 0);
    return op === "mean" ? s / g.length : s;
  });
  const shape = keepdims ? x.shape.map((d, k) => (all.includes(k) ? 1 : d)) : outShape;
  return { shape, data };
}

/** Softmax over the last axis (a 0-d tensor is one row of one). */
export function refSoftmax(x: Ref): Ref {
  const n = x.shape.length === 0 ? 1 : x.shape[x.shape.length - 1];
  const data: number[] = [];
  for (let r = 0; r < x.data.length; r += n) {
    const row = x.data.slice(r, r + n);
    const m = Math.max(...row);
    const e = row.map((v) => Math.exp(v - m));
    const s = e.reduce((t, v) => t + v, 0);
    data.push(...e.map((v) => v / s));
  }
  return { shape: [...x.shape], data };
}

/** Layer normalization over the trailing `gamma.shape.length` axes. */
export function refLayerNorm(x: Ref, gamma: Ref, beta: Ref, eps: number): Ref {
  const n = sizeOf(gamma.shape);
  const data: number[] = [];
  for (let r = 0; r < x.data.length; r += n) {
    const row = x.data.slice(r, r + n);
    const mean = row.reduce((t, v) => t + v, 0) / n;
    const variance = row.reduce((t, v) => t + (v - mean) ** 2, 0) / n;
    row.forEach((v, i) =>
      data.push(((v - mean) / Math.sqrt(variance + eps)) * gamma.data[i] + beta.data[i])
    );
  }
  return { shape: [...x.shape], data };
}

/** Axis permutation: `out.shape[i] = x.shape[perm[i]]`. */
export function refTranspose(x: Ref, perm: readonly number[]): Ref {
  const shape = perm.map((p) => x.shape[p]);
  const data: number[] = [];
  for (let i = 0; i < sizeOf(shape); i++) {
    const idx = unravel(i, shape);
    const src = new Array<number>(x.shape.length);
    perm.forEach((p, k) => (src[p] = idx[k]));
    data.push(x.data[ravel(src, x.shape)]);
  }
  return { shape, data };
}

/** The integer ranges used by the saturating float → int cast. */
const INT_RANGES: Record<string, [number, number]> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
};

/** Converts one value from dtype `from` to dtype `to` by the documented cast rules. */
export function refCastValue(v: number, from: string, to: string): number {
  if (to === "bool") return v !== 0 ? 1 : 0;
  const range = INT_RANGES[to];
  if (range === undefined) return to === "float32" ? Math.fround(v) : v;
  if (from.startsWith("float")) {
    if (Number.isNaN(v)) return 0;
    return Math.min(range[1], Math.max(range[0], Math.trunc(v)));
  }
  // Integer → integer wraps modulo 2^bits.
  const bits = BigInt(to.replace(/\D/g, ""));
  const big = BigInt(v);
  return Number(
    to.startsWith("u") ? BigInt.asUintN(Number(bits), big) : BigInt.asIntN(Number(bits), big),
  );
}

/** The rows `take` reads for index `i` of an axis of length `n` (NumPy's `take` modes). */
export function refTakeIndex(i: number, n: number, mode: string): number {
  if (mode === "wrap") return ((i % n) + n) % n;
  if (mode === "clip") return Math.min(n - 1, Math.max(0, i));
  if (i < -n || i >= n) throw new Error(`reference: index ${i} out of range`);
  return i < 0 ? i + n : i;
}

/** NumPy's `take(x, indices, axis, mode)`; `axis` undefined reads `x` flattened. */
export function refTake(x: Ref, indices: Ref, axis: number | undefined, mode = "fast"): Ref {
  const src: Ref = axis === undefined ? { shape: [x.data.length], data: x.data } : x;
  const a = axis === undefined ? 0 : axis < 0 ? axis + x.shape.length : axis;
  const shape = [...src.shape.slice(0, a), ...indices.shape, ...src.shape.slice(a + 1)];
  const data: number[] = [];
  for (let i = 0; i < sizeOf(shape); i++) {
    const idx = unravel(i, shape);
    const before = idx.slice(0, a);
    const at = idx.slice(a, a + indices.shape.length);
    const after = idx.slice(a + indices.shape.length);
    const row = refTakeIndex(indices.data[ravel(at, indices.shape)], src.shape[a], mode);
    data.push(src.data[ravel([...before, row, ...after], src.shape)]);
  }
  return { shape, data };
}

/** The positions Python's `range(n)[begin:end:step]` selects. */
export function refSliceIndices(begin: number, end: number, step: number, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(i);
  // Python semantics, spelled out: negative bounds count from the end, then clamp.
  const norm = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, v < 0 ? v + n : v));
  if (step > 0) {
    const picked: number[] = [];
    for (let i = norm(begin, 0, n); i < norm(end, 0, n); i += step) picked.push(out[i]);
    return picked;
  }
  const picked: number[] = [];
  for (let i = norm(begin, -1, n - 1); i > norm(end, -1, n - 1); i += step) picked.push(out[i]);
  return picked;
}

/** `x[begin:end:stride]` on each of `axes` (negative axes count from the end). */
export function refStridedSlice(
  x: Ref,
  axes: readonly number[],
  begin: readonly number[],
  end: readonly number[],
  strides?: readonly number[],
): Ref {
  const picks = x.shape.map((n) => Array.from({ length: n }, (_, i) => i));
  axes.forEach((a, k) => {
    const axis = a < 0 ? a + x.shape.length : a;
    picks[axis] = refSliceIndices(begin[k], end[k], strides?.[k] ?? 1, x.shape[axis]);
  });
  const shape = picks.map((p) => p.length);
  const data: number[] = [];
  for (let i = 0; i < sizeOf(shape); i++) {
    const idx = unravel(i, shape);
    data.push(x.data[ravel(idx.map((v, d) => picks[d][v]), x.shape)]);
  }
  return { shape, data };
}

/** NumPy's `concatenate(tensors, axis)`. */
export function refConcat(tensors: readonly Ref[], axis: number): Ref {
  const rank = tensors[0].shape.length;
  const a = axis < 0 ? axis + rank : axis;
  const shape = [...tensors[0].shape];
  shape[a] = tensors.reduce((n, t) => n + t.shape[a], 0);
  const data: number[] = [];
  for (let i = 0; i < sizeOf(shape); i++) {
    const idx = unravel(i, shape);
    let at = idx[a], k = 0;
    while (at >= tensors[k].shape[a]) at -= tensors[k++].shape[a];
    const own = [...idx];
    own[a] = at;
    data.push(tensors[k].data[ravel(own, tensors[k].shape)]);
  }
  return { shape, data };
}

/** `x` with `x[..., i, j] = -Infinity` where `j > i + offset` over the last two axes. */
export function refCausalMask(x: Ref, offset: number): Ref {
  const rank = x.shape.length;
  const data = x.data.map((v, i) => {
    const idx = unravel(i, x.shape);
    return idx[rank - 1] > idx[rank - 2] + offset ? -Infinity : v;
  });
  return { shape: [...x.shape], data };
}

/**
 * Scaled dot-product attention over the last two axes, textbook form:
 * scores, mask (`causalOffset` null: none), softmax, weighted sum of `v`.
 */
export function refAttention(
  q: Ref,
  k: Ref,
  v: Ref,
  scale: number,
  causalOffset: number | null,
): Ref {
  const rank = q.shape.length;
  const [Tq, D] = q.shape.slice(-2), Tk = k.shape[rank - 2], Dv = v.shape[rank - 1];
  const heads = sizeOf(q.shape.slice(0, -2));
  const data: number[] = [];
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < Tq; i++) {
      const scores: number[] = [];
      for (let j = 0; j < Tk; j++) {
        let s = 0;
        for (let d = 0; d < D; d++) {
          s += q.data[(h * Tq + i) * D + d] * k.data[(h * Tk + j) * D + d];
        }
        scores.push(causalOffset !== null && j > i + causalOffset ? -Infinity : s * scale);
      }
      const p = refSoftmax({ shape: [Tk], data: scores }).data;
      for (let d = 0; d < Dv; d++) {
        let o = 0;
        for (let j = 0; j < Tk; j++) o += p[j] * v.data[(h * Tk + j) * Dv + d];
        data.push(o);
      }
    }
  }
  return { shape: [...q.shape.slice(0, -1), Dv], data };
}

/** NumPy's `argmax` along `axis` (null: flattened): the first maximal element, NaN the largest. */
export function refArgmax(x: Ref, axis: number | null, keepdims: boolean): Ref {
  const dims = axis === null ? [x.data.length] : x.shape;
  const ax = axis === null ? 0 : axis;
  const outer = sizeOf(dims.slice(0, ax)), n = dims[ax], inner = sizeOf(dims.slice(ax + 1));
  const data: number[] = [];
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let best = 0;
      for (let j = 0; j < n; j++) {
        const v = x.data[(o * n + j) * inner + i], b = x.data[(o * n + best) * inner + i];
        if (Number.isNaN(v)) {
          if (!Number.isNaN(b)) best = j;
          break;
        }
        if (!Number.isNaN(b) && v > b) best = j;
      }
      if (Number.isNaN(x.data[(o * n) * inner + i])) best = 0;
      data.push(best);
    }
  }
  const shape = axis === null
    ? (keepdims ? x.shape.map(() => 1) : [])
    : keepdims
    ? x.shape.map((d, k) => (k === axis ? 1 : d))
    : x.shape.filter((_, k) => k !== axis);
  return { shape, data };
}

/**
 * The probabilities `softmax(logits / temperature)` of one row, NaN logits
 * given 0, sorted largest first (ties by index) with their cumulative sums:
 * what a top-p sampler walks.
 */
export function refNucleusOrder(
  logits: readonly number[],
  temperature: number,
): { order: number[]; probs: number[]; cums: number[] } {
  const finite = logits.filter((v) => !Number.isNaN(v));
  const max = Math.max(...finite);
  const w = logits.map((v) => (Number.isNaN(v) ? 0 : Math.exp((v - max) / temperature)));
  const Z = w.reduce((a, b) => a + b, 0);
  const probs = w.map((v) => v / Z);
  const order = probs.map((_, i) => i).filter((i) => probs[i] > 0)
    .sort((a, b) => probs[b] - probs[a] || a - b);
  let cum = 0;
  const cums = order.map((i) => (cum += probs[i]));
  return { order, probs, cums };
}

/**
 * TVM's top-p rule on one row (`sample_top_p_from_logits`): the first
 * maximal logit below temperature 1e-6; the most probable token when
 * `u < p_max / top_p`; else, in the shortest prefix of the sorted tokens
 * whose mass reaches `top_p`, the first whose cumulative mass exceeds `u`
 * times the prefix's mass. NaN logits never chosen; a row of NaN gives 0.
 */
export function refSampleTopP(
  logits: readonly number[],
  u: number,
  temperature: number,
  topP: number,
): number {
  if (logits.every(Number.isNaN)) return 0;
  const { order, probs, cums } = refNucleusOrder(logits, Math.max(temperature, 1e-30));
  if (temperature < 1e-6 || u < probs[order[0]] / topP) return order[0];
  let k = 0;
  while (k < order.length - 1 && cums[k] < topP) k++;
  const nucleus = cums[k];
  for (let j = 0; j <= k; j++) if (cums[j] > u * nucleus) return order[j];
  return order[k];
}

/**
 * The WebGPU operator kernels: op glue, one kernel per `OpBackend` op, on top of the
 * WGSL templates, installed for `"webgpu"` devices by kernels/install.ts.
 *
 * Each method turns checked tensors into a `Program` (template + uniforms)
 * and records it in the device's open encoder; nothing waits. Layers, as in
 * TF.js: this file (op glue) → `*_program.ts`/family files (templates) →
 * `elementwise_ops.ts` (per-op WGSL snippets) → the device's plumbing in
 * devices/webgpu/ (kernel_program.ts and the caches: pipelines by key and
 * layout, uniform buffers, bind groups).
 *
 * @module
 */

import { elementBytes, type TensorDType } from "../../ground/dtype.ts";
import { NDArray } from "../../devices/ndarray.ts";
import type {
  AttentionLayout,
  BinaryOp,
  CompareOp,
  Conv2dGeometry,
  OpBackend,
  PagedAttentionBatch,
  ReduceOp,
  TakeMode,
  UnaryOp,
} from "../kernel_backend.ts";
import { attentionGeometry } from "../attention_layout.ts";
import { broadcastStrides, contiguousStrides } from "../broadcast.ts";
import { concatLayout, sliceWindow } from "../indexing_layout.ts";
import { attentionPerThread, attentionProgram, causalMaskProgram } from "./attention.ts";
import { convertProgram } from "./convert.ts";
import {
  PAGED_MAX_HEAD_DIM,
  pagedAppendProgram,
  pagedAttendProgram,
  pagedAttentionMeta,
} from "./paged_attention.ts";
import { type ElementwiseFn, elementwiseProgram } from "./elementwise_program.ts";
import { binaryFn, CAST_FN, compareFn, IDENTITY_FN, unaryFn, WHERE_FN } from "./elementwise_ops.ts";
import { rowCopyProgram, takeProgram } from "./gather.ts";
import {
  biasProgram,
  conv2dProgram,
  epilogueProgram,
  im2colProgram,
  isPointwise,
  viaIm2col,
} from "./conv2d.ts";
import { layerNormProgram } from "./layer_norm.ts";
import { matmulProgram } from "./matmul.ts";
import { linearProgram } from "./linear.ts";
import {
  bufferOf,
  elementOffset,
  type Program,
  runProgram,
  wgslType,
} from "../../devices/webgpu/kernel_program.ts";
import { kernelContext, type WebGPUDevice } from "../../devices/webgpu/webgpu_device.ts";
import { planReduction } from "./reduce.ts";
import { softmaxProgram } from "./softmax.ts";
import { argmaxProgram, sampleTopPProgram } from "./sampling.ts";

/**
 * Runs `record(target)` with an output that shares no buffer with `inputs`:
 * `out` itself normally, else a temporary copied into `out` afterwards. A
 * dispatch cannot bind one buffer both read-only and writable, and outputs
 * may share a storage with an input when the VM places tensors with
 * `alloc_tensor`.
 */
function withDistinctOutput(
  inputs: readonly NDArray[],
  out: NDArray,
  record: (target: NDArray) => void,
): void {
  const ob = bufferOf(out);
  if (!inputs.some((x) => bufferOf(x) === ob)) {
    record(out);
    return;
  }
  const tmp = NDArray.empty(out.shape, out.dtype, out.device);
  try {
    record(tmp);
    out.device.copyBlock(bufferOf(tmp), tmp.byteOffset, ob, out.byteOffset, out.nbytes);
  } finally {
    tmp.releaseIfUnowned();
  }
}

/** Records `program` reading `inputs` and writing `out`. */
function run(program: Program, inputs: readonly NDArray[], out: NDArray): void {
  runProgram(kernelContext(out.device), program, [...inputs.map(bufferOf), bufferOf(out)]);
}

/**
 * An elementwise kernel of `fn` over contiguous or broadcast inputs; input
 * `k` is read from `starts[k]` elements past its own start (a slice's window).
 */
function elementwise(
  fn: ElementwiseFn,
  inputs: readonly NDArray[],
  strides: readonly (readonly number[])[],
  out: NDArray,
  starts?: readonly number[],
): void {
  if (out.size === 0) return;
  withDistinctOutput(inputs, out, (target) => {
    const program = elementwiseProgram(
      fn,
      inputs.map((x, k) => ({
        type: wgslType(x.dtype),
        offset: elementOffset(x) + (starts?.[k] ?? 0),
        strides: strides[k],
      })),
      target.shape,
      wgslType(target.dtype),
      elementOffset(target),
    );
    run(program, inputs, target);
  });
}

/** Dtypes WGSL stores natively (one 32-bit word per element). */
const WORD_TYPES: ReadonlySet<TensorDType> = new Set(["float32", "int32", "uint32"]);

/**
 * Converts (and permutes, through `strides`) any dtype into any dtype,
 * reading from `start` elements past `x`'s start.
 */
function convert(x: NDArray, strides: readonly number[], out: NDArray, start = 0): void {
  if (out.size === 0) return;
  withDistinctOutput([x], out, (target) => {
    const program = convertProgram({
      from: x.dtype,
      to: target.dtype,
      shape: target.shape,
      strides,
      srcByte: x.byteOffset + start * elementBytes(x.dtype),
      dstByte: target.byteOffset,
    });
    run(program, [x], target);
  });
}

/** `bytes` in 32-bit words, or undefined when it is not a whole number of them. */
function wordsOf(bytes: number): number | undefined {
  return bytes % 4 === 0 ? bytes / 4 : undefined;
}

/**
 * Whether the device's adapter is a fallback (software) one, such as Mesa
 * llvmpipe: `GPUAdapterInfo.isFallbackAdapter`, absent (false) in older
 * runtimes.
 */
function isFallbackAdapter(device: WebGPUDevice): boolean {
  return (device.adapter.info as { isFallbackAdapter?: boolean }).isFallbackAdapter === true;
}

function requireFloat32(op: string, ...ts: NDArray[]): void {
  for (const t of ts) {
    if (t.dtype !== "float32") {
      throw new TypeError(`WebGPU ${op} supports float32 tensors, not ${t.dtype}`);
    }
  }
}

/**
 * Runs `body(operands, target)` with bool operands and a bool output as
 * int32 temporaries (WGSL has no byte elements): bools are converted in
 * and the int32 result converted out.
 */
function withWords(
  operands: readonly NDArray[],
  out: NDArray,
  body: (words: readonly NDArray[], target: NDArray) => void,
): void {
  const temps: NDArray[] = [];
  const word = (t: NDArray) => {
    if (t.dtype !== "bool") return t;
    const w = NDArray.empty(t.shape, "int32", t.device);
    temps.push(w);
    convert(t, contiguousStrides(t.shape), w);
    return w;
  };
  try {
    const words = operands.map(word);
    if (out.dtype !== "bool") return body(words, out);
    const target = NDArray.empty(out.shape, "int32", out.device);
    temps.push(target);
    body(words, target);
    convert(target, contiguousStrides(target.shape), out);
  } finally {
    for (const t of temps) t.releaseIfUnowned();
  }
}

/** The WebGPU kernels. */
export const webgpuBackend: Partial<OpBackend> = {
  unary(op: UnaryOp, x: NDArray, out: NDArray): void {
    elementwise(unaryFn(op, wgslType(x.dtype)), [x], [contiguousStrides(x.shape)], out);
  },

  binary(op: BinaryOp, a: NDArray, b: NDArray, out: NDArray): void {
    elementwise(
      binaryFn(
        op,
        wgslType(a.dtype),
        op === "divide" && !isFallbackAdapter(out.device as WebGPUDevice),
      ),
      [a, b],
      [broadcastStrides(a.shape, out.shape), broadcastStrides(b.shape, out.shape)],
      out,
    );
  },

  compare(op: CompareOp, a: NDArray, b: NDArray, out: NDArray): void {
    withWords([a, b], out, ([x, y], target) =>
      elementwise(
        compareFn(op, wgslType(x.dtype)),
        [x, y],
        [broadcastStrides(x.shape, target.shape), broadcastStrides(y.shape, target.shape)],
        target,
      ));
  },

  where(cond: NDArray, x: NDArray, y: NDArray, out: NDArray): void {
    withWords(
      [cond, x, y],
      out,
      (words, target) =>
        elementwise(
          WHERE_FN,
          words,
          words.map((w) => broadcastStrides(w.shape, target.shape)),
          target,
        ),
    );
  },

  matmul(a: NDArray, b: NDArray, out: NDArray): void {
    requireFloat32("matmul", a, b);
    if (out.size === 0) return;
    withDistinctOutput([a, b], out, (target) => {
      const program = matmulProgram({
        aShape: a.shape,
        bShape: b.shape,
        offsets: [elementOffset(a), elementOffset(b), elementOffset(target)],
      });
      run(program, [a, b], target);
    });
  },

  linear(x: NDArray, w: NDArray, bias: NDArray | null, out: NDArray): void {
    requireFloat32("linear", x, w, ...(bias === null ? [] : [bias]));
    if (out.size === 0) return;
    const [N, K] = w.shape;
    const inputs = bias === null ? [x, w, x] : [x, w, bias];
    withDistinctOutput(inputs, out, (target) => {
      const program = linearProgram({
        M: out.size / N,
        K,
        N,
        bias: bias !== null,
        offsets: [
          elementOffset(x),
          elementOffset(w),
          bias === null ? 0 : elementOffset(bias),
          elementOffset(target),
        ],
      });
      run(program, inputs, target);
    });
  },

  conv2d(
    x: NDArray,
    w: NDArray,
    bias: NDArray | null,
    geometry: Conv2dGeometry,
    out: NDArray,
  ): void {
    requireFloat32("conv2d", x, w, ...(bias === null ? [] : [bias]));
    if (out.size === 0) return;
    convolve(x, w, bias, geometry, out);
    const steps = geometry.epilogue;
    if (steps !== undefined && steps.length > 0) {
      run(epilogueProgram(out.size, steps, elementOffset(out)), [], out);
    }
  },

  reduce(op: ReduceOp, x: NDArray, axes: readonly number[], out: NDArray): void {
    if (out.size === 0) return;
    withDistinctOutput([x], out, (target) => {
      const plan = planReduction(
        op,
        wgslType(x.dtype),
        x.shape,
        axes,
        elementOffset(x),
        elementOffset(target),
      );
      // Partial results between passes live in temporaries from the active allocator;
      // releasing them right after recording is safe because later work runs in queue order.
      const temps = plan.temporaries.map((n) =>
        NDArray.empty([n], x.dtype as TensorDType, x.device)
      );
      try {
        const chain = [x, ...temps, target];
        plan.passes.forEach((p, i) => run(p, [chain[i]], chain[i + 1]));
      } finally {
        for (const t of temps) t.releaseIfUnowned();
      }
    });
  },

  softmax(x: NDArray, out: NDArray): void {
    requireFloat32("softmax", x);
    if (out.size === 0) return;
    const n = x.shape.length === 0 ? 1 : x.shape[x.shape.length - 1];
    withDistinctOutput([x], out, (target) => {
      run(softmaxProgram(x.size / n, n, elementOffset(x), elementOffset(target)), [x], target);
    });
  },

  layerNorm(x: NDArray, gamma: NDArray, beta: NDArray, eps: number, out: NDArray): void {
    requireFloat32("layer_norm", x, gamma, beta);
    if (out.size === 0) return;
    const n = gamma.size;
    withDistinctOutput([x, gamma, beta], out, (target) => {
      const program = layerNormProgram(x.size / n, n, eps, {
        x: elementOffset(x),
        gamma: elementOffset(gamma),
        beta: elementOffset(beta),
        out: elementOffset(target),
      });
      run(program, [x, gamma, beta], target);
    });
  },

  transpose(x: NDArray, perm: readonly number[], out: NDArray): void {
    const own = contiguousStrides(x.shape);
    const strides = perm.map((p) => own[p]);
    if (WORD_TYPES.has(x.dtype)) elementwise(IDENTITY_FN, [x], [strides], out);
    else convert(x, strides, out);
  },

  cast(x: NDArray, out: NDArray): void {
    if (out.size === 0) return;
    if (x.dtype === out.dtype) {
      out.device.copyBlock(bufferOf(x), x.byteOffset, bufferOf(out), out.byteOffset, out.nbytes);
      return;
    }
    // WGSL's own float → integer conversion leaves NaN and out-of-range values to the
    // implementation; the convert template spells out the saturating rule instead.
    const floatToInt = x.dtype === "float32" && out.dtype !== "float32";
    if (WORD_TYPES.has(x.dtype) && WORD_TYPES.has(out.dtype) && !floatToInt) {
      elementwise(CAST_FN, [x], [contiguousStrides(x.shape)], out);
    } else {
      convert(x, contiguousStrides(x.shape), out);
    }
  },

  take(x: NDArray, indices: NDArray, axis: number, mode: TakeMode, out: NDArray): void {
    if (out.size === 0) return;
    let inner = 1;
    for (let d = axis + 1; d < x.shape.length; d++) inner *= x.shape[d];
    const bytes = elementBytes(x.dtype);
    const rowWords = wordsOf(inner * bytes), offX = wordsOf(x.byteOffset);
    if (rowWords === undefined || offX === undefined) {
      // Gathering sub-word rows would need index values on the host to copy bytes.
      throw new TypeError(
        `WebGPU take copies 4-byte words: rows of ${inner} ${x.dtype} elements ` +
          `(${inner * bytes} bytes) at byte ${x.byteOffset} are not whole words`,
      );
    }
    withDistinctOutput([x, indices], out, (target) => {
      const program = takeProgram({
        mode,
        words: out.nbytes / 4,
        rowWords,
        m: indices.size,
        n: x.shape[axis],
        offsets: [offX, elementOffset(indices), target.byteOffset / 4],
      });
      run(program, [x, indices], target);
    });
  },

  stridedSlice(x: NDArray, start: readonly number[], step: readonly number[], out: NDArray): void {
    if (out.size === 0) return;
    const { offset, strides } = sliceWindow(x.shape, start, step);
    if (WORD_TYPES.has(x.dtype)) elementwise(IDENTITY_FN, [x], [strides], out, [offset]);
    else convert(x, strides, out, offset);
  },

  concat(inputs: readonly NDArray[], axis: number, out: NDArray): void {
    if (out.size === 0) return;
    const { outer, outRow, rows, starts } = concatLayout(inputs, axis, out);
    const bytes = elementBytes(out.dtype);
    withDistinctOutput(inputs, out, (target) => {
      const dst = bufferOf(target);
      inputs.forEach((x, k) => {
        if (rows[k] === 0) return;
        const src = bufferOf(x);
        const dstByte = target.byteOffset + starts[k] * bytes;
        if (outer === 1) {
          target.device.copyBlock(src, x.byteOffset, dst, dstByte, x.nbytes);
          return;
        }
        const words = [rows[k] * bytes, x.byteOffset, dstByte, outRow * bytes].map(wordsOf);
        if (words.every((w) => w !== undefined)) {
          const [rowWords, srcOffset, dstOffset, dstStride] = words as number[];
          run(rowCopyProgram({ rows: outer, rowWords, srcOffset, dstOffset, dstStride }), [
            x,
          ], target);
          return;
        }
        // Rows that are not whole words (8- and 16-bit dtypes): one byte copy per row.
        for (let p = 0; p < outer; p++) {
          target.device.copyBlock(
            src,
            x.byteOffset + p * rows[k] * bytes,
            dst,
            dstByte + p * outRow * bytes,
            rows[k] * bytes,
          );
        }
      });
    });
  },

  argmax(x: NDArray, outer: number, n: number, inner: number, out: NDArray): void {
    if (out.size === 0) return;
    withDistinctOutput([x], out, (target) => {
      const program = argmaxProgram({
        outer,
        n,
        inner,
        type: wgslType(x.dtype),
        offsets: [elementOffset(x), elementOffset(target)],
      });
      run(program, [x], target);
    });
  },

  sampleTopP(
    logits: NDArray,
    uniform: NDArray,
    temperature: number,
    topP: number,
    out: NDArray,
  ): void {
    requireFloat32("sample_top_p", logits, uniform);
    if (out.size === 0) return;
    const V = logits.shape[logits.shape.length - 1];
    withDistinctOutput([logits, uniform], out, (target) => {
      // The weights of every row, written and re-read by the kernel; released once recorded
      // (later work runs in queue order).
      const scratch = NDArray.empty([out.size * V], "float32", out.device);
      try {
        const program = sampleTopPProgram({
          rows: out.size,
          V,
          temperature,
          topP,
          offsets: [elementOffset(logits), elementOffset(uniform), elementOffset(target), 0],
        });
        runProgram(kernelContext(out.device), program, [
          bufferOf(logits),
          bufferOf(uniform),
          bufferOf(target),
          bufferOf(scratch),
        ]);
      } finally {
        scratch.releaseIfUnowned();
      }
    });
  },

  causalMask(x: NDArray, offset: number, out: NDArray): void {
    requireFloat32("causal_mask", x);
    if (out.size === 0) return;
    const rank = x.shape.length;
    const m = x.shape[rank - 2], n = x.shape[rank - 1];
    withDistinctOutput([x], out, (target) => {
      const program = causalMaskProgram({
        size: x.size,
        m,
        n,
        offset,
        offsets: [elementOffset(x), elementOffset(target)],
      });
      run(program, [x], target);
    });
  },

  attention(
    q: NDArray,
    k: NDArray,
    v: NDArray,
    scale: number,
    causalOffset: number | null,
    out: NDArray,
    layout: AttentionLayout,
  ): void {
    requireFloat32("attention", q, k, v);
    if (out.size === 0) return;
    const geometry = attentionGeometry(q.shape, k.shape, v.shape, layout);
    const { D, Dv } = geometry;
    const rows = out.size / Dv;
    const fallback = isFallbackAdapter(out.device as WebGPUDevice);
    withDistinctOutput([q, k, v], out, (target) => {
      const program = attentionProgram({
        geometry,
        scale,
        causalOffset,
        offsets: [elementOffset(q), elementOffset(k), elementOffset(v), elementOffset(target)],
        perThread: attentionPerThread(rows, D, Dv, fallback),
      });
      run(program, [q, k, v], target);
    });
  },

  pagedAttention(
    qkv: NDArray,
    pages: NDArray,
    batch: PagedAttentionBatch,
    scale: number,
    out: NDArray,
  ): void {
    requireFloat32("paged_attention", qkv, pages);
    if (batch.headDim > PAGED_MAX_HEAD_DIM) {
      throw new RangeError(
        `WebGPU paged_attention supports head sizes up to ${PAGED_MAX_HEAD_DIM}, not ${batch.headDim}`,
      );
    }
    const T = qkv.shape[0];
    if (T === 0) return;
    const words = pagedAttentionMeta(batch);
    const meta = NDArray.empty([words.length], "uint32", out.device);
    try {
      out.device.writeBlock(
        bufferOf(meta),
        meta.byteOffset,
        new Uint8Array(words.buffer, 0, words.byteLength),
      );
      const offsets = [elementOffset(qkv), elementOffset(pages), elementOffset(out)] as const;
      const ctx = kernelContext(out.device);
      runProgram(ctx, pagedAppendProgram(batch, T, offsets), [
        bufferOf(qkv),
        bufferOf(meta),
        bufferOf(pages),
      ]);
      withDistinctOutput([qkv, pages, meta], out, (target) => {
        const at = [offsets[0], offsets[1], elementOffset(target)] as const;
        run(pagedAttendProgram(batch, T, at, scale), [qkv, pages, meta], target);
      });
    } finally {
      meta.releaseIfUnowned();
    }
  },
};

/** `out = conv2d(x, w) + bias` on the device: pointwise, through im2col, or direct. */
function convolve(
  x: NDArray,
  w: NDArray,
  bias: NDArray | null,
  geometry: Conv2dGeometry,
  out: NDArray,
): void {
  const inputs = bias === null ? [x, w, x] : [x, w, bias];
  const shapes = { x: x.shape, w: w.shape, out: out.shape };
  if (isPointwise(shapes, geometry)) {
    const [N, C, H, W] = x.shape, M = w.shape[0];
    withDistinctOutput(inputs, out, (target) => {
      const product = matmulProgram({
        aShape: [M, C],
        bShape: [N, C, H * W],
        offsets: [elementOffset(w), elementOffset(x), elementOffset(target)],
      });
      run(product, [w, x], target);
      if (bias !== null) {
        const add = biasProgram(out.size, H * W, M, elementOffset(bias), elementOffset(target));
        run(add, [bias], target);
      }
    });
    return;
  }
  if (viaIm2col(shapes, geometry)) {
    // Windows into a temporary [N, C·KH·KW, OH·OW], then w [M, C·KH·KW] @ it.
    const [N, C] = x.shape, [M, , KH, KW] = w.shape, plane = out.shape[2] * out.shape[3];
    const cols = NDArray.empty([N, C * KH * KW, plane], "float32", out.device);
    try {
      run(im2colProgram(shapes, geometry, elementOffset(x), elementOffset(cols)), [x], cols);
      withDistinctOutput([w, cols, ...(bias === null ? [] : [bias])], out, (target) => {
        const product = matmulProgram({
          aShape: [M, C * KH * KW],
          bShape: cols.shape,
          offsets: [elementOffset(w), elementOffset(cols), elementOffset(target)],
        });
        run(product, [w, cols], target);
        if (bias !== null) {
          const add = biasProgram(out.size, plane, M, elementOffset(bias), elementOffset(target));
          run(add, [bias], target);
        }
      });
    } finally {
      cols.releaseIfUnowned();
    }
    return;
  }
  withDistinctOutput(inputs, out, (target) => {
    const program = conv2dProgram(
      { x: x.shape, w: w.shape, out: out.shape },
      geometry,
      bias !== null,
      [
        elementOffset(x),
        elementOffset(w),
        bias === null ? 0 : elementOffset(bias),
        elementOffset(target),
      ],
    );
    run(program, inputs, target);
  });
}

/**
 * The CPU operator backend: TypedArray kernels over `NDArray.readView()` of their inputs (which
 * leaves a sealed weight sealed) and `cpuView()` of the outputs they allocate,
 * installed for `cpu` devices by kernels/install.ts. The operator front end
 * (builtins/operators/tensor_operators.ts) checks arguments and allocates outputs; these
 * kernels only compute. They are also the reference the GPU kernels are
 * tested against.
 *
 * @module
 */

import type { OpBackend } from "../kernel_backend.ts";
import { attentionKernel, causalMaskKernel } from "./attention.ts";
import { castKernel } from "./cast.ts";
import { compareKernel, whereKernel } from "./compare.ts";
import { concatKernel } from "./concat.ts";
import { conv2dKernel } from "./conv2d.ts";
import { binaryKernel, unaryKernel } from "./elementwise.ts";
import { layerNormKernel } from "./layer_norm.ts";
import { linearKernel } from "./linear.ts";
import { matmulKernel } from "./matmul.ts";
import { pagedAttentionKernel } from "./paged_attention.ts";
import { reduceKernel } from "./reduce.ts";
import { argmaxKernel, sampleTopPKernel } from "./sampling.ts";
import { stridedSliceKernel } from "./slice.ts";
import { softmaxKernel } from "./softmax.ts";
import { takeKernel } from "./take.ts";
import { transposeKernel } from "./transpose.ts";

/** The CPU kernels by op (every op has one); registered for `cpu` devices by kernels/install.ts. */
export const cpuBackend: Partial<OpBackend> = {
  unary: unaryKernel,
  binary: binaryKernel,
  compare: compareKernel,
  where: whereKernel,
  matmul: matmulKernel,
  linear: linearKernel,
  conv2d: conv2dKernel,
  reduce: reduceKernel,
  softmax: softmaxKernel,
  layerNorm: layerNormKernel,
  transpose: transposeKernel,
  cast: castKernel,
  take: takeKernel,
  stridedSlice: stridedSliceKernel,
  concat: concatKernel,
  argmax: argmaxKernel,
  sampleTopP: sampleTopPKernel,
  causalMask: causalMaskKernel,
  attention: attentionKernel,
  pagedAttention: pagedAttentionKernel,
};

/**
 * all-MiniLM-L6-v2 as ONNX (`tools/onnx/minilm_onnx.py`'s model) imported
 * with `importONNX`, on the CPU against onnxruntime
 * (`_minilm_onnx_checks.ts`); here also the model itself against the
 * PyTorch reference embeddings in testdata/minilm/, through onnxruntime, so
 * the hand-built graph is shown to be MiniLM, and a token count past the
 * 512 positions failing at run time. The WebGPU run is
 * `webgpu/minilm_onnx_suite.ts`. Ignored with a message without the weights
 * or the onnx venv (CI's RELAXVM_REQUIRE_* make that a failure).
 *
 * @module
 */

import { assert, assertRejects } from "@std/assert";
import { cpu, tensor } from "../mod.ts";
import {
  defineMiniLMOnnxTests,
  embedOnnxruntime,
  ensureMiniLMOnnx,
  ignoreMiniLMOnnx,
  referenceIds,
  withModel,
} from "./_minilm_onnx_checks.ts";
import { relativeError } from "./_onnx_reference.ts";

const ignore = ignoreMiniLMOnnx();
defineMiniLMOnnxTests(
  "cpu",
  () => Promise.resolve(cpu()),
  (name, fn) => Deno.test({ name, ignore, fn }),
);

Deno.test({
  name:
    "tools/onnx/minilm_onnx.py's model on onnxruntime matches sentence-transformers' embeddings (testdata/minilm)",
  ignore,
  fn: async () => {
    await ensureMiniLMOnnx();
    const all = await Deno.readFile(new URL("../testdata/minilm/embeddings.bin", import.meta.url));
    const reference = new Float32Array(all.buffer, all.byteOffset, all.byteLength / 4);
    // Every sentence, in batches padded to their longest: the mask arithmetic is exercised too.
    const ids = await referenceIds(0, reference.length / 384);
    const batches = [ids.slice(0, 1), ids.slice(1, 40), ids.slice(40)];
    const got = await embedOnnxruntime(batches);
    let at = 0;
    for (const [i, out] of got.entries()) {
      const want = reference.subarray(at, at + out.length);
      at += out.length;
      const err = relativeError(out, want);
      assert(err <= 1e-5, `batch ${i}: max |Δ| / max |want| ${err.toExponential(2)}`);
    }
  },
});

Deno.test({
  name:
    "MiniLM as ONNX imported without inputShapes: 513 tokens (past the 512 positions) fail at the first Slice by the token count",
  ignore,
  fn: async () => {
    await withModel(cpu(), undefined, async (vm, params) => {
      using ids = tensor(new BigInt64Array(513), { shape: [1, 513] });
      using mask = tensor(new BigInt64Array(513).fill(1n), { shape: [1, 513] });
      await assertRejects(
        () => vm.invokeTensor("main", ids, mask, [...params]),
        Error,
        "/bert/Slice (Slice): match_shape: dimension 1 is 512, expected 513",
      );
    });
  },
});

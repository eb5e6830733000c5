/**
 * all-MiniLM-L6-v2 as ONNX (`.weights/all-MiniLM-L6-v2/model.onnx`, which
 * `tools/minilm_reference.sh --onnx` exports from the sentence-transformers
 * model with torch.onnx: encoder, mean pooling and normalization) imported
 * with `importONNX` and run against onnxruntime on the same token ids: the
 * reference sentences' ids (`testdata/minilm/reference.json`), one alone and
 * eight padded to the longest, embeddings within max |Δ| / max |want| ≤
 * 1e-4. The importer takes the batch and token counts at import
 * (`inputShapes`): the export slices its position ids by the token count,
 * which relaxvm's `strided_slice` needs as a number. Shared by
 * `minilm_onnx_test.ts` (CPU) and `webgpu/minilm_onnx_suite.ts`.
 *
 * The ONNX file is not fetched (it comes from a 7 GB PyTorch venv, not CI's):
 * without it these checks are ignored, with a message saying how to make it.
 *
 * @module
 */

import { assert } from "@std/assert";
import { type Device, importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { padBatch } from "../models/minilm/session.ts";
import { haveOnnxruntime, onnxruntimeRun, relativeError } from "./_onnx_reference.ts";
import { weightsDir } from "./_weights.ts";

/** The exported model. */
export const MINILM_ONNX = new URL("model.onnx", weightsDir("all-MiniLM-L6-v2"));

/** The bound: max |Δ| / max |want| over the batch's embeddings. */
export const BOUND = 1e-4;

/** Whether the checks are ignored here: no model.onnx, or no onnxruntime venv. */
export function ignoreMiniLMOnnx(): boolean {
  try {
    Deno.statSync(MINILM_ONNX);
  } catch {
    console.warn(
      `${MINILM_ONNX.pathname} is missing: the MiniLM-ONNX checks are ignored (make it with tools/minilm_reference.sh --onnx)`,
    );
    return true;
  }
  return !haveOnnxruntime();
}

/** The first `n` reference sentences' token ids. */
export async function referenceIds(n: number): Promise<number[][]> {
  const ref = JSON.parse(
    await Deno.readTextFile(new URL("../testdata/minilm/reference.json", import.meta.url)),
  );
  return (ref.ids as number[][]).slice(0, n);
}

/** Embeds `batch` (token ids, padded) with the imported model on `device`. */
export async function embedOnnx(
  device: Device | undefined,
  batch: readonly (readonly number[])[],
): Promise<Float32Array> {
  const b = padBatch(batch);
  const shape = [b.rows, b.length];
  using model = await importONNX(MINILM_ONNX, {
    inputShapes: { input_ids: shape, attention_mask: shape },
  });
  const params: NDArray[] = device === undefined || device.kind === "cpu"
    ? [...model.params]
    : await Promise.all(model.params.map((p) => p.copyTo(device)));
  try {
    const vm = new VirtualMachine(model.executable, device);
    using ids = tensor(BigInt64Array.from(b.ids, BigInt), { shape });
    using mask = tensor(BigInt64Array.from(b.mask, BigInt), { shape });
    using out = await vm.invokeTensor("main", ids, mask, params);
    return new Float32Array(await out.data() as Float32Array);
  } finally {
    if (params[0] !== model.params[0]) { for (const p of params) p.dispose(); }
  }
}

/** onnxruntime's embeddings of the same padded batch. */
export async function embedOnnxruntime(
  batch: readonly (readonly number[])[],
): Promise<Float32Array> {
  const b = padBatch(batch);
  const shape = [b.rows, b.length];
  const [out] = await onnxruntimeRun(MINILM_ONNX, [{
    input_ids: { dtype: "int64", shape, data: BigInt64Array.from(b.ids, BigInt) },
    attention_mask: { dtype: "int64", shape, data: BigInt64Array.from(b.mask, BigInt) },
  }]);
  return out.embeddings.data as Float32Array;
}

/** Registers the checks through `register`, on the device `getDevice` gives. */
export function defineMiniLMOnnxTests(
  label: string,
  getDevice: () => Promise<Device | undefined>,
  register: (name: string, fn: () => Promise<void>) => void,
): void {
  for (const n of [1, 8]) {
    register(
      `${label}: all-MiniLM-L6-v2 exported to ONNX, imported, matches onnxruntime on ${n} sentence(s)`,
      async () => {
        const batch = await referenceIds(n);
        const got = await embedOnnx(await getDevice(), batch);
        const want = await embedOnnxruntime(batch);
        const err = relativeError(got, want);
        assert(err <= BOUND, `max |Δ| / max |want| ${err.toExponential(2)} on ${label}`);
      },
    );
  }
}

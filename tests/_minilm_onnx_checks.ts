/**
 * all-MiniLM-L6-v2 as ONNX (`.weights/all-MiniLM-L6-v2/model.onnx`) imported
 * with `importONNX` and run against onnxruntime on the same token ids: the
 * reference sentences' ids (`testdata/minilm/reference.json`), embeddings
 * within max |Δ| / max |want| ≤ 1e-4. One import without `inputShapes` runs
 * every batch (1 sentence of 8 tokens, 8 padded to 14, 3 padded to 13): the
 * export's symbolic batch and token counts stay symbols, its slices of the
 * position ids by the token count read them from the shape heap. Shared by
 * `minilm_onnx_test.ts` (CPU) and `webgpu/minilm_onnx_suite.ts`.
 *
 * The model is `tools/onnx/minilm_onnx.py`'s: the graph torch.onnx writes for
 * it, rebuilt with onnx.helper from the pinned weights (CI has no PyTorch).
 * `tools/fetch_weights.sh` makes it; {@link ensureMiniLMOnnx} makes it when
 * missing. Without the weights or the onnx venv these checks are ignored,
 * unless `RELAXVM_REQUIRE_WEIGHTS=1` / `RELAXVM_REQUIRE_ONNX=1` (CI) make that
 * a failure.
 *
 * @module
 */

import { assert } from "@std/assert";
import {
  type Device,
  type Executable,
  importONNX,
  type NDArray,
  tensor,
  VirtualMachine,
} from "../mod.ts";
import { padBatch } from "../models/minilm/session.ts";
import { haveOnnxruntime, onnxruntimeRun, relativeError } from "./_onnx_reference.ts";
import { ignoreWithoutWeights, requireWeights, weightsDir } from "./_weights.ts";

const DIR = weightsDir("all-MiniLM-L6-v2");

/** The model `tools/onnx/minilm_onnx.py` writes from the tensor cache. */
export const MINILM_ONNX = new URL("model.onnx", DIR);

/** What the script reads. */
const CACHE = ["tensor-cache.json"];

/** The bound: max |Δ| / max |want| over the batch's embeddings. */
export const BOUND = 1e-4;

/** Batches of the reference sentences: [first, count]; two token counts and batch sizes. */
export const BATCHES: readonly [number, number][] = [[0, 1], [0, 8], [11, 3]];

/** Whether the checks are ignored here: no weights, or no onnxruntime venv. */
export function ignoreMiniLMOnnx(): boolean {
  return ignoreWithoutWeights("all-MiniLM-L6-v2", DIR, CACHE) || !haveOnnxruntime();
}

let made: Promise<void> | undefined;
/**
 * Makes model.onnx with `tools/onnx/minilm_onnx.py` when it is missing
 * (weights fetched before the script existed); the script replaces the file
 * whole, so two suites racing here both see a complete one.
 */
export function ensureMiniLMOnnx(): Promise<void> {
  made ??= (async () => {
    requireWeights("all-MiniLM-L6-v2", DIR, CACHE);
    try {
      await Deno.stat(MINILM_ONNX);
      return;
    } catch { /* make it */ }
    const root = new URL("../", import.meta.url);
    const { code, stderr } = await new Deno.Command(
      new URL("tools/onnx/.venv/bin/python", root),
      {
        args: [new URL("tools/onnx/minilm_onnx.py", root).pathname, DIR.pathname],
        stdout: "null",
        stderr: "piped",
      },
    ).output();
    if (code !== 0) {
      throw new Error(`tools/onnx/minilm_onnx.py failed: ${new TextDecoder().decode(stderr)}`);
    }
  })();
  return made;
}

/** Reference sentences `first` to `first + n`: token ids. */
export async function referenceIds(first: number, n: number): Promise<number[][]> {
  const ref = JSON.parse(
    await Deno.readTextFile(new URL("../testdata/minilm/reference.json", import.meta.url)),
  );
  return (ref.ids as number[][]).slice(first, first + n);
}

/** The padded batch as int64 ids and mask of shape [rows, length]. */
function feeds(batch: readonly (readonly number[])[]) {
  const b = padBatch(batch);
  const shape = [b.rows, b.length];
  return {
    shape,
    ids: BigInt64Array.from(b.ids, BigInt),
    mask: BigInt64Array.from(b.mask, BigInt),
  };
}

/** Embeds `batch` (token ids, padded) with an imported model's executable and params. */
export async function embedOnnx(
  vm: VirtualMachine,
  params: readonly NDArray[],
  batch: readonly (readonly number[])[],
): Promise<Float32Array> {
  const f = feeds(batch);
  using ids = tensor(f.ids, { shape: f.shape });
  using mask = tensor(f.mask, { shape: f.shape });
  using out = await vm.invokeTensor("main", ids, mask, [...params]);
  return new Float32Array(await out.data() as Float32Array);
}

/** onnxruntime's embeddings of the same padded batches, one session. */
export async function embedOnnxruntime(
  batches: readonly (readonly (readonly number[])[])[],
): Promise<Float32Array[]> {
  const outs = await onnxruntimeRun(
    MINILM_ONNX,
    batches.map((batch) => {
      const f = feeds(batch);
      return {
        input_ids: { dtype: "int64", shape: f.shape, data: f.ids },
        attention_mask: { dtype: "int64", shape: f.shape, data: f.mask },
      };
    }),
  );
  return outs.map((o) => o.embeddings.data as Float32Array);
}

/** Runs `fn` with the model imported (shapes symbolic, or fixed by `inputShapes`) on `device`. */
export async function withModel<T>(
  device: Device | undefined,
  shape: number[] | undefined,
  fn: (vm: VirtualMachine, params: readonly NDArray[], executable: Executable) => Promise<T>,
): Promise<T> {
  await ensureMiniLMOnnx();
  using model = await importONNX(
    MINILM_ONNX,
    shape === undefined ? {} : { inputShapes: { input_ids: shape, attention_mask: shape } },
  );
  const onCpu = device === undefined || device.kind === "cpu";
  const params = onCpu
    ? [...model.params]
    : await Promise.all(model.params.map((p) => p.copyTo(device)));
  try {
    return await fn(new VirtualMachine(model.executable, device), params, model.executable);
  } finally {
    if (!onCpu) { for (const p of params) p.dispose(); }
  }
}

/** Registers the checks through `register`, on the device `getDevice` gives. */
export function defineMiniLMOnnxTests(
  label: string,
  getDevice: () => Promise<Device | undefined>,
  register: (name: string, fn: () => Promise<void>) => void,
): void {
  register(
    `${label}: all-MiniLM-L6-v2 as ONNX, one import for batches of 1, 8 and 3 sentences (8, 14 and 13 tokens), matches onnxruntime`,
    async () => {
      const batches = await Promise.all(BATCHES.map(([first, n]) => referenceIds(first, n)));
      await ensureMiniLMOnnx();
      const want = await embedOnnxruntime(batches);
      await withModel(await getDevice(), undefined, async (vm, params) => {
        for (const [i, batch] of batches.entries()) {
          const got = await embedOnnx(vm, params, batch);
          const err = relativeError(got, want[i]);
          assert(
            err <= BOUND,
            `${batch.length} sentence(s): max |Δ| / max |want| ${err.toExponential(2)} on ${label}`,
          );
        }
      });
    },
  );
  register(
    `${label}: all-MiniLM-L6-v2 as ONNX imported for one input shape (inputShapes) matches onnxruntime`,
    async () => {
      const batch = await referenceIds(0, 8);
      const { shape } = feeds(batch);
      await ensureMiniLMOnnx();
      const [want] = await embedOnnxruntime([batch]);
      await withModel(await getDevice(), shape, async (vm, params) => {
        const err = relativeError(await embedOnnx(vm, params, batch), want);
        assert(err <= BOUND, `max |Δ| / max |want| ${err.toExponential(2)} on ${label}`);
      });
    },
  );
}

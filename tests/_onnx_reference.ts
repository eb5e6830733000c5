/**
 * onnxruntime (the pinned `tools/onnx/.venv`, through
 * `tools/onnx/ort_reference.py`) as the reference the real-model tests
 * compare relaxvm's imported models against, and the measure they use:
 * max |Δ| / max |want|.
 *
 * @module
 */

const REPO = new URL("../", import.meta.url);
const PYTHON = new URL("tools/onnx/.venv/bin/python", REPO);

/** A tensor fed to or read from onnxruntime. */
export interface RefTensor {
  dtype: "float32" | "int64";
  shape: number[];
  data: Float32Array | BigInt64Array;
}

/** Whether the pinned venv is there; with `RELAXVM_REQUIRE_ONNX=1` its absence fails instead. */
export function haveOnnxruntime(): boolean {
  try {
    Deno.statSync(PYTHON);
    return true;
  } catch {
    if (Deno.env.get("RELAXVM_REQUIRE_ONNX") === "1") return true; // fail in the test, not ignore
    console.warn(
      "no tools/onnx/.venv: the tests against onnxruntime are ignored (bash tools/onnx/setup.sh)",
    );
    return false;
  }
}

const b64 = (t: RefTensor) => {
  const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
};

/**
 * Runs `model` on onnxruntime's CPU provider once per entry of `calls`, in
 * one session; `carry` maps an output to the input the next call takes it
 * as, when that call does not give it. Resolves to each call's outputs.
 */
export async function onnxruntimeRun(
  model: string | URL,
  calls: Record<string, RefTensor>[],
  carry: Record<string, string> = {},
): Promise<Record<string, RefTensor>[]> {
  const request = {
    calls: calls.map((feeds) =>
      Object.fromEntries(
        Object.entries(feeds).map((
          [k, t],
        ) => [k, { dtype: t.dtype, shape: t.shape, data: b64(t) }]),
      )
    ),
    carry,
  };
  const child = new Deno.Command(PYTHON, {
    args: [
      new URL("tools/onnx/ort_reference.py", REPO).pathname,
      String(model instanceof URL ? model.pathname : model),
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(JSON.stringify(request)));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  if (code !== 0) throw new Error(`ort_reference.py failed: ${new TextDecoder().decode(stderr)}`);
  const reply = JSON.parse(new TextDecoder().decode(stdout));
  return reply.outputs.map((
    outs: Record<string, { dtype: string; shape: number[]; data: string }>,
  ) =>
    Object.fromEntries(
      Object.entries(outs).map(([k, t]) => {
        const raw = Uint8Array.from(atob(t.data), (c) => c.charCodeAt(0));
        const data = t.dtype === "float32"
          ? new Float32Array(raw.buffer)
          : new BigInt64Array(raw.buffer);
        return [k, { dtype: t.dtype, shape: t.shape, data }];
      }),
    )
  );
}

/** max |got − want| / max |want| over every element. */
export function relativeError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  if (got.length !== want.length) throw new Error(`${got.length} values, expected ${want.length}`);
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    diff = Math.max(diff, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return scale === 0 ? diff : diff / scale;
}

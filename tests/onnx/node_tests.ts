/**
 * ONNX's own node tests (the `onnx` wheel's `onnx/backend/test/data/node/*`:
 * a one-operator `model.onnx` and `test_data_set_0/{input,output}_*.pb`) run
 * through `importONNX` and the VM, compared as ONNX's backend test runner
 * compares (`numpy.testing.assert_allclose` with rtol 1e-3, atol 1e-7, the
 * same dtype and shape). Used by `run_node_tests.ts` (every test, the README
 * table) and `tests/onnx_node_tests_test.ts` (the committed passing list).
 *
 * @module
 */

import {
  type Device,
  importONNX,
  type NDArray,
  ONNXImportError,
  UnsupportedONNXError,
  VirtualMachine,
} from "../../mod.ts";
import { decodeModel } from "../../onnx/onnx_proto.ts";
import { decodeTensor as decodeONNXTensor } from "../../onnx/onnx_tensor.ts";

/** ONNX's backend runner's tolerances (onnx/backend/test/runner: rtol 1e-3, atol 1e-7). */
export const RTOL = 1e-3, ATOL = 1e-7;

/** What one node test gave. */
export interface NodeTestResult {
  /** The test's folder name (`test_add_bcast`). */
  name: string;
  /** The operator it tests. */
  op: string;
  /** `unsupported`: the importer refused it (or its data); `fail`: it ran and differed, or threw. */
  status: "pass" | "fail" | "unsupported";
  /** Why, for anything but a pass. */
  detail: string;
}

/** The node tests' folder in the pinned venv, or null when there is no venv. */
export async function nodeTestRoot(repo: URL): Promise<string | null> {
  const lib = new URL("tools/onnx/.venv/lib/", repo);
  try {
    for await (const e of Deno.readDir(lib)) {
      if (!e.name.startsWith("python")) continue;
      const dir = new URL(`${e.name}/site-packages/onnx/backend/test/data/node/`, lib);
      if (await Deno.stat(dir).then(() => true, () => false)) return dir.pathname;
    }
  } catch {
    return null;
  }
  return null;
}

/** Every test's folder name under `root`, sorted. */
export async function nodeTestNames(root: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(root)) if (e.isDirectory) names.push(e.name);
  return names.sort();
}

const snake = (op: string) => op.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();

/** The operator a test is about: the op type whose snake_case name the folder name starts with. */
export function operatorOf(name: string, ops: string[]): string {
  const rest = name.replace(/^test_/, "");
  let best = ops[0] ?? "?";
  let bestLen = -1;
  for (const op of new Set(ops)) {
    const s = snake(op);
    if ((rest === s || rest.startsWith(`${s}_`)) && s.length > bestLen) {
      best = op;
      bestLen = s.length;
    }
  }
  return best;
}

/** Whether `got` matches `want` as `assert_allclose(rtol, atol)` does (NaN equals NaN). */
export async function compare(got: NDArray, want: NDArray): Promise<string | null> {
  if (got.dtype !== want.dtype) return `dtype ${got.dtype}, expected ${want.dtype}`;
  if (got.shape.join() !== want.shape.join()) {
    return `shape [${got.shape}], expected [${want.shape}]`;
  }
  const g = await got.data() as ArrayLike<number | bigint>;
  const w = want.dataSync() as ArrayLike<number | bigint>;
  return elementsDiffer(Array.from(g, Number), Array.from(w, Number));
}

/**
 * How elements `got` differ from `want` under the runner's tolerances (NaN
 * equals NaN, strings must be equal), or null when none does; `compare` here
 * and `compareValues` (ort_node_tests.ts) both judge by it.
 */
export function elementsDiffer(
  got: readonly (number | string)[],
  want: readonly (number | string)[],
): string | null {
  let bad = 0, first = "";
  for (let i = 0; i < want.length; i++) {
    const a = got[i], b = want[i];
    const ok = typeof b === "string" ? a === b : (Number.isNaN(a) && Number.isNaN(b)) ||
      a === b || Math.abs((a as number) - b) <= ATOL + RTOL * Math.abs(b);
    if (!ok && bad++ === 0) first = `[${i}] ${a} vs ${b}`;
  }
  return bad === 0 ? null : `${bad} of ${want.length} elements differ (first ${first})`;
}

/**
 * The start every runner of a node test shares: the model's bytes, the
 * operator it tests (`?` when the model does not decode: the runner reports
 * that), and `result`, which makes its `NodeTestResult` (a detail cut to
 * three lines, 300 characters).
 */
export async function openNodeTest(root: string, name: string): Promise<{
  dir: string;
  bytes: Uint8Array;
  result: (status: NodeTestResult["status"], detail?: string) => NodeTestResult;
}> {
  const dir = `${root}${name}/`;
  const bytes = await Deno.readFile(`${dir}model.onnx`);
  let op = "?";
  try {
    op = operatorOf(name, decodeModel(bytes).graph?.nodes.map((n) => n.opType) ?? []);
  } catch { /* the runner reports it */ }
  const result = (status: NodeTestResult["status"], detail = ""): NodeTestResult => ({
    name,
    op,
    status,
    detail: detail.split("\n").slice(0, 3).join(" ").slice(0, 300),
  });
  return { dir, bytes, result };
}

/**
 * `dir`'s `test_data_set_0`, listed now: `readAll` decodes its `input_*.pb`
 * (or `output_*.pb`) in order into `into`.
 */
export function testDataSet(dir: string): {
  readAll<T>(
    prefix: "input_" | "output_",
    decode: (bytes: Uint8Array) => T,
    into: T[],
  ): Promise<void>;
} {
  const data = `${dir}test_data_set_0/`;
  const files = [...Deno.readDirSync(data)].map((e) => e.name);
  const count = (prefix: string) => files.filter((f) => f.startsWith(prefix)).length;
  return {
    async readAll(prefix, decode, into) {
      for (let i = 0; i < count(prefix); i++) {
        into.push(decode(await Deno.readFile(`${data}${prefix}${i}.pb`)));
      }
    },
  };
}

/** Runs the test in `root/name` on `device` (default: the CPU). */
export async function runNodeTest(
  root: string,
  name: string,
  device?: Device,
): Promise<NodeTestResult> {
  const { dir, bytes, result } = await openNodeTest(root, name);
  let imported;
  try {
    imported = await importONNX(bytes);
  } catch (e) {
    if (e instanceof UnsupportedONNXError || e instanceof ONNXImportError) {
      return result("unsupported", (e as Error).message);
    }
    return result("fail", `import threw ${e}`);
  }
  const held: NDArray[] = [];
  try {
    const data = testDataSet(dir);
    const inputs: NDArray[] = [], wants: NDArray[] = [];
    try {
      await data.readAll("input_", decodeONNXTensor, inputs);
      await data.readAll("output_", decodeONNXTensor, wants);
    } catch (e) {
      return result("unsupported", `test data: ${(e as Error).message}`);
    } finally {
      held.push(...inputs, ...wants);
    }
    if (inputs.length !== imported.inputs.length) {
      return result("unsupported", `${inputs.length} inputs for ${imported.inputs.length}`);
    }
    const vm = new VirtualMachine(imported.executable, device);
    const args: unknown[] = [...inputs];
    if (imported.params.length > 0) args.push(imported.params);
    let out: unknown;
    try {
      out = await vm.invoke("main", ...args);
    } catch (e) {
      return result("fail", `run: ${(e as Error).message}`);
    }
    const outs = (wants.length === 1 ? [out] : out) as NDArray[];
    held.push(...outs);
    for (const [i, want] of wants.entries()) {
      const problem = await compare(outs[i], want);
      if (problem !== null) return result("fail", `output ${i}: ${problem}`);
    }
    return result("pass");
  } finally {
    for (const t of held) if (!t.disposed) t.dispose();
    imported[Symbol.dispose]();
  }
}

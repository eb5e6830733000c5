/**
 * The fixture of the TVM-compiled Llama's scenario (testdata/kv_state/tvm_llama.json,
 * written by tools/tvm/llama_trace.py from TVM's CPU build) and its package
 * (testdata/tvm_webgpu/llama, written by tools/tvm/llama_module.py), which
 * tests/webgpu/tvm_llama_suite.ts replays on WebGPU.
 *
 * Without TVM: the fixture covers the scenario and is consistent. With TVM
 * (tools/tvm/.venv), or required by `RELAXVM_REQUIRE_TVM=1`: TVM writes the same trace and
 * the same package again, so the fixture is TVM's and the package is its model.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { ignoreWithoutTvm, tvmPython } from "./tvm/tvm_python.ts";

interface Step {
  op: [string, ...unknown[]];
  logits?: number[][];
  summary?: number[][];
  argmax?: number[];
  tokens?: number[][];
  freePages: number;
  totalLength: number;
}
interface Trace {
  tvm: string;
  seed?: number;
  cache: number[];
  steps: Step[];
}

const ROOT = new URL("../", import.meta.url);
const TRACE = new URL("testdata/kv_state/tvm_llama.json", ROOT);
const PACKAGE = new URL("testdata/tvm_webgpu/llama/", ROOT);
const RANDOM = new URL("testdata/kv_state/tvm_llama_random.json", ROOT);

async function run(script: string, ...args: string[]): Promise<void> {
  const { code, stderr } = await new Deno.Command(tvmPython(), {
    args: [new URL(`tools/tvm/${script}`, ROOT).pathname, ...args],
    cwd: ROOT.pathname,
    stdout: "null",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, new TextDecoder().decode(stderr));
}

Deno.test("TVM Llama trace: the committed fixture covers the issue's scenario", async () => {
  const trace = JSON.parse(await Deno.readTextFile(TRACE)) as Trace;
  const kinds = trace.steps.map((s) => s.op[0]);
  for (
    const k of ["prefill", "batch_prefill", "batch_decode", "fork", "popn", "remove", "greedy"]
  ) {
    assert(kinds.includes(k), `no ${k} step`);
  }
  const pageSize = trace.cache[3];
  // A batched prefill of two sequences, one crossing a page.
  const bp = trace.steps.find((s) => s.op[0] === "batch_prefill")!;
  const lists = bp.op[2] as number[][];
  assertEquals(lists.length, 2);
  assert(lists.some((l) => l.length > pageSize));
  // Batch decodes of three and four sequences.
  const decodes = trace.steps.filter((s) => s.op[0] === "batch_decode");
  assertEquals(decodes.map((s) => (s.op[1] as number[]).length), [3, 4]);
  // A fork mid-page and one at the end.
  const forks = trace.steps.filter((s) => s.op[0] === "fork").map((s) => s.op[3]);
  assert(forks.some((p) => typeof p === "number" && p > 0 && p % pageSize !== 0));
  assert(forks.includes(-1));
  // A chunked prefill (two prefills in a row) onto a forked sequence.
  const forked = trace.steps.filter((s) => s.op[0] === "fork").map((s) => s.op[2]);
  const i = kinds.indexOf("prefill", kinds.indexOf("remove"));
  assertEquals(kinds[i + 1], "prefill");
  assert(forked.includes(trace.steps[i].op[1]));
  // 24 greedy tokens of three sequences; every argmax is its logits'.
  const greedy = trace.steps.at(-1)!;
  assertEquals(greedy.tokens!.length, 24);
  assert(greedy.tokens!.every((t) => t.length === 3));
  for (const s of trace.steps) {
    s.logits?.forEach((row, r) => assertEquals(row.indexOf(Math.max(...row)), s.argmax![r]));
  }
  // Under 16 KiB: the model is tiny.
  assert((await Deno.stat(TRACE)).size < 16 * 1024);
});

Deno.test({
  name: "TVM Llama trace: TVM's CPU build writes the committed trace and package again",
  ignore: ignoreWithoutTvm("TVM Llama trace"),
  async fn() {
    const committed = JSON.parse(await Deno.readTextFile(TRACE)) as Trace;
    const dir = await Deno.makeTempDir({ prefix: "relaxvm-tvm-llama-" });
    try {
      await run("llama_trace.py", `${dir}/trace.json`);
      const again = JSON.parse(await Deno.readTextFile(`${dir}/trace.json`)) as Trace;
      assertEquals(again.cache, committed.cache);
      assertEquals(again.steps.length, committed.steps.length);
      let worst = 0;
      again.steps.forEach((s, n) => {
        const c = committed.steps[n];
        const { logits: a, ...rest } = s, { logits: b, ...want } = c;
        assertEquals(rest, want, `step ${n}`);
        a?.forEach((row, r) =>
          row.forEach((x, j) => worst = Math.max(worst, Math.abs(x - b![r][j])))
        );
      });
      assert(worst < 1e-5, `TVM's logits moved by ${worst}`);
      // The package the WebGPU suite loads is this model with these weights.
      await run("llama_module.py", `${dir}/pkg`);
      for (const file of ["executable.tvm", "package.json", "params/params_shard_0.bin"]) {
        assertEquals(
          await Deno.readFile(`${dir}/pkg/${file}`),
          await Deno.readFile(new URL(file, PACKAGE)),
          `${file} differs from testdata/tvm_webgpu/llama's`,
        );
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("TVM Llama random trace: 1,000 operations of every kind, the pool run empty", async () => {
  const trace = JSON.parse(await Deno.readTextFile(RANDOM)) as Trace;
  assert(trace.steps.length >= 1000);
  const count = (k: string) => trace.steps.filter((s) => s.op[0] === k).length;
  for (const k of ["add", "remove", "fork", "popn", "forward"]) assert(count(k) > 50, k);
  const forwards = trace.steps.filter((s) => s.op[0] === "forward");
  assert(forwards.filter((s) => (s.op[2] as number[][]).some((l) => l.length > 1)).length > 50);
  assert(forwards.filter((s) => (s.op[1] as number[]).length >= 3).length > 20);
  const page = trace.cache[3];
  const forks = trace.steps.filter((s) => s.op[0] === "fork").map((s) => s.op[3] as number);
  assert(forks.includes(-1) && forks.some((p) => p > 0 && p % page === 0));
  assert(forks.filter((p) => p % page !== 0 && p !== -1).length > 10);
  assert(trace.steps.filter((s) => s.freePages === 0).length > 50, "the pool runs empty");
});

Deno.test({
  name: "TVM Llama random trace: TVM's CPU build writes the committed random trace again",
  ignore: ignoreWithoutTvm("TVM Llama random trace"),
  async fn() {
    const committed = JSON.parse(await Deno.readTextFile(RANDOM)) as Trace;
    const dir = await Deno.makeTempDir({ prefix: "relaxvm-tvm-llama-random-" });
    try {
      const out = `${dir}/random.json`;
      await run(
        "llama_trace.py",
        "--random",
        String(committed.seed),
        String(committed.steps.length),
        out,
      );
      const again = JSON.parse(await Deno.readTextFile(out)) as Trace;
      assertEquals(again.steps.length, committed.steps.length);
      let worst = 0;
      again.steps.forEach((s, n) => {
        const { summary: a, ...rest } = s, { summary: b, ...want } = committed.steps[n];
        assertEquals(rest, want, `step ${n}`);
        a?.forEach((row, r) =>
          row.forEach((x, j) => worst = Math.max(worst, Math.abs(x - b![r][j])))
        );
      });
      assert(worst < 1e-4, `TVM's logits moved by ${worst}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

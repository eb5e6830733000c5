/**
 * `deno task onnx:nodes`: runs every node test of the pinned onnx wheel
 * (tools/onnx/setup.sh) through `importONNX` on the CPU, in this one process,
 * and prints the counts. With `--write` it also writes the per-operator
 * table into docs/onnx.md (between its `onnx-node-table` markers) and the
 * sorted list of passing tests to `tests/onnx/node_tests_passing.txt`, which
 * `tests/onnx_node_tests_test.ts` holds to: a test that passes today must
 * keep passing. `--filter <text>` runs only tests whose name contains it;
 * `--webgpu` runs them on the WebGPU device (counts only). `--ort` also runs
 * them on onnxruntime-web's WebAssembly backend (`ort_node_tests.ts`: same
 * tests, same tolerances) and prints its count beside ours. `--write` runs
 * all three, for the table's WebGPU and onnxruntime-web columns and
 * `node_tests_passing_webgpu.txt` / `node_tests_passing_ort.txt`.
 *
 * @module
 */

import { type Device, webgpu } from "../../mod.ts";
import { nodeTestNames, type NodeTestResult, nodeTestRoot, runNodeTest } from "./node_tests.ts";
import { loadOrtWeb, ORT_WEB, runNodeTestOrt } from "./ort_node_tests.ts";
import { pageWith, readPages } from "../../docs/pages.ts";

const repo = new URL("../../", import.meta.url);
const args = Deno.args;
const write = args.includes("--write");
const filterAt = args.indexOf("--filter");
const filter = filterAt >= 0 ? args[filterAt + 1] : "";
const verbose = args.includes("--verbose");
const withOrt = write || args.includes("--ort");
// --webgpu: run on the WebGPU device instead (the table and the list stay the CPU's).
const device: Device | undefined = args.includes("--webgpu") ? await webgpu() : undefined;

const root = await nodeTestRoot(repo);
if (root === null) {
  console.error("No tools/onnx/.venv: run `bash tools/onnx/setup.sh` first");
  Deno.exit(1);
}
const names = (await nodeTestNames(root)).filter((n) => n.includes(filter));

/** Runs every selected test with `run` (relaxvm on a device, or onnxruntime-web), printing the counts. */
async function runAll(
  label: string,
  run: (name: string) => Promise<NodeTestResult>,
): Promise<NodeTestResult[]> {
  const results: NodeTestResult[] = [];
  const started = performance.now();
  for (const name of names) {
    const r = await run(name);
    results.push(r);
    if (verbose && r.status !== "pass") {
      console.log(`${r.status.padEnd(11)} ${name}: ${r.detail}`);
    }
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const count = (s: string) => results.filter((r) => r.status === s).length;
  console.log(
    `ONNX node tests (onnx 1.19.1), ${label}: ${count("pass")} pass, ${count("fail")} fail, ${
      count("unsupported")
    } unsupported of ${results.length} (${seconds} s)`,
  );
  return results;
}

const onDevice = (on: Device | undefined) => (name: string) => runNodeTest(root!, name, on);
const results = await runAll(
  write || device === undefined ? "relaxvm CPU" : "relaxvm WebGPU",
  onDevice(write ? undefined : device),
);
const count = (s: string) => results.filter((r) => r.status === s).length;
const [pass, fail, unsupported] = [count("pass"), count("fail"), count("unsupported")];
// --write also runs them on WebGPU, for the table's column and the GPU's passing list.
const gpuResults = write ? await runAll("relaxvm WebGPU", onDevice(await webgpu())) : [];
const gpuPass = new Set(gpuResults.filter((r) => r.status === "pass").map((r) => r.name));
// --ort (and --write): onnxruntime-web's WebAssembly backend on the same tests.
const ort = withOrt ? await loadOrtWeb() : undefined;
const ortResults = ort === undefined
  ? []
  : await runAll(`onnxruntime-web ${ORT_WEB.split("@").pop()} wasm`, (name) =>
    runNodeTestOrt(root!, name, ort));
const ortPass = new Set(ortResults.filter((r) => r.status === "pass").map((r) => r.name));
if (ort !== undefined) {
  const both = results.filter((r) => r.status === "pass" && ortPass.has(r.name)).length;
  console.log(
    `Pass: relaxvm ${pass}, onnxruntime-web ${ortPass.size} of ${names.length} ` +
      `(${both} both, ${pass - both} relaxvm only, ${ortPass.size - both} onnxruntime-web only)`,
  );
}

if (write) {
  const n = (x: number) => x.toLocaleString("en-US");
  const byOp = new Map<string, [number, number, number, number, number]>();
  for (const r of results) {
    const row = byOp.get(r.op) ?? [0, 0, 0, 0, 0];
    row[r.status === "pass" ? 0 : r.status === "fail" ? 1 : 2]++;
    if (gpuPass.has(r.name)) row[3]++;
    if (ortPass.has(r.name)) row[4]++;
    byOp.set(r.op, row);
  }
  const ops = [...byOp.keys()].sort((a, b) => a.localeCompare(b));
  const lines = [
    `<!-- onnx-node-table: written by \`deno task onnx:nodes --write\`; do not edit -->`,
    "",
    `**${n(pass)} of ${n(results.length)}** pass on the CPU (${fail} fail, ${
      n(unsupported)
    } unsupported); ${
      n(gpuPass.size)
    } on WebGPU (Mesa llvmpipe here: int64 arithmetic stays on the CPU, as everywhere in relaxvm). ` +
    `onnxruntime-web ${ORT_WEB.split("@").pop()}'s WebAssembly backend passes ${
      n(ortPass.size)
    } in the same harness, with the same tolerances.`,
    "",
    "<details><summary>By operator</summary>",
    "",
    "| operator | pass | fail | unsupported | pass on WebGPU | pass on onnxruntime-web |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
    ...ops.map((op) => {
      const [p, f, u, g, o] = byOp.get(op)!;
      return `| ${op} | ${p} | ${f} | ${u} | ${g} | ${o} |`;
    }),
    "",
    "</details>",
    "",
    "<!-- /onnx-node-table -->",
  ];
  // The page that holds the markers (docs/onnx.md; the README's once).
  const [page, readme] = pageWith(await readPages(), "<!-- onnx-node-table");
  const readmeUrl = new URL(page, repo);
  const start = readme.indexOf("<!-- onnx-node-table");
  const end = readme.indexOf("<!-- /onnx-node-table -->");
  if (end < 0) throw new Error(`${page} has no /onnx-node-table marker`);
  await Deno.writeTextFile(
    readmeUrl,
    readme.slice(0, start) + lines.join("\n") +
      readme.slice(end + "<!-- /onnx-node-table -->".length),
  );
  // The table as `deno fmt` aligns it, so `deno fmt --check` stays clean.
  const fmt = await new Deno.Command(Deno.execPath(), { args: ["fmt", "-q", readmeUrl.pathname] })
    .output();
  if (fmt.code !== 0) {
    throw new Error(`deno fmt ${page} failed: ${new TextDecoder().decode(fmt.stderr)}`);
  }
  const passing = results.filter((r) => r.status === "pass").map((r) => r.name);
  await Deno.writeTextFile(
    new URL("tests/onnx/node_tests_passing.txt", repo),
    passing.join("\n") + "\n",
  );
  await Deno.writeTextFile(
    new URL("tests/onnx/node_tests_passing_webgpu.txt", repo),
    [...gpuPass].sort().join("\n") + "\n",
  );
  await Deno.writeTextFile(
    new URL("tests/onnx/node_tests_passing_ort.txt", repo),
    [...ortPass].sort().join("\n") + "\n",
  );
  console.log(
    `Wrote ${page}'s table and tests/onnx/node_tests_passing{,_webgpu,_ort}.txt (${passing.length}, ${gpuPass.size}, ${ortPass.size})`,
  );
}

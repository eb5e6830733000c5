/**
 * `examples/gpt.ts` as a newcomer runs it (`deno run`, no permissions), on
 * the tiny model: token by token on the CPU and on WebGPU (the CPU when no
 * adapter is found, as the example says), and with `decode_n` batches. The
 * generated ids must agree.
 *
 * @module
 */

import { assert, assertEquals, assertMatch } from "@std/assert";
import { preferredDevice } from "../mod.ts";

const ROOT = new URL("../", import.meta.url);

async function runGpt(...args: string[]): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "examples/gpt.ts",
      ...(args.includes("--model") ? [] : ["--model", "tiny"]),
      ...args,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(stdout);
  assertEquals(
    code,
    0,
    `examples/gpt.ts ${args.join(" ")} failed:\n${new TextDecoder().decode(stderr)}`,
  );
  return out;
}

/** The ids after `generated:`. */
function generated(out: string): number[] {
  const line = out.split("\n").find((l) => l.startsWith("generated:"));
  if (line === undefined) throw new Error(`no "generated:" line in:\n${out}`);
  return line.slice("generated:".length).trim().split(" ").map(Number);
}

Deno.test("examples/gpt.ts generates the same tokens on the CPU, on WebGPU and with decode_n", async () => {
  const args = ["--prompt-tokens", "7", "--new-tokens", "9"];
  const onCpu = await runGpt("--device", "cpu", ...args);
  assertMatch(onCpu, /^gpt-tiny on cpu: 2 layers, d_model 128, 4 heads, vocab 512, context 128/m);
  assertMatch(onCpu, /^prefill: 7 tokens in [\d.]+ ms, [\d.]+ tokens\/s$/m);
  assertMatch(
    onCpu,
    /^decode: 8 tokens in [\d.]+ ms, [\d.]+ tokens\/s \(one read back per token\)$/m,
  );
  const tokens = generated(onCpu);
  assertEquals(tokens.length, 9);
  assert(tokens.every((t) => Number.isInteger(t) && t >= 0 && t < 512), `${tokens}`);

  const onGpu = await runGpt("--device", "webgpu", ...args);
  assert(onGpu.includes("on webgpu") || onGpu.includes("WebGPU is not available here"), onGpu);
  assertEquals(generated(onGpu), tokens);

  const batched = await runGpt("--device", "cpu", "--batch", "4", ...args);
  assertMatch(batched, /\(decode_n, 4 tokens per call and read back\)$/m);
  assertEquals(generated(batched), tokens);
});

Deno.test("examples/gpt.ts refuses a prompt that does not fit the context", async () => {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "examples/gpt.ts", "--model", "tiny", "--new-tokens", "200"],
    cwd: ROOT,
    stderr: "piped",
    stdout: "null",
  }).output();
  assertEquals(code, 1);
  assertMatch(new TextDecoder().decode(stderr), /must fit the context of 128/);
});

Deno.test("examples/gpt.ts speaks text through GPT-2's tokenizer and says the weights are random", async () => {
  const out = await runGpt(
    "--device",
    "cpu",
    "--model",
    "text",
    "--prompt",
    "Once upon a time",
    "--new-tokens",
    "3",
  );
  // GPT-2's own ids for the prompt (as its tokenizer, tiktoken's r50k_base, gives them).
  assertMatch(out, /^prompt \(4 tokens\): 7454 2402 257 640$/m);
  assertMatch(out, /^prompt text: "Once upon a time"$/m);
  assertMatch(
    out,
    /^note: the weights are seeded random numbers, not a trained model .* so the text is random$/m,
  );
  const tokens = generated(out);
  assertEquals(tokens.length, 3);
  assertMatch(out, /^generated text \(GPT-2's tokenizer; random weights\): ".*"$/m);
});

Deno.test("examples/gpt.ts refuses prompt tokens outside the model's vocabulary", async () => {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "examples/gpt.ts",
      "--model",
      "tiny",
      "--prompt",
      "Once upon a time",
    ],
    cwd: ROOT,
    stderr: "piped",
    stdout: "null",
  }).output();
  assertEquals(code, 1);
  assertMatch(
    new TextDecoder().decode(stderr),
    /token 7454 \("Once"\) is outside gpt-tiny's vocabulary of 512: use --model text/,
  );
});

Deno.test("examples/gpt.ts and semantic_search.ts: --help prints the usage, a bad flag says what is wrong, neither throws", async () => {
  for (const example of ["examples/gpt.ts", "examples/semantic_search.ts"]) {
    const run = async (...args: string[]) => {
      const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--no-prompt", "--allow-read=.weights", example, ...args],
        cwd: ROOT,
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code, out: new TextDecoder().decode(stdout), err: new TextDecoder().decode(stderr) };
    };
    const help = await run("--help");
    assertEquals([help.code, help.err], [0, ""], `${example} --help`);
    assertMatch(help.out, new RegExp(`^usage: deno run .*${example}`, "m"));
    const bad = await run("--device", "tpu");
    assertEquals(bad.code, 2, `${example} --device tpu: ${bad.err}`);
    assertMatch(bad.err, /^unknown device tpu\nusage: deno run /);
    assert(!/Uncaught|\n {4}at /.test(bad.err + help.err), bad.err + help.err);
  }
});

Deno.test("examples/gpt.ts runs on the faster device by default, says which and why, and how to choose", async () => {
  // WebGPU on a hardware adapter; the CPU on a software one (llvmpipe here) or none.
  const { device, reason } = await preferredDevice();
  const out = await runGpt("--prompt-tokens", "3", "--new-tokens", "2");
  const line = out.split("\n").find((l) => l.startsWith("device: ")) ?? out;
  assert(line.startsWith(`device: ${device.kind}`), line);
  assert(line.endsWith(`: ${reason} (choose with --device auto|webgpu|cpu)`), line);
  assertMatch(out, new RegExp(`^gpt-tiny on ${device.kind}: `, "m"));
});

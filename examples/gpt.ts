/**
 * A GPT-2-style language model through the VM: the decoder of
 * `models/gpt/` (built with `ExecBuilder`, weights from a tensor cache,
 * prefill and decode with KV caches), generating greedily on the CPU or on
 * WebGPU. It prints the generated token ids as they come, then tokens per
 * second for the prefill and for decoding.
 *
 * ```sh
 * deno run examples/gpt.ts [--device auto|webgpu|cpu] [--model small|tiny]
 *                          [--prompt-tokens N] [--new-tokens M] [--batch K]
 * ```
 *
 * `--batch K` generates K tokens per VM call with `decode_n` (the token is
 * chosen on the device and fed to the next step there; one read back per K
 * tokens) instead of reading the logits back after every token. The weights
 * are deterministic (seeded), written with the tensor-cache writer and
 * loaded by the program with `vm.builtin.tensor_cache.load`; they live in
 * memory (`blob:` URLs), so the example needs no permission. `--device auto`
 * (the default) runs on WebGPU with a hardware adapter and on the CPU
 * otherwise (a software adapter is slower than the CPU kernels), and says
 * which.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- the example's own dependency, kept out of the library
import { decode, encode } from "npm:gpt-tokenizer@4.0.0/encoding/r50k_base";
import { argmax, buildGPT, CONFIGS, type GPTConfig, GPTSession } from "../models.ts";
import { paramCount } from "../models/gpt/weights.ts";
import { chooseDevice, DEVICE_CHOICES } from "./_choose_device.ts";

const USAGE =
  "usage: deno run examples/gpt.ts [--device auto|webgpu|cpu] [--model small|tiny|text] [--prompt TEXT | --prompt-tokens N] [--new-tokens M] [--batch K]";

/** The command line, with defaults. */
/**
 * Ends the process on a command-line problem: the problem and the usage on stderr, exit code 2; or,
 * with no problem (`--help`), the usage on stdout and exit code 0. Not a thrown error: a stack
 * trace says nothing to someone who mistyped a flag.
 */
function usage(problem?: string): never {
  if (problem === undefined) {
    console.log(USAGE);
    Deno.exit(0);
  }
  console.error(`${problem}\n${USAGE}`);
  Deno.exit(2);
}

/** Ends the process on arguments that parse but do not fit the model: the reason, exit code 1. */
function fail(reason: string): never {
  console.error(reason);
  Deno.exit(1);
}

function parseArgs(args: readonly string[]) {
  const options = {
    device: "auto",
    model: "",
    promptTokens: 16,
    newTokens: 32,
    batch: 0,
    prompt: undefined as string | undefined,
  };
  for (let i = 0; i < args.length; i++) {
    const value = args[i + 1];
    const integer = () => {
      const n = Number(value);
      if (!Number.isSafeInteger(n) || n < 0) usage(`${args[i]} needs a count`);
      i++;
      return n;
    };
    switch (args[i]) {
      case "--help":
      case "-h":
        usage();
        break;
      case "--device":
        if (!(DEVICE_CHOICES as readonly string[]).includes(value)) {
          usage(`unknown device ${value}`);
        }
        options.device = value;
        i++;
        break;
      case "--model":
        if (!(value in CONFIGS)) usage(`unknown model ${value}`);
        options.model = value;
        i++;
        break;
      case "--prompt":
        if (value === undefined) usage(`--prompt needs a text`);
        options.prompt = value;
        i++;
        break;
      case "--prompt-tokens":
        options.promptTokens = integer();
        break;
      case "--new-tokens":
        options.newTokens = integer();
        break;
      case "--batch":
        options.batch = integer();
        break;
      default:
        usage(`unknown argument ${args[i]}`);
    }
  }
  options.model ||= options.prompt === undefined ? "small" : "text";
  return options;
}

/** GPT-2's text of `ids`, quoted (so that spaces and control characters show). */
function text(ids: readonly number[]): string {
  return JSON.stringify(decode([...ids]));
}

const options = parseArgs(Deno.args);
const config: GPTConfig = CONFIGS[options.model];
// The prompt: GPT-2's tokens of --prompt, or a deterministic one of --prompt-tokens ids.
const prompt = options.prompt !== undefined
  ? encode(options.prompt)
  : Array.from({ length: options.promptTokens }, (_, i) => (i * 7919 + 13) % config.vocab);
options.promptTokens = prompt.length;
const outside = prompt.find((id) => id >= config.vocab);
if (outside !== undefined) {
  fail(
    `the prompt's token ${outside} (${text([outside])}) is outside gpt-${config.name}'s ` +
      `vocabulary of ${config.vocab}: use --model text`,
  );
}
if (options.promptTokens < 1 || options.promptTokens + options.newTokens > config.context) {
  fail(
    `the prompt (at least 1 token) and the new tokens must fit the context of ${config.context}`,
  );
}

const device = await chooseDevice(options.device);
console.log(
  `gpt-${config.name} on ${device.kind}: ${config.layers} layers, d_model ${config.dModel}, ` +
    `${config.heads} heads, vocab ${config.vocab}, context ${config.context}, ` +
    `${(paramCount(config) / 1e6).toFixed(1)}M parameters`,
);

const t0 = performance.now();
const ex = buildGPT(config);
const session = await GPTSession.create(config, { device, executable: ex });
console.log(
  `built the program and loaded the weights in ${(performance.now() - t0).toFixed(0)} ms`,
);

// Warm up once with the same shapes (shaders compile, the memory pool fills), then forget it.
await session.prefill(prompt);
if (options.batch > 0) await session.decodeN(0, Math.min(options.batch, options.newTokens || 1));
else await session.decode(0);
session.reset();

console.log(
  "note: the weights are seeded random numbers, not a trained model (no small pretrained causal " +
    "language model's weights could be had from PyPI or npm), so the text is random",
);
console.log(`prompt (${prompt.length} tokens): ${prompt.join(" ")}`);
console.log(`prompt text: ${text(prompt)}`);
const encoder = new TextEncoder();
const write = (text: string) => Deno.stdout.writeSync(encoder.encode(text));
write("generated:");

const p0 = performance.now();
const logits = await session.prefill(prompt);
const prefillMs = performance.now() - p0;
let token = argmax(logits);
const generated = [token];
write(` ${token}`);

const d0 = performance.now();
while (generated.length < options.newTokens) {
  const left = options.newTokens - generated.length;
  if (options.batch > 0) {
    const ids = await session.decodeN(token, Math.min(options.batch, left));
    for (const id of ids) write(` ${id}`);
    generated.push(...ids);
    token = ids[ids.length - 1];
  } else {
    token = argmax(await session.decode(token));
    write(` ${token}`);
    generated.push(token);
  }
}
const decodeMs = performance.now() - d0;
write("\n");
console.log(`generated text (GPT-2's tokenizer; random weights): ${text(generated)}`);

const decoded = generated.length - 1; // the first token came from the prefill's logits
console.log(
  `prefill: ${prompt.length} tokens in ${prefillMs.toFixed(1)} ms, ` +
    `${(prompt.length / prefillMs * 1000).toFixed(1)} tokens/s`,
);
if (decoded > 0) {
  const how = options.batch > 0
    ? `decode_n, ${options.batch} tokens per call and read back`
    : "one read back per token";
  console.log(
    `decode: ${decoded} tokens in ${decodeMs.toFixed(1)} ms, ` +
      `${(decoded / decodeMs * 1000).toFixed(1)} tokens/s (${how})`,
  );
}
session.dispose();

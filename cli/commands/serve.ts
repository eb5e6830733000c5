/**
 * `relaxvm serve [--model gpt-tiny|tvm:<dir>] [--model minilm] [--port 8000]`: an
 * OpenAI-compatible HTTP server (server/) on 127.0.0.1 until SIGTERM or SIGINT
 * drains it.
 *
 * @module
 */

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { CommandSpec, ParsedArguments } from "../arguments.ts";
import { UsageError } from "../failure.ts";
import { callerDirectory } from "../executable_file.ts";
import { DEFAULT_LIMITS, type ServerLimits } from "../../server/limits.ts";
import {
  DEFAULT_PREFILL_CHUNK,
  MODEL_NAMES,
  modelNameProblem,
  TOKENIZER_NAMES,
  type TokenizerName,
} from "../../server/models.ts";
import { serve } from "../../server/serve.ts";

/** `--flag` → the limit it sets and what it means. */
const LIMIT_FLAGS: Record<string, [keyof ServerLimits, string]> = {
  "max-body-bytes": ["maxBodyBytes", "largest request body in bytes (413 beyond)"],
  "max-queue": ["maxQueue", "requests waiting for the model (429 beyond)"],
  "max-tokens": ["maxTokens", "largest max_tokens, and the default"],
  "max-n": ["maxChoices", "largest n"],
  "timeout-ms": ["requestTimeoutMs", "longest a request may take (504 beyond)"],
  "drain-ms": ["drainTimeoutMs", "how long SIGTERM waits for running requests"],
};

function integer(args: ParsedArguments, name: string): number | undefined {
  const text = args.value(name);
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new UsageError(`--${name} must be a non-negative integer, got '${text}'`);
  }
  return n;
}

/** The `serve` subcommand. */
export const serveCommand: CommandSpec = {
  name: "serve",
  description: "serve a model over OpenAI's HTTP API (chat, completions, embeddings)",
  arguments: [],
  options: {
    model: {
      kind: "value",
      repeatable: true,
      valueName: "<name>",
      description: `a model to serve: ${MODEL_NAMES.join(", ")}, or tvm:<dir> (a TVM ` +
        "package with MLC LLM's functions, on WebGPU); default gpt-tiny",
    },
    tokenizer: {
      kind: "value",
      valueName: "<kind>",
      default: TOKENIZER_NAMES[0],
      description: "a TVM package's tokenizer: ids (a prompt is token ids separated by spaces, " +
        "and so is the reply) or bytes (UTF-8 bytes; a vocabulary of at least 256)",
    },
    host: { kind: "value", valueName: "<address>", default: "127.0.0.1", description: "address" },
    port: { kind: "value", valueName: "<port>", default: "8000", description: "port (0: any)" },
    "minilm-dir": {
      kind: "value",
      valueName: "<dir>",
      default: ".weights/all-MiniLM-L6-v2",
      description: "all-MiniLM-L6-v2's directory (bash tools/fetch_weights.sh)",
    },
    "prefill-chunk": {
      kind: "value",
      valueName: "<tokens>",
      description: "most tokens per forward: bounds how long a long prompt holds the event loop " +
        `(default ${DEFAULT_PREFILL_CHUNK})`,
    },
    "max-memory-mb": {
      kind: "value",
      valueName: "<MiB>",
      description: "each model's VM memory limit (default 1024)",
    },
    ...Object.fromEntries(
      Object.entries(LIMIT_FLAGS).map(([flag, [key, what]]) => [flag, {
        kind: "value" as const,
        valueName: "<n>",
        description: `${what} (default ${DEFAULT_LIMITS[key]})`,
      }]),
    ),
  },
  async run(args) {
    const models = args.values("model").length > 0 ? args.values("model") : ["gpt-tiny"];
    for (const m of models) {
      const problem = modelNameProblem(m);
      if (problem !== null) throw new UsageError(problem);
    }
    const tokenizer = args.value("tokenizer")!;
    if (!(TOKENIZER_NAMES as readonly string[]).includes(tokenizer)) {
      throw new UsageError(
        `--tokenizer must be ${TOKENIZER_NAMES.join(" or ")}, got '${tokenizer}'`,
      );
    }
    const limits: Partial<ServerLimits> = {};
    for (const [flag, [key]] of Object.entries(LIMIT_FLAGS)) {
      const n = integer(args, flag);
      if (n !== undefined) limits[key] = n;
    }
    const memory = integer(args, "max-memory-mb");
    await serve({
      models,
      root: callerDirectory(),
      tokenizer: tokenizer as TokenizerName,
      minilmDir: pathToFileURL(resolve(callerDirectory(), args.value("minilm-dir")!) + "/"),
      hostname: args.value("host"),
      port: integer(args, "port"),
      limits,
      maxMemoryBytes: memory === undefined ? undefined : memory * 2 ** 20,
      prefillChunkSize: integer(args, "prefill-chunk"),
    });
  },
};

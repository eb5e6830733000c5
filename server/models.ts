/**
 * The models `relaxvm serve --model` names: relaxvm's GPT on the paged KV cache
 * (`gpt-tiny`, `gpt-small`, `gpt-text`: seeded weights, a byte tokenizer) behind the
 * engine, a TVM-compiled package with MLC LLM's functions (`tvm:<dir>`, on WebGPU, as
 * `TVMLanguageModel`) behind the same engine, and all-MiniLM-L6-v2 (`minilm`) for
 * embeddings.
 *
 * @module
 */

import { basename, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { cpu, Engine, type Tokenizer, webgpu, type WebGPUDevice } from "../runtime.ts";
import { ByteTokenizer, CONFIGS, MiniLMSession, PagedGPT, TVMLanguageModel } from "../models.ts";
import type { ServedModels } from "./app.ts";
import { IdTokenizer } from "./id_tokenizer.ts";

/**
 * How a TVM package's text becomes ids (the package carries no tokenizer): `ids`, the
 * prompt is token ids separated by spaces and the reply prints ids (true to any
 * package); `bytes`, UTF-8 bytes as ids 0..255 (a model trained on bytes; the
 * vocabulary must hold 256 ids).
 */
export type TokenizerName = "ids" | "bytes";

/** The names `--tokenizer` accepts; the first is the default. */
export const TOKENIZER_NAMES: readonly TokenizerName[] = ["ids", "bytes"];

/** Options of the models a server loads. */
export interface ModelOptions {
  /** Model names: `gpt-tiny`, `gpt-small`, `gpt-text`, `minilm`, `tvm:<dir>` (or a path). */
  models: readonly string[];
  /** Where a TVM package's relative directory is found; default the working directory. */
  root?: string;
  /** A TVM package's tokenizer; default `ids`. */
  tokenizer?: TokenizerName;
  /** all-MiniLM-L6-v2's directory (tensor cache and tokenizer.json). */
  minilmDir: URL;
  /** Each VM's memory limit, in bytes (default the VM's, 1 GiB). */
  maxMemoryBytes?: number;
  /** Most tokens in one forward of the generation model; default `DEFAULT_PREFILL_CHUNK`. */
  prefillChunkSize?: number;
}

/**
 * The default prefill chunk: a forward is one macrotask (the GPT's program is straight-line
 * code over synchronous kernels, so the VM has no loop to yield at), and the engine yields
 * between forwards, so the chunk bounds how long a long prompt holds the event loop: health
 * checks and other clients' tokens wait for at most one chunk (docs/serve.md has figures).
 */
export const DEFAULT_PREFILL_CHUNK = 32;

/** The names `--model` accepts, besides a TVM package's `tvm:<dir>`. */
export const MODEL_NAMES = [...Object.keys(CONFIGS).map((c) => `gpt-${c}`), "minilm"];

/** The directory of a TVM package `name` names (`tvm:<dir>`, or a path with a `/`), or null. */
export function packageDirectory(name: string): string | null {
  if (name.startsWith("tvm:")) return name.slice(4);
  return name.includes("/") ? name : null;
}

/** Why a name is not a model here (a usage error), or null. */
export function modelNameProblem(name: string): string | null {
  if (MODEL_NAMES.includes(name)) return null;
  const dir = packageDirectory(name);
  if (dir === "") return "tvm: needs a package directory (tvm:<dir>)";
  if (dir !== null) return null;
  return `unknown model '${name}'; choose from ${MODEL_NAMES.join(", ")} or tvm:<dir>`;
}

/** Loads the models named (at most one generation model and one embedding model). */
export async function loadModels(options: ModelOptions): Promise<ServedModels> {
  const served: ServedModels = {};
  for (const name of options.models) {
    const problem = modelNameProblem(name);
    if (problem !== null) throw new RangeError(problem);
    if (name === "minilm") {
      if (served.embeddings) throw new RangeError("serve one embedding model");
      const session = await MiniLMSession.create(options.minilmDir, { device: cpu() }).catch(
        (e) => {
          throw new Error(
            `all-MiniLM-L6-v2 could not be loaded from ${options.minilmDir.href} (get it with ` +
              `bash tools/fetch_weights.sh, or pass --minilm-dir): ${(e as Error).message}`,
          );
        },
      );
      served.embeddings = {
        embedder: session,
        name: "all-MiniLM-L6-v2",
        aliases: ["minilm", "sentence-transformers/all-MiniLM-L6-v2"],
      };
    } else if (packageDirectory(name) !== null) {
      if (served.generation) throw new RangeError("serve one generation model");
      const model = await loadPackage(name, options);
      served.generation = { engine: new Engine(model), name: model.name, aliases: [name] };
    } else {
      if (served.generation) throw new RangeError("serve one generation model");
      const model = await PagedGPT.create(CONFIGS[name.slice(4)], {
        maxMemoryBytes: options.maxMemoryBytes,
        prefillChunkSize: options.prefillChunkSize ?? DEFAULT_PREFILL_CHUNK,
        // Where the program has loops, a call yields inside a forward too.
        yieldIntervalMs: 10,
      });
      served.generation = { engine: new Engine(model), name: model.name, aliases: [name] };
    }
  }
  return served;
}

/** `tvm:<dir>` as a `TVMLanguageModel` on WebGPU, with the tokenizer `options` name. */
async function loadPackage(name: string, options: ModelOptions): Promise<TVMLanguageModel> {
  const dir = packageDirectory(name)!;
  const path = resolve(options.root ?? Deno.cwd(), dir);
  const url = pathToFileURL(path);
  url.pathname += "/";
  // Before the GPU: a mistyped path says so, on a machine with or without an adapter.
  try {
    await Deno.stat(new URL("package.json", url));
  } catch (e) {
    throw new Error(
      e instanceof Deno.errors.NotFound
        ? `no TVM package at ${path}: it has no package.json`
        : `no TVM package at ${path}: ${(e as Error).message}`,
    );
  }
  let device: WebGPUDevice;
  try {
    device = await webgpu();
  } catch (e) {
    throw new Error(`serving ${name} needs WebGPU: ${(e as Error).message}`);
  }
  const kind = options.tokenizer ?? TOKENIZER_NAMES[0];
  // The vocabulary is known once the package is loaded: the tokenizer reads it then.
  let tokenizer: Tokenizer = new ByteTokenizer();
  const lazy: Tokenizer = {
    encode: (text) => tokenizer.encode(text),
    decode: (ids) => tokenizer.decode(ids),
  };
  const model = await TVMLanguageModel.load(url, {
    device,
    tokenizer: lazy,
    name: basename(path),
    prefillChunkSize: options.prefillChunkSize ?? DEFAULT_PREFILL_CHUNK,
    // Ids written out: the messages' contents joined by spaces stay ids.
    chatTemplate: kind === "ids" ? (m) => m.map((x) => x.content).join(" ") : undefined,
  });
  if (kind === "ids") tokenizer = new IdTokenizer(model.vocabSize);
  else if (model.vocabSize < 256) {
    model.dispose();
    throw new RangeError(
      `--tokenizer bytes needs a vocabulary of 256 ids (one a byte); ${path} has ` +
        `${model.vocabSize}: serve it with --tokenizer ids`,
    );
  }
  return model;
}

/**
 * The models `relaxvm serve --model` names: relaxvm's GPT on the paged KV cache
 * (`gpt-tiny`, `gpt-small`, `gpt-text`: seeded weights, a byte tokenizer) behind the
 * engine, and all-MiniLM-L6-v2 (`minilm`) for embeddings. A TVM-compiled package is
 * refused: the engine cannot drive one yet.
 *
 * @module
 */

import { cpu, Engine } from "../runtime.ts";
import { CONFIGS, MiniLMSession, PagedGPT } from "../models.ts";
import type { ServedModels } from "./app.ts";

/** Options of the models a server loads. */
export interface ModelOptions {
  /** Model names: `gpt-tiny`, `gpt-small`, `gpt-text`, `minilm`. */
  models: readonly string[];
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

/** The names `--model` accepts. */
export const MODEL_NAMES = [...Object.keys(CONFIGS).map((c) => `gpt-${c}`), "minilm"];

/** Why a name is not a model here (a usage error), or null. */
export function modelNameProblem(name: string): string | null {
  if (MODEL_NAMES.includes(name)) return null;
  if (name.startsWith("tvm:") || name.includes("/")) {
    return `serving a TVM-compiled package (${name}) is not supported yet: the engine drives ` +
      "relaxvm's own paged attention, and a package's KV cache needs its own kernels " +
      '(docs/engine.md, "Left out"); serve gpt-tiny, gpt-small, gpt-text or minilm';
  }
  return `unknown model '${name}'; choose from ${MODEL_NAMES.join(", ")}`;
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

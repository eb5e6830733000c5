/**
 * Semantic search with a real sentence-embedding model: all-MiniLM-L6-v2
 * (`models/minilm/`, its trained weights loaded from a tensor cache) embeds
 * a corpus once, then each query, and prints the corpus sentences ranked by
 * cosine similarity to the query. The corpus is 24 sentences of its own, or
 * yours: `--corpus FILE` (one sentence a line; `-` reads them from stdin).
 *
 * ```sh
 * deno run --allow-read=.weights examples/semantic_search.ts [--device auto|webgpu|cpu] [--top K] [--corpus FILE|-] [query …]
 * ```
 *
 * A corpus file needs read permission too: `--allow-read=.weights,notes.txt`.
 * The weights are not in the repository; get them once with
 * `bash tools/fetch_weights.sh`. `--device auto` (the default) runs on WebGPU
 * with a hardware adapter and on the CPU otherwise, and says which.
 *
 * @module
 */

import { cosine, MiniLMSession } from "../models.ts";
import { chooseDevice, DEVICE_CHOICES } from "./_choose_device.ts";

const USAGE =
  "usage: deno run --allow-read=.weights examples/semantic_search.ts [--device auto|webgpu|cpu] [--top K] [--corpus FILE|-] [query …]";
const WEIGHTS = new URL("../.weights/all-MiniLM-L6-v2/", import.meta.url);

const BUILT_IN_CORPUS = [
  "A man is eating food.",
  "A man is eating a piece of bread.",
  "The girl is carrying a baby.",
  "A man is riding a horse.",
  "A woman is playing violin.",
  "Two men pushed carts through the woods.",
  "A man is riding a white horse on an enclosed ground.",
  "A monkey is playing drums.",
  "A cheetah is running behind its prey.",
  "Knead the dough, let it rise for an hour, then bake it in a hot oven.",
  "The recipe needs flour, water, yeast and a pinch of salt.",
  "The central bank raised interest rates to slow inflation.",
  "Stocks fell sharply after the quarterly earnings report.",
  "The spacecraft entered orbit around Mars after a seven-month journey.",
  "Astronomers photographed the shadow of a black hole.",
  "Regular exercise lowers the risk of heart disease.",
  "The doctor prescribed antibiotics for the infection.",
  "Our flight was delayed by three hours because of the storm.",
  "The train to Berlin leaves from platform nine.",
  "Python and TypeScript are popular programming languages.",
  "The virtual machine runs bytecode one instruction at a time.",
  "To reset your password, click 'Forgot password' on the sign-in page.",
  "The team won the championship in overtime.",
  "It will rain tomorrow afternoon, so take an umbrella.",
];

const DEFAULT_QUERIES = [
  "How do I make bread?",
  "Someone is playing a musical instrument.",
  "What is the weather going to be like?",
  "I forgot my login.",
  "news about space exploration",
];

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

function parseArgs(args: readonly string[]) {
  const options = { device: "auto", top: 3, corpus: "", queries: [] as string[] };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--help" || args[i] === "-h") {
      usage();
    } else if (args[i] === "--device") {
      if (!(DEVICE_CHOICES as readonly string[]).includes(args[i + 1])) {
        usage(`unknown device ${args[i + 1]}`);
      }
      options.device = args[++i];
    } else if (args[i] === "--corpus") {
      if (args[i + 1] === undefined) usage("--corpus needs a file (or - for stdin)");
      options.corpus = args[++i];
    } else if (args[i] === "--top") {
      const k = Number(args[++i]);
      if (!Number.isSafeInteger(k) || k < 1) usage(`--top needs a count`);
      options.top = k;
    } else if (args[i].startsWith("--")) {
      usage(`unknown argument ${args[i]}`);
    } else {
      options.queries.push(args[i]);
    }
  }
  if (options.queries.length === 0) options.queries = DEFAULT_QUERIES;
  return options;
}

const options = parseArgs(Deno.args);
try {
  await Deno.stat(new URL("tensor-cache.json", WEIGHTS));
} catch {
  console.error(
    "all-MiniLM-L6-v2's weights are not in .weights/; get them once with\n" +
      "  bash tools/fetch_weights.sh",
  );
  Deno.exit(1);
}

/** The sentences of `--corpus`: one a line, blank lines skipped. */
async function readCorpus(path: string): Promise<string[]> {
  let text: string;
  try {
    text = path === "-"
      ? await new Response(Deno.stdin.readable).text()
      : await Deno.readTextFile(path);
  } catch (e) {
    const hint = e instanceof Deno.errors.NotCapable
      ? ` (give it read permission: --allow-read=.weights,${path})`
      : "";
    console.error(`cannot read the corpus ${path}: ${(e as Error).message}${hint}`);
    Deno.exit(1);
  }
  const sentences = text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== "");
  if (sentences.length === 0) {
    console.error(`the corpus ${path} has no sentences (one a line)`);
    Deno.exit(1);
  }
  return sentences;
}

const CORPUS = options.corpus === "" ? BUILT_IN_CORPUS : await readCorpus(options.corpus);
const device = await chooseDevice(options.device);

const t0 = performance.now();
const session = await MiniLMSession.create(WEIGHTS, { device });
const t1 = performance.now();
const corpus = await session.embed(CORPUS);
const t2 = performance.now();
console.log(
  `all-MiniLM-L6-v2 on ${device.kind}: loaded in ${(t1 - t0).toFixed(0)} ms, ` +
    `${CORPUS.length} sentences embedded in ${(t2 - t1).toFixed(0)} ms`,
);

const queries = await session.embed(options.queries);
options.queries.forEach((query, q) => {
  const ranked = corpus.map((v, i) => ({ i, score: cosine(queries[q], v) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, options.top);
  console.log(`\nquery: ${query}`);
  for (const { i, score } of ranked) console.log(`  ${score.toFixed(3)}  ${CORPUS[i]}`);
});
session.dispose();

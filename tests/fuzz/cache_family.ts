/**
 * Fuzz family "cache": a loaded program's `vm.builtin.tensor_cache.load` on
 * tensor-cache indexes and shards that are malformed (cut, flipped, fields at
 * the edges), endless or slow (a body that never ends, one that trickles past
 * the call's timeout), served oddly (a loader that throws, returns odd values
 * or a failed `Response`) and hostile (locations and `dataPath`s that leave
 * the granted roots: `../`, `..%2f`, absolute paths and URLs, `data:`,
 * escapes, megabytes of text). The VM grants a loader serving `mem:/model/`
 * and, sometimes, the directory `file:///nonexistent-relaxvm-fuzz/model/`.
 *
 * A call must end with the weights or a `VMError` ("rejected"). Bugs: any
 * other exception; a case over `HANG_MS`; memory left in the VM, or a cache
 * that changed, after a failed load ("leaks"); a read outside what the VM
 * grants, an endless body read past its index's length, or weights that
 * differ from what was written ("wrong results").
 *
 * @module
 */

import {
  encodeTensorCache,
  ExecBuilder,
  Executable,
  type NDArray,
  tensor,
  type TensorCacheLoader,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../../mod.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 3000;
/** Where the granted directory root points: nothing is there. */
const DIR_ROOT = "file:///nonexistent-relaxvm-fuzz/model/";
const CHUNK = 65536;

const FORMS: readonly VirtualMachineOptions[] = [
  {},
  { dispatch: "generic" },
  { mode: "compiled" },
];

/** Locations and dataPaths that leave the grants, or are odd. */
const HOSTILE_PATHS: readonly string[] = [
  "../outside.bin",
  "..%2foutside.bin",
  "..%2F..%2Fetc%2Fpasswd",
  "%2e%2e/outside.bin",
  "/etc/passwd",
  "file:///etc/passwd",
  "file:///nonexistent-relaxvm-fuzz/other/x.bin",
  "https://127.0.0.1:9/x.bin",
  "data:application/octet-stream,abc",
  "blob:null/00000000-0000-0000-0000-000000000000",
  "mem:/other/x.bin",
  "mem:/model/../secret.bin",
  "mem:/model/%2e%2e/secret.bin",
  "\u001b[2J\u009b31m",
  "",
  ".",
  "./",
  "\\..\\..\\etc\\passwd",
  "x\u0000y",
];

/** The weights every case starts from, and their files. */
async function baseCache() {
  using a = tensor([1, 2, 3]);
  using b = tensor([4, 5], { dtype: "int32" });
  using c = tensor([true, false, true], { dtype: "bool" });
  const { files, index } = await encodeTensorCache({ w_0: a, w_1: b, w_2: c }, { shardCapMB: 1 });
  return {
    files,
    indexText: new TextDecoder().decode(files.get("tensor-cache.json")!),
    shardName: index.records[0].dataPath,
    expected: [[1, 2, 3], [4, 5], [1, 0, 1]],
  };
}

/** `load(location)`: loads the cache, returns `param_array_from_cache("w", -1)`. */
function loaderProgram(): Executable {
  const ib = new ExecBuilder();
  ib.function("load", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.tensor_cache.load", [ib.r(0), ib.imm(1), ib.imm(0)]);
    ib.emit_call("vm.builtin.param_array_from_cache", ["w", ib.imm(-1)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  return Executable.load(ib.get().save());
}

type Served = Uint8Array | (() => unknown);

/** A mutation of the index text: returns the new text and whether the weights stay valid. */
function mutateIndex(rand: Random, text: string): { text: string; valid: boolean } {
  const index = JSON.parse(text);
  const shard = index.records[0];
  const record = shard.records[rand.int(shard.records.length)];
  const edge = () =>
    rand.pick([-1, 0, 1, 2 ** 31, 2 ** 53, -0, 1.5, NaN, 1e308, "3", null, [], {}, true]);
  switch (rand.int(12)) {
    case 0:
      return { text, valid: true };
    case 1:
      return { text: text.slice(0, rand.int(text.length)), valid: false };
    case 2: {
      const chars = [...text];
      for (let k = rand.between(1, 4); k > 0; k--) {
        chars[rand.int(chars.length)] = String.fromCharCode(rand.int(128));
      }
      return { text: chars.join(""), valid: false };
    }
    case 3:
      shard.nbytes = edge();
      break;
    case 4:
      record[rand.pick(["byteOffset", "nbytes"])] = edge();
      break;
    case 5:
      record.shape = rand.pick([[edge()], [1e9, 1e9], [-3], [2 ** 26, 16], []]);
      break;
    case 6:
      record.dtype = rand.pick(["float8", "int4", "", "handle", "float32x4", "\u001b"]);
      break;
    case 7:
      shard.dataPath = rand.pick(HOSTILE_PATHS);
      break;
    case 8:
      record.name = rand.pick(["w_0", "w_1", "", "x".repeat(rand.int(100_000))]);
      break;
    case 9:
      index.records = Array.from({ length: rand.pick([0, 2, 3000]) }, () => shard);
      break;
    case 10:
      shard.records = Array.from({ length: rand.pick([0, 1, 5000]) }, () => record);
      break;
    default:
      record.format = rand.pick(["f32-to-bf16", "zstd", "", 7]);
  }
  return { text: JSON.stringify(index), valid: false };
}

/**
 * A byte stream (`type: "bytes"`) of `bytes` (endless zeros when null), in
 * pieces of `sizes` in turn, filling a BYOB reader's view when it brings one.
 */
function byteStream(
  bytes: Uint8Array | null,
  sizes: number[],
  pulled: { bytes: number },
): ReadableStream<Uint8Array> {
  let at = 0, k = 0;
  return new ReadableStream({
    type: "bytes",
    pull(c) {
      if (bytes !== null && at >= bytes.length) {
        c.close();
        c.byobRequest?.respond(0);
        return;
      }
      const want = sizes[k++ % sizes.length];
      const n = bytes === null ? want : Math.min(want, bytes.length - at);
      const piece = bytes === null ? new Uint8Array(n) : bytes.subarray(at, at + n);
      const request = c.byobRequest;
      if (request === null) c.enqueue(piece.slice());
      else {
        const view = request.view!;
        const m = Math.min(n, view.byteLength);
        new Uint8Array(view.buffer, view.byteOffset, m).set(piece.subarray(0, m));
        request.respond(m);
        at += m;
        pulled.bytes += bytes === null ? m : 0;
        return;
      }
      at += n;
      pulled.bytes += bytes === null ? n : 0;
    },
  });
}

/** A shard body: as written, cut, longer, endless, slow, or served oddly. */
function shardBody(
  rand: Random,
  shard: Uint8Array,
  pulled: { bytes: number },
): { body: Served; valid: boolean } {
  switch (rand.int(10)) {
    case 0:
      return { body: shard.slice(0, rand.int(shard.length)), valid: false };
    case 1:
      return { body: new Uint8Array([...shard, ...rand.bytes(rand.between(1, 9))]), valid: false };
    case 2: // endless
      return {
        body: () =>
          new Response(
            new ReadableStream({
              pull(c) {
                pulled.bytes += CHUNK;
                c.enqueue(new Uint8Array(CHUNK));
              },
            }),
          ),
        valid: false,
      };
    case 3: // trickles past the timeout
      if (!rand.chance(0.2)) break;
      return {
        body: () =>
          new Response(
            new ReadableStream({
              async pull(c) {
                await new Promise((r) => setTimeout(r, 10));
                pulled.bytes += 1;
                c.enqueue(new Uint8Array(1));
              },
            }),
          ),
        valid: false,
      };
    case 5: { // as a byte stream (what fetch gives: read with a BYOB reader), in odd pieces
      const sizes = [rand.between(1, 9), rand.between(1, 5000), CHUNK];
      return { body: () => new Response(byteStream(shard, sizes, pulled)), valid: true };
    }
    case 6: // an endless byte stream
      return { body: () => new Response(byteStream(null, [CHUNK], pulled)), valid: false };
    case 4:
      return {
        body: rand.pick<() => unknown>([
          () => {
            throw new Error("loader failed");
          },
          () => 42,
          () => ({ then: 1 }),
          () => Promise.reject(Symbol("odd")),
          () => new Response("missing", { status: 404 }),
          () => new ArrayBuffer(shard.length),
        ]),
        valid: false,
      };
  }
  return { body: shard, valid: true };
}

/** Runs `cases` tensor-cache loads from `rand`'s sequence. */
export async function cacheFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("cache");
  const base = await baseCache();
  const ex = loaderProgram();
  // Every fetch the library makes is recorded: a URL outside the granted directory is a bug.
  const fetched: string[] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    fetched.push(input instanceof Request ? input.url : String(input));
    return realFetch(input, init);
  };
  try {
    for (const [i, seed] of caseSeeds(rand, cases)) {
      const caseRand = new Random(seed);
      report.tried++;
      const where = `case ${i}`;
      const index = mutateIndex(caseRand, base.indexText);
      const pulled = { bytes: 0 };
      const shard = shardBody(caseRand, base.files.get(base.shardName)!, pulled);
      const served = new Map<string, Served>([
        ["tensor-cache.json", new TextEncoder().encode(index.text)],
        [base.shardName, shard.body],
      ]);
      const asked: string[] = [];
      const loader: TensorCacheLoader = (url) => {
        asked.push(url.href);
        if (!url.href.startsWith("mem:/model/")) return null;
        const body = served.get(url.href.slice("mem:/model/".length));
        return (typeof body === "function" ? body() : body) as Uint8Array | undefined;
      };
      const location = caseRand.chance(0.85)
        ? caseRand.pick(["mem:/model/tensor-cache.json", "mem:/model/", "mem:/model"])
        : caseRand.chance(0.5)
        ? caseRand.pick(HOSTILE_PATHS)
        : `${DIR_ROOT}${caseRand.pick(HOSTILE_PATHS)}`;
      const roots = caseRand.chance(0.3) ? [DIR_ROOT, loader] : [loader];
      fetched.length = 0;
      const vm = new VirtualMachine(ex, undefined, {
        ...caseRand.pick(FORMS),
        tensorCacheRoots: roots,
        maxMemoryBytes: caseRand.pick([1 << 20, 1 << 20, 4096, 1 << 16]),
        timeoutMs: 300,
      });
      const t0 = performance.now();
      const outcome = await settle(vm.invoke("load", location), HANG_MS);
      const ms = performance.now() - t0;
      if (outcome === "hang") {
        recordBug(report, "hangs", `${where}: ${ms.toFixed(0)} ms`);
      } else if ("error" in outcome) {
        if (outcome.error instanceof VMError) report.rejected++;
        else {recordBug(
            report,
            "otherExceptions",
            `${where}: ${String(outcome.error).slice(0, 200)}`,
          );}
        if (vm.tensorCache.size !== 0) recordBug(report, "leaks", `${where}: a failed load cached`);
      } else {
        report.loaded++;
        const got = outcome.value as NDArray[];
        const values = got.map((t) => [...t.dataSync()].map(Number));
        if (
          index.valid && shard.valid && JSON.stringify(values) !== JSON.stringify(base.expected)
        ) {
          recordBug(report, "wrong", `${where}: loaded ${JSON.stringify(values).slice(0, 100)}`);
        }
        for (const t of got) t.dispose();
      }
      for (const url of fetched) {
        if (!url.startsWith(DIR_ROOT) || /%2f|%5c|\.\./i.test(url.slice(DIR_ROOT.length))) {
          recordBug(report, "wrong", `${where}: fetched ${url}, outside the granted directory`);
        }
      }
      if (pulled.bytes > base.files.get(base.shardName)!.length + 2 * CHUNK) {
        recordBug(report, "wrong", `${where}: read ${pulled.bytes} bytes of an endless shard`);
      }
      vm.tensorCache.clear();
      const live = vm.memory_stats().liveBytes;
      if (live !== 0) recordBug(report, "leaks", `${where}: ${live} bytes left in the VM`);
      vm.dispose();
    }
  } finally {
    globalThis.fetch = realFetch;
  }
  return report;
}

/**
 * Fuzz family "paths": the paths a TVM package writes (issue 27).
 * One package, the committed MLP's files under a small manifest, sits in
 * `root/pkg/`; canary files sit outside it (`root/secret.txt`,
 * `root/params_shard_0.bin`, shard-sized and full of a marker, and
 * `root/secret.tvm`, a copy of the executable). Each case writes one path —
 * a shard's `dataPath` (most cases), the manifest's `executable` or
 * `params` — drawn from climbs (`..` and its encodings in any case, double
 * and triple encoded), separators (`/`, `\`, `%2f`, `%5C`, `%252f`),
 * absolute paths, URLs with schemes, drives, NUL and control characters,
 * `?` and `#`, empty and `.` segments, very long paths, and random strings
 * over those pieces; then reads the package with `readPackageFiles` (what
 * `loadTVMPackage` does before the device) from a path, a `file:` URL or a
 * `Map` that also holds canaries under `../`-style keys.
 *
 * Bugs: a read outside the package (any `fetch` of a file not under
 * `root/pkg/`, any `Map` key that is not a package file, or a canary's
 * marker in a shard read), an exception that is not a `TVMPackageError` or
 * `TensorCacheError`, a case over 2 s. (`tests/tvm_package_paths_test.ts`
 * holds the endless files and HTTP bodies; this family holds the paths.)
 *
 * @module
 */

import { TensorCacheError, TVMPackageError } from "../../mod.ts";
import { readPackageFiles } from "../../tvm/package_files.ts";
import { elementwisePackage, PACKAGES_DIR, SHARD, weightBytes } from "../_tvm_packages.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";

const HANG_MS = 2000;
const MARKER = new TextEncoder().encode("relaxvm-canary!!");
const INDEX = "params/ndarray-cache.json";

const CLIMBS = [
  "..",
  "%2e%2e",
  "%2E%2E",
  ".%2e",
  "%2E.",
  "%252e%252e",
  "%25252E%25252e",
  "%2e%2E",
  "..%00",
  "..%20",
  ".",
  "%2e",
  "...",
  "",
];
const SEPARATORS = ["/", "\\", "%2f", "%2F", "%5c", "%5C", "%252f", "%255C", "//", "/./", "\\\\"];
const TARGETS = [
  "secret.txt",
  SHARD,
  `pkg/params/${SHARD}`,
  `params/${SHARD}`,
  "secret.tvm",
  "executable.tvm",
  "ndarray-cache.json",
  "pkg/executable.tvm",
];
const PIECES = [
  ".",
  "..",
  "/",
  "\\",
  "%",
  "2e",
  "2E",
  "2f",
  "5c",
  "25",
  "00",
  "a",
  ":",
  "?",
  "#",
  "\0",
];

/** The absolute forms, for a package under `root`. */
function absolutes(root: string): string[] {
  return [
    `${root}/`,
    `file://${root}/`,
    `FILE://${root}/`,
    `file:${root}/`,
    `file://localhost${root}/`,
    `//localhost${root}/`,
    "http://127.0.0.1:9/",
    "C:\\",
    "c:/",
    "\\\\?\\",
    "data:,",
    "blob:",
    "/",
    "~/",
  ];
}

/** One hostile (or, now and then, valid) path for a file whose good path is `good`. */
function hostilePath(rand: Random, root: string, good: string): string {
  switch (rand.int(9)) {
    case 0: // the good path, or a directory of the package
      return rand.chance(0.8) ? good : rand.pick(["params", "params/", "pkg", "."]);
    case 1: // an absolute path or URL
      return rand.pick(absolutes(root)) + rand.pick(TARGETS);
    case 2: { // encoded whole, once or twice
      let p = rand.chance(0.5) ? `../../${rand.pick(TARGETS)}` : good;
      for (let k = rand.between(1, 2); k > 0; k--) p = encodeURIComponent(p);
      return p;
    }
    case 3: { // characters of the good path swapped for encoded or hostile ones
      const chars = [...good];
      for (let k = rand.between(1, 3); k > 0; k--) {
        const at = rand.int(chars.length + 1);
        chars.splice(
          at,
          rand.chance(0.5) ? 1 : 0,
          rand.pick([...SEPARATORS, "%00", "\0", "?", "#", "%2e", "\n"]),
        );
      }
      return chars.join("");
    }
    case 4: { // very long
      const n = rand.pick([100, 1000, 2100, 5000]);
      return `${rand.pick(["a/", "../", "%2e%2e/", "./"]).repeat(n)}${good}`;
    }
    case 5: // random pieces
      return Array.from({ length: rand.between(1, 30) }, () => rand.pick(PIECES)).join("");
    case 6: // leading or trailing separators and dots
      return rand.pick(["./", "/", "\\", "", "%2f"]) + good +
        rand.pick(["/", "/.", "\\", "", "%00"]);
    default: { // climbs, then a target
      const parts: string[] = [];
      for (let k = rand.between(1, 4); k > 0; k--) {
        parts.push(rand.pick(CLIMBS), rand.pick(SEPARATORS));
      }
      return parts.join("") + rand.pick(TARGETS);
    }
  }
}

/** Whether `bytes` starts with the canary's marker. */
function isCanary(bytes: Uint8Array): boolean {
  // Anywhere: the weights are the records' bytes end to end, not a shard's from its start.
  for (let at = 0; at + MARKER.length <= bytes.length; at++) {
    if (MARKER.every((b, i) => bytes[at + i] === b)) return true;
  }
  return false;
}

/** A `Map` that records the keys it is asked for. */
class LoggingMap extends Map<string, Uint8Array | string> {
  readonly asked: string[] = [];
  override get(key: string): Uint8Array | string | undefined {
    this.asked.push(key);
    return super.get(key);
  }
}

/** Runs `cases` package-path cases from `rand`'s sequence. */
export async function packagePathsFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("paths");
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "relaxvm-fuzz-paths-" }));
  const pkg = `${root}/pkg`;
  await Deno.mkdir(`${pkg}/params`, { recursive: true });
  const executable = await Deno.readFile(new URL("mlp/executable.tvm", PACKAGES_DIR));
  const shard = await Deno.readFile(new URL(`mlp/params/${SHARD}`, PACKAGES_DIR));
  const index = JSON.parse(await Deno.readTextFile(new URL(`mlp/${INDEX}`, PACKAGES_DIR)));
  const canary = new Uint8Array(shard.length);
  for (let i = 0; i < canary.length; i++) canary[i] = MARKER[i % MARKER.length];
  // The manifest's paths are all that matter here: the hand-written package's, with weights.
  const manifest = { ...elementwisePackage("+").manifest, params: INDEX };
  await Deno.writeFile(`${pkg}/executable.tvm`, executable);
  await Deno.writeFile(`${pkg}/params/${SHARD}`, shard);
  await Deno.writeFile(`${root}/secret.txt`, canary);
  await Deno.writeFile(`${root}/${SHARD}`, canary);
  await Deno.writeFile(`${root}/secret.tvm`, executable);
  const packageKeys = new Set(["package.json", "executable.tvm", INDEX, `params/${SHARD}`]);

  const original = globalThis.fetch;
  let fetched: string[] = [];
  globalThis.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
    fetched.push(input instanceof Request ? input.url : String(input));
    return original(input, init);
  };
  /** Whether `href`, opened as Deno opens a `file:` URL, lies in the package. */
  const inPackage = (href: string) => {
    let url: URL, path: string;
    try {
      url = new URL(href);
      path = decodeURIComponent(url.pathname);
    } catch {
      return false;
    }
    return url.protocol === "file:" && (url.host === "" || url.host === "localhost") &&
      path.startsWith(`${pkg}/`) && !path.split("/").some((s) => s === ".." || s === ".");
  };
  try {
    for (const [i, seed] of caseSeeds(rand, cases)) {
      const r = new Random(seed);
      const field = r.pick(["dataPath", "dataPath", "dataPath", "executable", "params"]);
      const path = hostilePath(
        r,
        root,
        field === "dataPath" ? SHARD : field === "executable" ? "executable.tvm" : INDEX,
      );
      const caseManifest = { ...manifest, [field === "dataPath" ? "" : field]: path };
      delete (caseManifest as Record<string, unknown>)[""];
      const caseIndex = field === "dataPath"
        ? { ...index, records: [{ ...index.records[0], dataPath: path }] }
        : index;
      const where = r.pick(["path", "url", "map"] as const);
      let map: LoggingMap | undefined;
      let location: string | URL | LoggingMap;
      if (where === "map") {
        map = new LoggingMap([
          ["package.json", JSON.stringify(caseManifest)],
          ["executable.tvm", executable],
          [INDEX, JSON.stringify(caseIndex)],
          [`params/${SHARD}`, shard],
        ]);
        // Canaries where a resolver that climbs would look.
        for (const key of ["secret.txt", SHARD, "../secret.txt", `../${SHARD}`, "/secret.txt"]) {
          map.set(key, canary);
        }
        map.set("secret.tvm", executable);
        location = map;
      } else {
        await Deno.writeTextFile(`${pkg}/package.json`, JSON.stringify(caseManifest));
        await Deno.writeTextFile(`${pkg}/${INDEX}`, JSON.stringify(caseIndex));
        location = where === "path" ? pkg : new URL(`file://${pkg}/`);
      }
      report.tried++;
      fetched = [];
      const what = `case ${i} (${where}, ${field} ${JSON.stringify(path.slice(0, 120))})`;
      const t0 = performance.now();
      const outcome = await settle(readPackageFiles(location), HANG_MS);
      if (outcome === "hang" || performance.now() - t0 > HANG_MS) {
        recordBug(report, "hangs", what);
        continue;
      }
      if ("error" in outcome) {
        const e = outcome.error;
        if (e instanceof TVMPackageError || e instanceof TensorCacheError) report.rejected++;
        else recordBug(report, "otherExceptions", `${what}: ${String(e).slice(0, 200)}`);
      } else {
        report.loaded++;
        const files = outcome.value as Awaited<ReturnType<typeof readPackageFiles>>;
        if (isCanary(weightBytes(files.weights))) {
          recordBug(report, "wrong", `${what}: a weight holds a canary's bytes`);
        }
      }
      const outside = fetched.filter((href) => !inPackage(href));
      if (outside.length > 0) {
        recordBug(
          report,
          "wrong",
          `${what}: read outside the package: ${outside[0].slice(0, 200)}`,
        );
      }
      // A missing file is only missing; asking for a canary that is there is a read outside.
      const strayKeys = map?.asked.filter((k) => !packageKeys.has(k) && map.has(k)) ?? [];
      if (strayKeys.length > 0) {
        recordBug(report, "wrong", `${what}: asked the map for ${JSON.stringify(strayKeys[0])}`);
      }
    }
  } finally {
    globalThis.fetch = original;
    await Deno.remove(root, { recursive: true });
  }
  return report;
}

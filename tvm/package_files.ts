/**
 * Reading a TVM package's files, before any device is touched
 * (`loadTVMPackage` in tvm/load_package.ts then compiles and uploads): the
 * manifest, the executable, the weights index and every shard it names.
 *
 * A package is data from elsewhere, so its reading is as careful as a
 * program's tensor-cache load (builtins/tensor_cache/cache_access.ts):
 *
 * - Every path the package writes (the manifest's `executable` and
 *   `params`, each shard's `dataPath`) must name a file of the package by
 *   the one rule of ground/contained_path.ts: no `..`, `.` or empty
 *   segment, no absolute path or URL, no backslash, NUL or encoded
 *   separator, once decoded or twice. A path that breaks it is a
 *   `TVMPackageError` naming it as written, before anything is read.
 * - Every read is bounded: `package.json`, the executable and the weights
 *   index by `maxFileBytes` (default `DEFAULT_MAX_FILE_BYTES`), a shard by
 *   the length its index declares; a longer file (a link to `/dev/zero`, a
 *   server that never stops) is read one byte past that and no further.
 * - The weights must fit `maxMemoryBytes` (default the VM's 1 GiB), checked
 *   against the index before any shard is read.
 *
 * The weights index and its shards are a tensor cache, and the tensor
 * cache's loader reads them (`loadIndexedTensors`): the shards stream into
 * CPU tensors, checked against the index as they arrive, and
 * `loadTVMPackage` copies those to the device once everything is read.
 *
 * @module
 */

import { pathOutside, siblingPath, urlWithin } from "../ground/contained_path.ts";
import { fetchWhole, shownLocation } from "../builtins/tensor_cache/cache_access.ts";
import { asDirectory, resolveLocation } from "../builtins/tensor_cache/cache_files.ts";
import { loadIndexedTensors } from "../builtins/tensor_cache/cache_loader.ts";
import {
  parseTensorCacheIndex,
  TensorCacheError,
  widensBf16,
} from "../builtins/tensor_cache/cache_format.ts";
import type { NDArray } from "../devices/ndarray.ts";
import type { TensorCacheRoot } from "../devices/tensor_cache.ts";
import { DEFAULT_MAX_MEMORY_BYTES } from "../vm/vm_options.ts";
import {
  parseTVMPackageManifest,
  TVMPackageError,
  type TVMPackageManifest,
} from "./package_format.ts";

/**
 * The default of `maxFileBytes`: the most `package.json`, `executable.tvm`
 * or the weights index may hold, 64 MiB (the tensor cache's bound on an
 * index; real packages' are well under 1 MiB).
 */
export const DEFAULT_MAX_FILE_BYTES = 64 * 2 ** 20;

/**
 * How `loadTVMPackage` reads a package's files (part of its options): what
 * stops it, and how much it may read.
 *
 * @example A package's weights held to 64 MiB, its other files to 1 MiB
 * ```ts
 * import { loadTVMPackage, TVMPackageError } from "@relaxvm/relaxvm";
 *
 * if (import.meta.main) { // needs a WebGPU adapter; the doc tests only type-check it
 *   try {
 *     using pkg = await loadTVMPackage("testdata/tvm_webgpu/mlp", {
 *       maxFileBytes: 2 ** 20,
 *       maxMemoryBytes: 64 * 2 ** 20,
 *       signal: AbortSignal.timeout(10_000),
 *     });
 *     console.log(pkg.params("forward").length); // 4
 *   } catch (e) {
 *     if (e instanceof TVMPackageError) console.log(e.file, e.message); // a path or size refused
 *     else throw e;
 *   }
 * }
 * ```
 */
export interface PackageReadOptions {
  /** Cancels the fetches. */
  signal?: AbortSignal;
  /** The most bytes `package.json`, the executable or the weights index may hold; default 64 MiB. */
  maxFileBytes?: number;
  /**
   * The most bytes the weights may take, their shards and their tensors
   * each, checked against the index before a shard is read; default the
   * VM's default `maxMemoryBytes`, 1 GiB.
   */
  maxMemoryBytes?: number;
}

/** A package's files, read and checked: what `loadTVMPackage` puts on a device. */
export interface PackageFiles {
  /** The validated manifest. */
  readonly manifest: TVMPackageManifest;
  /** What errors call `package.json`. */
  readonly manifestFile: string;
  /** The executable's bytes (TVM's format), not loaded yet. */
  readonly executable: Uint8Array;
  /** What errors call the executable. */
  readonly executableFile: string;
  /**
   * The weights by record name, in index order (none when `params` is
   * null): CPU tensors the caller owns and disposes.
   */
  readonly weights: ReadonlyMap<string, NDArray>;
}

/** Reads a package's files by their package-relative paths (checked before they get here). */
interface PackageReader {
  /** What errors call the file. */
  name(path: string): string;
  /** The file's bytes, at most `maxBytes` of them (`limit` says why, for the message). */
  bytes(path: string, maxBytes: number, limit: string): Promise<Uint8Array>;
  /** The file's URL, which the tensor cache's loader resolves shards against. */
  url(path: string): URL;
  /**
   * What the tensor cache's loader may read the shards of the index at
   * `indexPath` from: the package, and nothing else.
   */
  root(indexPath: string, shardPaths: readonly string[]): TensorCacheRoot;
  /** What errors call the file the tensor cache's loader names by `url`. */
  nameOf(url: string): string;
}

/** A tensor cache's error about `file`, as the package's: the reason, without the cache's prefix. */
function packageError(e: TensorCacheError, file: string): TVMPackageError {
  const prefix = `Cannot load tensor cache: ${e.file}: `;
  const reason = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
  return new TVMPackageError(file, "", reason, { cause: e });
}

/** Files under a directory URL, through `fetch`, each read bounded. */
function urlReader(base: URL, signal: AbortSignal | undefined): PackageReader {
  return {
    name: (path) => new URL(path, base).href,
    async bytes(path, maxBytes, limit) {
      const url = new URL(path, base);
      // Checked already (`pathOutside`); checked again on the URL that is fetched.
      if (!urlWithin(base, url)) {
        throw new TVMPackageError(url.href, "", "the file is outside the package");
      }
      try {
        return await fetchWhole(url, maxBytes, limit, signal);
      } catch (e) {
        if (!(e instanceof TensorCacheError)) throw e;
        throw packageError(e, url.href);
      }
    },
    url: (path) => new URL(path, base),
    // The package's directory, granted as a VM grants a program's: what `urlWithin` allows.
    root: () => base,
    nameOf: (url) => url,
  };
}

/** Where a package held in memory seems to be, for the tensor cache's loader: never fetched. */
const IN_MEMORY = new URL("relaxvm-package:/");

/** Files held in memory, by path. */
function mapReader(files: ReadonlyMap<string, Uint8Array | string>): PackageReader {
  const fileBytes = (path: string) => {
    const file = files.get(path);
    if (file === undefined) throw new TVMPackageError(path, "", "the package has no such file");
    return typeof file === "string" ? new TextEncoder().encode(file) : file;
  };
  const url = (path: string) => new URL(path, IN_MEMORY);
  return {
    name: (path) => path,
    bytes(path, maxBytes, limit) {
      try {
        const bytes = fileBytes(path);
        if (bytes.length > maxBytes) {
          throw new TVMPackageError(
            path,
            "",
            `the file is longer than the ${maxBytes} bytes it may have (${limit})`,
          );
        }
        return Promise.resolve(bytes);
      } catch (e) {
        return Promise.reject(e);
      }
    },
    url,
    root(indexPath, shardPaths) {
      // The shards by the URLs the loader resolves their dataPaths to, and only those.
      const byUrl = new Map(shardPaths.map((p) => [url(p).href, p]));
      return (shard: URL) => {
        const path = byUrl.get(shard.href);
        if (path === undefined) {
          throw new TVMPackageError(shard.href, "", `not a shard of ${indexPath}`);
        }
        return fileBytes(path);
      };
    },
    nameOf: (href) => href.startsWith(IN_MEMORY.href) ? href.slice(IN_MEMORY.href.length) : href,
  };
}

/** `value` if it is a byte count, else a `RangeError` naming the option. */
function byteCount(value: number | undefined, fallback: number, option: string): number {
  if (value === undefined) return fallback;
  if (!(Number.isSafeInteger(value) && value >= 0)) {
    throw new RangeError(
      `loadTVMPackage: ${option} must be a non-negative integer number of bytes, got ${
        String(value)
      }`,
    );
  }
  return value;
}

/**
 * Reads and checks the package at `location` (a directory, URL, or a map of
 * its files held in memory): the manifest, the executable's bytes and the
 * weights, each path checked and each read bounded (see the module
 * comment). Throws a `TVMPackageError` naming the file and field, or a
 * `TensorCacheError` for a malformed weights index.
 */
export async function readPackageFiles(
  location: string | URL | ReadonlyMap<string, Uint8Array | string>,
  options: PackageReadOptions = {},
): Promise<PackageFiles> {
  const maxFileBytes = byteCount(options.maxFileBytes, DEFAULT_MAX_FILE_BYTES, "maxFileBytes");
  const maxMemoryBytes = byteCount(
    options.maxMemoryBytes,
    DEFAULT_MAX_MEMORY_BYTES,
    "maxMemoryBytes",
  );
  const reader = location instanceof Map
    ? mapReader(location)
    : urlReader(asDirectory(resolveLocation(location as string | URL)), options.signal);
  const fileLimit = "maxFileBytes";
  const manifestFile = reader.name("package.json");
  const manifest = parseTVMPackageManifest(
    new TextDecoder().decode(await reader.bytes("package.json", maxFileBytes, fileLimit)),
    manifestFile,
  );
  const executableFile = reader.name(manifest.executable);
  const executable = await reader.bytes(manifest.executable, maxFileBytes, fileLimit);
  const weights = manifest.params === null
    ? new Map<string, NDArray>()
    : await readWeights(reader, manifest.params, maxFileBytes, maxMemoryBytes, options.signal);
  return { manifest, manifestFile, executable, executableFile, weights };
}

/**
 * The weights of the index at `indexPath`, as CPU tensors by record name:
 * every `dataPath` checked and the weights' size checked against
 * `maxMemoryBytes` before any shard is read; then the tensor cache's own
 * loader streams the shards (a TVM package's `params/` is a tensor cache),
 * each read to exactly the length the index declares and checked against
 * it, reading only the package's files.
 */
async function readWeights(
  reader: PackageReader,
  indexPath: string,
  maxFileBytes: number,
  maxMemoryBytes: number,
  signal: AbortSignal | undefined,
): Promise<Map<string, NDArray>> {
  const indexFile = reader.name(indexPath);
  const index = parseTensorCacheIndex(
    new TextDecoder().decode(await reader.bytes(indexPath, maxFileBytes, "maxFileBytes")),
    indexFile,
  );
  const paths = index.records.map((shard, i) => {
    const reason = pathOutside(shard.dataPath);
    if (reason !== null) {
      throw new TVMPackageError(
        indexFile,
        `records[${i}].dataPath`,
        `${shownLocation(shard.dataPath)} ${reason}: a shard must be a file of the package`,
      );
    }
    return siblingPath(indexPath, shard.dataPath);
  });
  // Counted as a VM counts them: the shards' bytes read, and the tensors made (bfloat16 widens).
  const shardBytes = index.records.reduce((n, s) => n + s.nbytes, 0);
  const tensorBytes = index.records.flatMap((s) => s.records)
    .reduce((n, r) => n + (widensBf16(r) ? 2 * r.nbytes : r.nbytes), 0);
  if (Math.max(shardBytes, tensorBytes) > maxMemoryBytes) {
    throw new TVMPackageError(
      indexFile,
      "",
      `the weights take ${tensorBytes} bytes (${shardBytes} bytes of shards), more than maxMemoryBytes allows (${maxMemoryBytes})`,
    );
  }
  let loaded: [string, NDArray][];
  try {
    loaded = await loadIndexedTensors(
      index,
      reader.url(indexPath),
      [reader.root(indexPath, paths)],
      signal,
    );
  } catch (e) {
    if (!(e instanceof TensorCacheError)) throw e;
    throw packageError(e, reader.nameOf(e.file));
  }
  return new Map(loaded);
}

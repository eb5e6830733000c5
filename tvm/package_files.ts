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
 * @module
 */

import { pathOutside, siblingPath, urlWithin } from "../ground/contained_path.ts";
import { fetchWhole, shownLocation } from "../builtins/tensor_cache/cache_access.ts";
import { asDirectory, resolveLocation } from "../builtins/tensor_cache/cache_files.ts";
import {
  parseTensorCacheIndex,
  TensorCacheError,
  type TensorCacheShard,
  widensBf16,
} from "../builtins/tensor_cache/cache_format.ts";
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

/** One shard of the weights, read. */
export interface PackageShard {
  /** What errors call it (its URL, or its path in a package held in memory). */
  readonly file: string;
  /** Its entry in the index. */
  readonly shard: TensorCacheShard;
  /** Its bytes, exactly `shard.nbytes` of them. */
  readonly bytes: Uint8Array;
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
  /** The weights' shards, in index order (none when `params` is null). */
  readonly shards: readonly PackageShard[];
}

/** Reads a package's files by their package-relative paths (checked before they get here). */
interface PackageReader {
  /** What errors call the file. */
  name(path: string): string;
  /** The file's bytes, at most `maxBytes` of them (`limit` says why, for the message). */
  bytes(path: string, maxBytes: number, limit: string): Promise<Uint8Array>;
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
        const prefix = `Cannot load tensor cache: ${e.file}: `;
        const reason = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
        throw new TVMPackageError(url.href, "", reason, { cause: e });
      }
    },
  };
}

/** Files held in memory, by path. */
function mapReader(files: ReadonlyMap<string, Uint8Array | string>): PackageReader {
  return {
    name: (path) => path,
    bytes(path, maxBytes, limit) {
      const file = files.get(path);
      if (file === undefined) {
        return Promise.reject(new TVMPackageError(path, "", "the package has no such file"));
      }
      const bytes = typeof file === "string" ? new TextEncoder().encode(file) : file;
      if (bytes.length > maxBytes) {
        return Promise.reject(
          new TVMPackageError(
            path,
            "",
            `the file is longer than the ${maxBytes} bytes it may have (${limit})`,
          ),
        );
      }
      return Promise.resolve(bytes);
    },
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
  const shards = manifest.params === null
    ? []
    : await readWeights(reader, manifest.params, maxFileBytes, maxMemoryBytes);
  return { manifest, manifestFile, executable, executableFile, shards };
}

/**
 * The shards of the weights index at `indexPath`: every `dataPath` checked
 * and the weights' size checked against `maxMemoryBytes` before any shard is
 * read, each shard read to exactly the length the index declares.
 */
async function readWeights(
  reader: PackageReader,
  indexPath: string,
  maxFileBytes: number,
  maxMemoryBytes: number,
): Promise<PackageShard[]> {
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
  const out: PackageShard[] = [];
  for (const [i, shard] of index.records.entries()) {
    const file = reader.name(paths[i]);
    const bytes = await reader.bytes(paths[i], shard.nbytes, "what the index says");
    if (bytes.length !== shard.nbytes) {
      throw new TVMPackageError(
        file,
        "",
        `the shard is ${bytes.length} bytes, the index says ${shard.nbytes}`,
      );
    }
    out.push({ file, shard, bytes });
  }
  return out;
}

/**
 * What a tensor-cache load may read, and from where it reads it: the
 * capability check of `vm.builtin.tensor_cache.load`.
 *
 * A program names a location; the host decides whether it may be read. A VM
 * grants its programs the roots of its option `tensorCacheRoots` and nothing
 * else (by default nothing): a directory or URL prefix grants itself and what
 * is under it, an opaque URL (`blob:`, `data:`) exactly itself, a loader
 * function what it serves. The index and every shard must each be granted,
 * so a `dataPath` cannot leave the granted roots (`../`, an absolute path or
 * URL, an encoded slash). A refused location is named as the program or the
 * index wrote it, and nothing is read or fetched for it: the error says
 * nothing about whether it exists or how long it is.
 *
 * Every read is bounded: the index by `MAX_INDEX_BYTES`, a shard by the
 * length its index declares, so an endless body (`/dev/zero`, a server that
 * never stops) costs no more than that; reading stops when the call that
 * loads stops (its timeout or signal) or ends. A shard is opened, not read
 * whole (`openGranted`): its reader takes it piece by piece.
 *
 * The host itself (calling the builtins or `loadTensorCache` outside any VM)
 * is trusted and may read anything the process may.
 *
 * @module
 */

import type { TensorCacheRoot } from "../../devices/tensor_cache.ts";
import { printable } from "../../ground/printable.ts";
import { urlWithin } from "../../ground/contained_path.ts";
import { resolveLocation } from "./cache_files.ts";
import { TensorCacheError } from "./cache_format.ts";

/** The largest index (`tensor-cache.json`) read: real ones are a few MB for the largest models. */
export const MAX_INDEX_BYTES = 64 * 2 ** 20;

/** A location as written, for messages: escaped, and cut short (a program may write megabytes). */
export function shownLocation(location: string): string {
  const cut = location.length > 200 ? `${location.slice(0, 200)}…` : location;
  return JSON.stringify(printable(cut));
}

/** The error for a location no root grants. */
export function refused(location: string, what: string): Error {
  return new Error(
    `tensor_cache.load: ${what} ${
      shownLocation(location)
    } is not granted to this VM: a program may load only from the roots its host grants (the VM option tensorCacheRoots: directories, URL prefixes or loader functions)`,
  );
}

/**
 * Whether an URL root (a directory or prefix; an opaque URL exactly) grants
 * `url`: by the one rule of ground/contained_path.ts, what `url` adds to the
 * root must be a plain relative path (no `..`, `.` or empty segment, no
 * encoded or backslashed separator, once decoded or twice).
 */
function grantsUrl(root: URL, url: URL): boolean {
  if (url.href === root.href) return true;
  // blob:, data: and other URLs without a hierarchical path grant only themselves.
  const opaque = root.protocol === "blob:" || root.protocol === "data:" ||
    !root.pathname.startsWith("/");
  return !opaque && urlWithin(root, url);
}

/** `root` as a URL (a path resolved like a location), or throws naming it. */
function rootUrl(root: string | URL): URL {
  try {
    const url = resolveLocation(root);
    url.hash = "";
    return url;
  } catch (e) {
    throw new TypeError(
      `tensor_cache.load: the granted root ${shownLocation(String(root))} is not a path or URL`,
      { cause: e },
    );
  }
}

/**
 * A granted file being read, one piece at a time, in the order the file
 * holds them: never more than `maxBytes` in all (more is an error, and
 * reading stops there), and no piece is kept once handed out, so a reader
 * holds what it has not consumed yet and nothing more (a stream's chunk, of
 * the size its source picks). A loader function's bytes are one piece,
 * theirs: viewed, not copied.
 */
export interface BoundedSource {
  /** The next piece, or null at the end of the file. */
  read(): Promise<Uint8Array | null>;
  /** Bytes handed out so far. */
  readonly bytesRead: number;
  /** Stops reading (cancels the stream); nothing is read afterwards. Never throws. */
  cancel(): Promise<void>;
}

/** A source over bytes already in memory (a loader function's). */
function bytesSource(
  bytes: Uint8Array,
  url: URL,
  maxBytes: number,
  limit?: string,
): BoundedSource {
  if (bytes.length > maxBytes) throw tooLong(url, maxBytes, limit);
  let done = false;
  return {
    read() {
      if (done) return Promise.resolve(null);
      done = true;
      return Promise.resolve(bytes);
    },
    get bytesRead() {
      return done ? bytes.length : 0;
    },
    cancel() {
      done = true;
      return Promise.resolve();
    },
  };
}

/** A source over a fetched or loaded body, checked (status, declared length) before any read. */
async function openBody(
  body: Uint8Array | ArrayBuffer | Response,
  url: URL,
  maxBytes: number,
  signal: AbortSignal | undefined,
  reuse: number,
  limit?: string,
): Promise<BoundedSource> {
  if (body instanceof ArrayBuffer) body = new Uint8Array(body);
  if (body instanceof Uint8Array) return bytesSource(body, url, maxBytes, limit);
  if (!(body instanceof Response)) {
    throw new TensorCacheError(
      url.href,
      undefined,
      "the loader returned neither bytes nor a Response",
    );
  }
  if (!body.ok) {
    await body.body?.cancel().catch(() => {});
    throw new TensorCacheError(url.href, undefined, `HTTP ${body.status} ${body.statusText}`);
  }
  const declared = Number(body.headers.get("content-length") ?? NaN);
  if (declared > maxBytes) {
    await body.body?.cancel().catch(() => {});
    throw tooLong(url, maxBytes, limit);
  }
  if (body.body === null) return bytesSource(new Uint8Array(0), url, maxBytes, limit);
  // A byte stream (a fetched file or URL) is read into one buffer, over and over, rather than
  // into a new chunk per read that waits for the garbage collector: `reuse` pieces.
  let reader: ReadableStreamDefaultReader<Uint8Array> | ReadableStreamBYOBReader;
  let buffer: Uint8Array<ArrayBuffer> | null = null;
  try {
    if (reuse === 0) throw new TypeError("no reuse asked");
    reader = body.body.getReader({ mode: "byob" });
    buffer = new Uint8Array(reuse);
  } catch {
    reader = body.body.getReader();
  }
  let total = 0, finished = false;
  const cancel = async () => {
    if (finished) return;
    finished = true;
    await reader.cancel().catch(() => {});
    reader.releaseLock();
  };
  return {
    async read() {
      if (finished) return null;
      try {
        for (;;) {
          signal?.throwIfAborted();
          // Never more than one byte past the limit: enough to see that the file is longer.
          const { done, value } = buffer === null
            ? await (reader as ReadableStreamDefaultReader<Uint8Array>).read()
            : await (reader as ReadableStreamBYOBReader).read(
              buffer.subarray(0, Math.min(buffer.length, maxBytes - total + 1)),
            );
          // Stopped while the read was pending: its bytes are not handed out.
          signal?.throwIfAborted();
          if (done) {
            finished = true;
            reader.releaseLock();
            return null;
          }
          if (value === undefined) continue;
          if (buffer !== null) buffer = new Uint8Array(value.buffer as ArrayBuffer);
          total += value.length;
          if (total > maxBytes) throw tooLong(url, maxBytes, limit);
          if (value.length > 0) return value;
        }
      } catch (e) {
        await cancel();
        if (signal?.aborted || e instanceof TensorCacheError) throw e;
        // A body that fails as it is read (a directory opened as a file, a dropped connection).
        throw new TensorCacheError(url.href, undefined, `cannot read it (${e})`, { cause: e });
      }
    },
    get bytesRead() {
      return total;
    },
    cancel,
  };
}

/** All of a source, concatenated (for the index: at most `MAX_INDEX_BYTES`). */
async function readAll(source: BoundedSource): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  try {
    for (let c = await source.read(); c !== null; c = await source.read()) chunks.push(c);
  } finally {
    await source.cancel();
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(source.bytesRead);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** The error for a file longer than `maxBytes`; `limit` says where that bound comes from. */
function tooLong(url: URL, maxBytes: number, limit?: string): TensorCacheError {
  limit ??= maxBytes === MAX_INDEX_BYTES ? "the largest index read" : "what the index says";
  return new TensorCacheError(
    url.href,
    undefined,
    `the file is longer than the ${maxBytes} bytes it may have (${limit}); reading stopped there`,
  );
}

/** `fetch`, bounded and abortable, with failures as `TensorCacheError`s naming the file. */
async function fetchBounded(
  url: URL,
  maxBytes: number,
  signal: AbortSignal | undefined,
  reuse: number,
  limit?: string,
): Promise<BoundedSource> {
  let response: Response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new TensorCacheError(url.href, undefined, `cannot fetch it (${e})`, { cause: e });
  }
  return await openBody(response, url, maxBytes, signal, reuse, limit);
}

/** A fetched `response` of `url` read whole, bounded as `fetchWhole` reads. */
export async function readResponse(
  response: Response,
  url: URL,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  return await readAll(await openBody(response, url, maxBytes, signal, 0));
}

/**
 * `url` fetched whole, but never more than `maxBytes` of it (`limit` says
 * where that bound comes from, for the message): an endless body stops one
 * byte past it. Fails with a `TensorCacheError` naming the file (a fetch
 * that fails, an HTTP error, a longer file). For the host's own loaders
 * (`loadTVMPackage`), which decide themselves what `url` may be.
 */
export async function fetchWhole(
  url: URL,
  maxBytes: number,
  limit: string,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  return await readAll(await fetchBounded(url, maxBytes, signal, 0, limit));
}

/**
 * Opens `url` (at most `maxBytes`) through the first of `roots` that grants
 * it, or, with `roots` null (the host's own load), whatever the process may
 * read; throws `refused` naming `location` (how the program or the index
 * wrote it) when no root grants it, before anything is read. The caller
 * reads it piece by piece and must `cancel()` it if it stops before the end.
 * With `reuse` > 0, a byte stream is read into one buffer of that many
 * bytes: each piece is then valid only until the next read.
 */
export async function openGranted(
  roots: readonly TensorCacheRoot[] | null,
  url: URL,
  location: string,
  what: string,
  maxBytes: number,
  signal: AbortSignal | undefined,
  reuse = 0,
): Promise<BoundedSource> {
  if (roots === null) return await fetchBounded(url, maxBytes, signal, reuse);
  for (const root of roots) {
    if (typeof root === "function") {
      signal?.throwIfAborted();
      const body = await root(url, signal ?? new AbortController().signal);
      if (body === null || body === undefined) continue;
      return await openBody(body, url, maxBytes, signal, reuse);
    }
    if (grantsUrl(rootUrl(root), url)) return await fetchBounded(url, maxBytes, signal, reuse);
  }
  throw refused(location, what);
}

/** `openGranted`, read whole: for the index, which is parsed at once. */
export async function readGranted(
  roots: readonly TensorCacheRoot[] | null,
  url: URL,
  location: string,
  what: string,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  return await readAll(await openGranted(roots, url, location, what, maxBytes, signal));
}

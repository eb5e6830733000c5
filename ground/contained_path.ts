/**
 * The one rule for the files a loader reads on behalf of data it was given:
 * a path written relative to a directory (a TVM package's `executable` and
 * `params`, a shard's `dataPath`) names a file under that directory and
 * nothing else. `loadTVMPackage` checks every path its manifest and its
 * weights index write; the tensor cache's access check
 * (builtins/tensor_cache/cache_access.ts) checks the `dataPath`s a
 * program's index writes and what a granted URL adds to its root. Both
 * check before anything is read, and name the path as it was written.
 *
 * A path is refused when it is empty or longer than `MAX_PATH_LENGTH`, when
 * its percent-encoding is malformed or nested more than `MAX_DECODINGS`
 * deep, or when it, or any of its decodings (a server may decode twice, and
 * Deno decodes a `file:` URL once more when it opens it), holds:
 *
 * - a `..`, `.` or empty segment (`a//b`, a trailing `/`);
 * - a leading `/` (an absolute path), or a scheme or drive (`file:`,
 *   `https:`, `C:`) before its first `/`;
 * - a backslash (a separator on Windows and to the URL parser), a NUL or
 *   other control character, `?` or `#` (a query or fragment once resolved
 *   as a URL).
 *
 * So `%2e%2e/x`, `.%2E/x`, `..%2fx`, `..%5Cx`, `%252e%252e/x` and `..\x`
 * are refused as `../x` is. The rule is stricter than what can escape
 * (`a/../b` stays inside, and is still refused): a file of a package or
 * cache has one plain name, and a path that needs more is not one.
 *
 * @module
 */

/** The longest path checked; a longer one is refused (names end up in messages and maps). */
export const MAX_PATH_LENGTH = 4096;

/** How many times a path may decode to something new; one that decodes further is refused. */
export const MAX_DECODINGS = 3;

/** A scheme (`file:`, `https:`) or a drive (`C:`) in front of a path's first segment. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
/** A backslash, a control character, `?` or `#`. */
// deno-lint-ignore no-control-regex
const FORBIDDEN = /[\\\u0000-\u001f\u007f?#]/;

/**
 * Why `path`, written relative to a directory, may not name a file in it —
 * a phrase to follow the path in a message (`"../x" climbs out of its
 * directory`) — or null when it names one.
 *
 * @example
 * ```ts
 * import { pathOutside } from "./contained_path.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(pathOutside("params/shard_0.bin"), null);
 * assertEquals(
 *   pathOutside("%2e%2e/secret.txt"),
 *   "climbs out of its directory (a .. segment), once decoded",
 * );
 * ```
 */
export function pathOutside(path: string): string | null {
  if (path.length === 0) return "is empty";
  if (path.length > MAX_PATH_LENGTH) return `is longer than ${MAX_PATH_LENGTH} characters`;
  let form = path;
  for (let decodings = 0;; decodings++) {
    const reason = formOutside(form);
    if (reason !== null) return decodings === 0 ? reason : `${reason}, once decoded`;
    let next: string;
    try {
      next = decodeURIComponent(form);
    } catch {
      return "is not valid percent-encoding";
    }
    if (next === form) return null;
    if (decodings === MAX_DECODINGS) {
      return `is percent-encoded more than ${MAX_DECODINGS} times over`;
    }
    form = next;
  }
}

/** `pathOutside` for one form of the path (as written or decoded). */
function formOutside(form: string): string | null {
  if (FORBIDDEN.test(form)) return "holds a backslash, a control character, ? or #";
  if (form.startsWith("/")) return "is absolute";
  if (SCHEME.test(form.split("/")[0])) return "names a scheme or a drive";
  for (const segment of form.split("/")) {
    if (segment === "..") return "climbs out of its directory (a .. segment)";
    if (segment === "." || segment === "") return "has an empty or . segment";
  }
  return null;
}

/** Whether `path` starts with a scheme (`https:`, `blob:`) or a drive (`C:`): a URL, not a path. */
export function hasScheme(path: string): boolean {
  return SCHEME.test(path);
}

/**
 * `path` (checked with `pathOutside`) joined to the directory of `from`,
 * both relative to one root and `/`-separated: `sibling("params/index.json",
 * "shard_0.bin")` is `params/shard_0.bin`. Throws a `RangeError` for a path
 * `pathOutside` refuses: callers check first, to throw their own error.
 */
export function siblingPath(from: string, path: string): string {
  const reason = pathOutside(path);
  if (reason !== null) throw new RangeError(`${JSON.stringify(path)} ${reason}`);
  const slash = from.lastIndexOf("/");
  return slash < 0 ? path : `${from.slice(0, slash + 1)}${path}`;
}

/**
 * Whether hierarchical URL `url` lies under directory `root` (its path with
 * a trailing `/` added), by the rule: same scheme, host and credentials,
 * and the part of `url`'s path below the root's passes `pathOutside`. The
 * URL parser resolves `..`, `%2e%2e` and `\`, but not an encoded slash,
 * which Deno decodes when it opens a `file:` URL (`dir/..%2f..%2fetc` is
 * `/etc`): checking what the URL adds to its root catches that too. The
 * root itself is not under itself.
 */
export function urlWithin(root: URL, url: URL): boolean {
  if (url.protocol !== root.protocol || url.host !== root.host) return false;
  if (url.username !== root.username || url.password !== root.password) return false;
  // Compared decoded, so `%5B` and `[` (a path's encoding and a URL's) are one directory.
  const path = decoded(url.pathname), rootPath = decoded(root.pathname);
  if (path === null || rootPath === null) return false;
  const base = rootPath.endsWith("/") ? rootPath : `${rootPath}/`;
  return path.startsWith(base) && pathOutside(path.slice(base.length)) === null;
}

function decoded(path: string): string | null {
  try {
    return decodeURIComponent(path);
  } catch {
    return null;
  }
}

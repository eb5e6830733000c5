/**
 * Where tensor cache files are, and writing them: the only part of the
 * tensor cache that needs more than `fetch`. Reading goes through `fetch`
 * everywhere (Deno fetches `file:` URLs); a plain path is resolved against
 * the working directory in Deno and against the page in a browser. Writing
 * files needs Deno (`Deno.writeFile`); in a browser, write the files that
 * `encodeTensorCache` returns yourself.
 *
 * @module
 */

interface DenoFiles {
  cwd(): string;
  mkdir(path: URL, options: { recursive: boolean }): Promise<void>;
  writeFile(path: URL, data: Uint8Array): Promise<void>;
}

/** The `Deno` namespace when this runs in Deno (typed to what is used here). */
function deno(): DenoFiles | undefined {
  return (globalThis as { Deno?: DenoFiles }).Deno;
}

/**
 * A cache location as a URL: a URL string (`https:`, `file:`, …) as is; a
 * path relative to the working directory (Deno) or the page (browsers).
 */
export function resolveLocation(pathOrUrl: string | URL): URL {
  if (pathOrUrl instanceof URL) return pathOrUrl;
  if (/^[a-zA-Z][a-zA-Z\d+.-]+:/.test(pathOrUrl)) return new URL(pathOrUrl);
  const d = deno();
  if (d !== undefined) {
    const cwd = d.cwd().replaceAll("\\", "/");
    const base = new URL(`file://${cwd.startsWith("/") ? "" : "/"}${cwd}/`);
    return new URL(
      pathOrUrl.replaceAll("\\", "/").split("/").map(encodeURIComponent).join("/"),
      base,
    );
  }
  const page = (globalThis as { location?: { href: string } }).location?.href;
  if (page === undefined) {
    throw new TypeError(`Cannot resolve the path ${JSON.stringify(pathOrUrl)}: pass a URL`);
  }
  return new URL(pathOrUrl, page);
}

/** `url` with a trailing slash, so relative names resolve inside it. */
export function asDirectory(url: URL): URL {
  return url.pathname.endsWith("/") ? url : new URL(`${url.href}/`);
}

/** Writes `files` (name → bytes) into the directory `dir`, creating it (Deno only). */
export async function writeFiles(
  dir: string | URL,
  files: ReadonlyMap<string, Uint8Array>,
): Promise<void> {
  const d = deno();
  const base = asDirectory(resolveLocation(dir));
  if (d === undefined || base.protocol !== "file:") {
    throw new TypeError(
      `Cannot write a tensor cache to ${base.href}: writing files needs Deno and a local directory; ` +
        "elsewhere, store the files encodeTensorCache returns",
    );
  }
  await d.mkdir(base, { recursive: true });
  for (const [name, bytes] of files) await d.writeFile(new URL(name, base), bytes);
}

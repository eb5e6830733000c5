/**
 * The playground's program in a link and in local storage: the editor's text, the arguments
 * and the function to run, compressed (deflate) into the URL's fragment, so a link opens the
 * same program for anyone, and the fragment never reaches a server.
 *
 * It uses no DOM, so tests/playground_test.ts runs it.
 *
 * @module
 */

/** What the page keeps of a program. */
export interface SharedProgram {
  /** The editor's text. */
  source: string;
  /** The arguments field. */
  args: string;
  /** The function Run calls. */
  fn: string;
}

/** The fragment's prefix: the format's version, so later formats can still read old links. */
export const SHARE_PREFIX = "#p1=";

async function pipe(bytes: Uint8Array, stream: CompressionStream | DecompressionStream) {
  const out = new Response(new Blob([bytes as BlobPart]).stream().pipeThrough(stream));
  return new Uint8Array(await out.arrayBuffer());
}

function base64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array {
  const s = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

/** The URL fragment (with its `#`) that holds `program`. */
export async function encodeShared(program: SharedProgram): Promise<string> {
  const json = new TextEncoder().encode(JSON.stringify(program));
  return SHARE_PREFIX + base64url(await pipe(json, new CompressionStream("deflate-raw")));
}

/**
 * The program in a fragment `encodeShared` made, or null for any other fragment; throws a
 * `SyntaxError` for a damaged one (a link cut short in an email).
 */
export async function decodeShared(hash: string): Promise<SharedProgram | null> {
  if (!hash.startsWith(SHARE_PREFIX)) return null;
  try {
    const bytes = await pipe(
      fromBase64url(hash.slice(SHARE_PREFIX.length)),
      new DecompressionStream("deflate-raw"),
    );
    return checked(JSON.parse(new TextDecoder().decode(bytes)));
  } catch (e) {
    throw new SyntaxError(`The link's program is damaged: ${(e as Error).message}`);
  }
}

/** `value` as a `SharedProgram` (from a link or local storage), or an error. */
export function checked(value: unknown): SharedProgram {
  const v = value as Partial<SharedProgram> | null;
  if (
    typeof v !== "object" || v === null || typeof v.source !== "string" ||
    typeof v.args !== "string" || typeof v.fn !== "string"
  ) {
    throw new TypeError("not a playground program");
  }
  return { source: v.source, args: v.args, fn: v.fn };
}

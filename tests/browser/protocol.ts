/**
 * What tests/browser_test.ts and its child process, tests/browser/e2e.ts,
 * share: where Chromium is, and the lines the child prints to report each
 * check.
 *
 * @module
 */

/** Lines starting with this carry a JSON `E2EEvent`; anything else is the child's own output. */
export const PROTOCOL_PREFIX = "@@relaxvm-browser ";

/** One line of the child's report. */
export type E2EEvent =
  | { kind: "plan"; checks: string[] }
  | { kind: "check"; name: string; error: string | null; ms: number }
  | { kind: "done"; browser: string; ms: number };

/** Where Debian, Ubuntu and Chrome put the browser, in order of preference. */
const CANDIDATES = [
  "/usr/bin/chromium",
  "/usr/lib/chromium/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome-stable",
  "/usr/bin/google-chrome",
];

function exists(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

function env(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // no --allow-env: treat as unset
  }
}

/**
 * The Chromium executable to drive: `RELAXVM_CHROMIUM` when set (a path
 * that does not exist means "none"), else the first of the usual places
 * that exists; null when there is none.
 */
export function findChromium(): string | null {
  const chosen = env("RELAXVM_CHROMIUM");
  if (chosen !== undefined && chosen !== "") return exists(chosen) ? chosen : null;
  return CANDIDATES.find(exists) ?? null;
}

/** Whether a missing browser fails the browser test instead of ignoring it. */
export function browserRequired(): boolean {
  return env("RELAXVM_REQUIRE_BROWSER") === "1";
}

/** How to get a browser, for messages. */
export const INSTALL_HINT =
  "install Debian's chromium (apt-get install -y --no-install-recommends chromium) " +
  "or set RELAXVM_CHROMIUM to a Chromium or Chrome executable";

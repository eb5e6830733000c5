/**
 * `deno task web`: bundles the library and the playground (web/bundle.ts)
 * and serves the playground on 127.0.0.1 only.
 *
 * | path | what | Content-Security-Policy |
 * | --- | --- | --- |
 * | `/`, `/index.html` | the playground | {@linkcode PLAYGROUND_CSP}: eval allowed, for the editor and the VM's specialized loops |
 * | `/strict.html` | the same page, built-in samples and `.rvm` files only | {@linkcode STRICT_CSP}: no eval |
 * | `/playground.css` | styles | |
 * | `/dist/relaxvm.js`, `/dist/playground.js` | the bundles, built in memory at start | |
 *
 * The pages refer to `../dist/…`, so the same files also work from any
 * static server rooted at the repository after `deno task bundle`
 * (`/web/index.html`). WebGPU needs a secure context: `http://127.0.0.1` and
 * `http://localhost` are, a LAN address is not.
 *
 * Usage: `deno task web [--port <n>]` (default 8000; 0 picks a free port).
 *
 * @module
 */

import { buildBundles, type Bundles } from "./bundle.ts";

/**
 * The playground's policy: same-origin scripts only, and eval (the editor runs typed code).
 * Styles may be inline and images `data:` URLs: the editor (CodeMirror) writes its theme into
 * `<style>` elements and draws its error marks with SVG `data:` images.
 */
export const PLAYGROUND_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'";

/** strict.html's policy (also in its meta element): same-origin scripts only, no eval. */
export const STRICT_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'";

const WEB = new URL("./", import.meta.url);

interface Route {
  /** A file in web/, read on each request (so edits show on reload), or a bundle's name. */
  file?: string;
  bundle?: keyof Bundles;
  type: string;
  csp?: string;
}

const ROUTES: Record<string, Route> = {
  "/": { file: "index.html", type: "text/html", csp: PLAYGROUND_CSP },
  "/index.html": { file: "index.html", type: "text/html", csp: PLAYGROUND_CSP },
  "/strict.html": { file: "strict.html", type: "text/html", csp: STRICT_CSP },
  "/playground.css": { file: "playground.css", type: "text/css" },
  "/dist/relaxvm.js": { bundle: "relaxvm.js", type: "text/javascript" },
  "/dist/playground.js": { bundle: "playground.js", type: "text/javascript" },
};

/** Options of {@linkcode servePlayground}. */
export interface ServeOptions {
  /** The bundles to serve (from `buildBundles()`). */
  bundles: Bundles;
  /** TCP port on 127.0.0.1; 0 (the default) picks a free one. */
  port?: number;
  /** Called with the page's URL once listening. */
  onListen?: (url: string) => void;
}

/** Answers one request from the route table. */
async function respond(req: Request, bundles: Bundles): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (path === "/favicon.ico") return new Response(null, { status: 204 });
  const route = ROUTES[path];
  if (route === undefined || (req.method !== "GET" && req.method !== "HEAD")) {
    return new Response("Not found\n", { status: 404, headers: { "content-type": "text/plain" } });
  }
  const body = route.bundle !== undefined
    ? bundles[route.bundle]
    : await Deno.readTextFile(new URL(route.file!, WEB));
  const headers = new Headers({
    "content-type": `${route.type}; charset=utf-8`,
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
  });
  if (route.csp !== undefined) headers.set("content-security-policy", route.csp);
  return new Response(req.method === "HEAD" ? null : body, { headers });
}

/**
 * Serves the playground on 127.0.0.1. Stop it with `shutdown()` (or
 * `await using`).
 */
export function servePlayground(options: ServeOptions): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    onListen: ({ port }) => options.onListen?.(`http://127.0.0.1:${port}/`),
  }, (req) => respond(req, options.bundles));
}

if (import.meta.main) {
  const at = Deno.args.indexOf("--port");
  const port = at >= 0 ? Number(Deno.args[at + 1]) : 8000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`web: --port needs a port number, got ${Deno.args[at + 1]}`);
    Deno.exit(2);
  }
  let bundles: Bundles;
  try {
    bundles = await buildBundles();
  } catch (e) {
    console.error(`web: ${e instanceof Error ? e.message : e}`);
    Deno.exit(1);
  }
  servePlayground({
    bundles,
    port,
    onListen: (url) => {
      console.log(`relaxvm playground:             ${url}`);
      console.log(`the same under a strict CSP:    ${url}strict.html`);
      console.log("(bundles are built once at start: restart to pick up library changes)");
    },
  });
}

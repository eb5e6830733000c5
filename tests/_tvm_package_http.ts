/**
 * The child of `tvm_package_paths_test.ts`'s HTTP test (the test runner has
 * no network permission): serves the committed MLP package on 127.0.0.1
 * with one file replaced by a body that never ends, loads it, and prints
 * one JSON object: per case, the error (`name: message`), how long the load
 * took and whether the server saw its body cancelled. Then stops the server.
 *
 *     deno run --allow-net=127.0.0.1 --allow-read tests/_tvm_package_http.ts
 *
 * @module
 */

import { loadTVMPackage, type WebGPUDevice } from "../mod.ts";
import { readPackageFiles } from "../tvm/package_files.ts";
import { weightBytes } from "./_tvm_packages.ts";

const MLP = new URL("../testdata/tvm_webgpu/mlp/", import.meta.url);
const NO_DEVICE = new Proxy({}, {
  get(_, key) {
    throw new Error(`the device was used (${String(key)}): the load read too far`);
  },
}) as WebGPUDevice;

let endless: { file: string; length: string | null } | null = null;
let cancelled = false;

/** A body of zeros that never ends, noting when the server's side is cancelled. */
function endlessBody(): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(64 * 1024);
  return new ReadableStream({
    pull(controller) {
      controller.enqueue(chunk);
    },
    cancel() {
      cancelled = true;
    },
  });
}

const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
  const path = new URL(request.url).pathname.replace(/^\/pkg\//, "");
  if (endless !== null && path.endsWith(endless.file)) {
    const headers = endless.length === null ? undefined : { "content-length": endless.length };
    return new Response(endlessBody(), { headers });
  }
  try {
    return new Response(await Deno.readFile(new URL(path, MLP)));
  } catch {
    return new Response("not found", { status: 404 });
  }
});
const base = `http://127.0.0.1:${server.addr.port}/pkg/`;

const results: Record<string, { error: string; ms: number; cancelled: boolean }> = {};
for (const file of ["executable.tvm", "params_shard_0.bin"]) {
  for (const [declared, length] of [["no length", null], ["a huge length", String(2 ** 40)]]) {
    endless = { file, length };
    cancelled = false;
    const t0 = performance.now();
    let error = "";
    try {
      await loadTVMPackage(base, { device: NO_DEVICE });
    } catch (e) {
      error = `${(e as Error).name}: ${(e as Error).message}`;
    }
    const ms = performance.now() - t0;
    // The server learns of the cancel once the connection closes.
    for (let i = 0; i < 100 && !cancelled; i++) await new Promise((r) => setTimeout(r, 20));
    results[`${file}, ${declared}`] = { error, ms, cancelled };
  }
}
endless = null;
const t0 = performance.now();
let error = "";
try {
  const files = await readPackageFiles(base);
  const read = weightBytes(files.weights).length;
  if (read !== 3232) error = `read ${read} bytes`;
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
results["the package, after"] = { error, ms: performance.now() - t0, cancelled: false };
await server.shutdown();
console.log(JSON.stringify(results));

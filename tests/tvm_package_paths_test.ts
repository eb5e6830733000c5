/**
 * The TVM package loader reads only its package, and only so much of it
 * (issue 27, findings 1 and 2): shard `dataPath`s written to climb out
 * (`%2e%2e/`, `..\`, `.%2E/`, an encoded slash, double encoding, absolute
 * paths and URLs, NUL) are refused before anything is read, by the rule the
 * tensor cache's access check uses too (ground/contained_path.ts); files
 * that never end (links to `/dev/zero`, an HTTP body that never stops) and
 * weights past `maxMemoryBytes` are `TVMPackageError`s, quickly, and a good
 * package reads afterwards. Everything here fails before a device is
 * needed; tests/webgpu/tvm_package_suite.ts loads the same packages on one.
 * The tensor cache's program loads and `dumpTensorCache`'s update keep to
 * the same rule.
 */

import { assert, assertEquals, assertRejects, assertStringIncludes } from "@std/assert";
import {
  dumpTensorCache,
  loadTVMPackage,
  tensor,
  TensorCacheError,
  TVMPackageError,
  VirtualMachine,
  VMError,
  type WebGPUDevice,
} from "../mod.ts";
import { pathOutside } from "../ground/contained_path.ts";
import { readPackageFiles } from "../tvm/package_files.ts";
import { PACKAGES_DIR, plantedPackage, SHARD, weightBytes, withDataPath } from "./_tvm_packages.ts";
import { loaderProgram } from "./_tensor_cache_hand.ts";

/** A device the loads here must never reach: they fail while reading files. */
const NO_DEVICE = new Proxy({}, {
  get(_, key) {
    throw new Error(`the test's device was used (${String(key)}): the load read too far`);
  },
}) as WebGPUDevice;

/** Runs `fn` with `fetch` recording every URL it is asked for. */
async function fetched<T>(fn: () => Promise<T>): Promise<{ urls: string[]; result: T }> {
  const original = globalThis.fetch;
  const urls: string[] = [];
  globalThis.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
    urls.push(input instanceof Request ? input.url : String(input));
    return original(input, init);
  };
  try {
    return { urls, result: await fn() };
  } finally {
    globalThis.fetch = original;
  }
}

/** The escapes of the issue, and their relatives: each climbs from `params/` to the secret. */
function escapes(root: string): string[] {
  return [
    "%2e%2e/%2e%2e/secret.txt",
    "%2E%2E/%2E%2E/secret.txt",
    "..\\..\\secret.txt",
    ".%2E/.%2E/secret.txt",
    "..%2f..%2fsecret.txt",
    "..%2F..%2Fsecret.txt",
    "..%5c..%5csecret.txt",
    "%252e%252e/%252e%252e/secret.txt",
    "%25252e%25252e/%25252e%25252e/secret.txt",
    "../../secret.txt",
    "./../../secret.txt",
    `${root}/secret.txt`,
    `file://${root}/secret.txt`,
    `FILE://${root}/secret.txt`,
    "C:\\secret.txt",
    `${SHARD}\u0000`,
    `${SHARD}%00`,
    `.//${SHARD}`,
    `${"a/".repeat(3000)}${SHARD}`,
    "%zz/secret.txt",
    "",
  ];
}

Deno.test("finding 1: a shard's dataPath that climbs out of the package is refused, unread", async () => {
  const { root, pkg, index } = await plantedPackage();
  try {
    for (const dataPath of escapes(root)) {
      await Deno.writeTextFile(`${pkg}/params/ndarray-cache.json`, withDataPath(index, dataPath));
      const { urls, result } = await fetched(() =>
        assertRejects(() => loadTVMPackage(pkg, { device: NO_DEVICE }), TVMPackageError)
      );
      const e = result as TVMPackageError;
      assertEquals(e.field, "records[0].dataPath", `${dataPath}: ${e.message}`);
      const shown = JSON.stringify(dataPath.length > 200 ? `${dataPath.slice(0, 200)}…` : dataPath)
        .replace("\\u0000", "\\\\x00");
      assertStringIncludes(e.message, shown, "named as written");
      assertStringIncludes(e.message, "a shard must be a file of the package");
      assert(urls.every((u) => !u.includes("secret")), `${dataPath}: read ${urls}`);
      assert(!urls.some((u) => u.endsWith(SHARD)), `${dataPath}: no shard was read`);
    }
    // The same package with its own dataPath reads, the shard's bytes its own.
    await Deno.writeTextFile(`${pkg}/params/ndarray-cache.json`, index);
    const files = await readPackageFiles(pkg);
    assertEquals(weightBytes(files.weights), await Deno.readFile(`${pkg}/params/${SHARD}`));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("finding 1: a package held in memory resolves its paths by the same rule", async () => {
  const { root, pkg, index } = await plantedPackage();
  try {
    const files = new Map<string, Uint8Array | string>();
    for (const f of ["package.json", "executable.tvm", `params/${SHARD}`]) {
      files.set(f, await Deno.readFile(`${pkg}/${f}`));
    }
    files.set("secret.txt", await Deno.readFile(`${root}/secret.txt`));
    for (const dataPath of ["../../secret.txt", "%2e%2e/%2e%2e/secret.txt", "..\\..\\secret.txt"]) {
      files.set("params/ndarray-cache.json", withDataPath(index, dataPath));
      const e = await assertRejects(
        () => loadTVMPackage(files, { device: NO_DEVICE }),
        TVMPackageError,
      );
      assertEquals(e.field, "records[0].dataPath");
    }
    files.set("params/ndarray-cache.json", index);
    assertEquals(weightBytes((await readPackageFiles(files)).weights).length, 3232);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("finding 1: the rule is one: the tensor cache refuses what the package loader refuses", async () => {
  const { root, pkg } = await plantedPackage();
  try {
    // A program's index beside the shard, naming the secret each way the package may not.
    const dir = `${pkg}/params`;
    const good = JSON.parse(await Deno.readTextFile(`${dir}/ndarray-cache.json`));
    for (const dataPath of escapes(root).filter((p) => p !== "")) {
      assert(pathOutside(dataPath) !== null, dataPath);
      await Deno.writeTextFile(
        `${dir}/tensor-cache.json`,
        JSON.stringify({ ...good, records: [{ ...good.records[0], dataPath }] }),
      );
      using vm = new VirtualMachine(loaderProgram(`${dir}/tensor-cache.json`), undefined, {
        tensorCacheRoots: [dir],
      });
      const e = await assertRejects(() => vm.invoke("main"), VMError, "is not granted");
      assertStringIncludes(e.message, "shard", dataPath);
      assertEquals(vm.tensorCache.size, 0);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("finding 1: manifest paths pass the same rule", async () => {
  const manifest = JSON.parse(
    await Deno.readTextFile(new URL("mlp/package.json", PACKAGES_DIR)),
  );
  for (const path of ["%2e%2e/x.tvm", "..\\x.tvm", "a//b.tvm", "/x.tvm", "x.tvm/"]) {
    const e = await assertRejects(
      () =>
        loadTVMPackage(
          new Map([["package.json", JSON.stringify({ ...manifest, executable: path })]]),
        ),
      TVMPackageError,
      "must be a relative path inside the package",
    );
    assertEquals(e.field, "executable");
  }
});

/** `fn` must reject with a `type` (`TVMPackageError`) including `text` within 5 s. */
async function refusedQuickly(
  fn: () => Promise<unknown>,
  text: string,
  type: typeof TVMPackageError | typeof TensorCacheError = TVMPackageError,
) {
  const ms = 5000;
  const t0 = performance.now();
  const e = await assertRejects(fn, type as typeof TVMPackageError, text);
  const took = performance.now() - t0;
  assert(took < ms, `took ${took.toFixed(0)} ms: ${e.message}`);
  return e;
}

Deno.test("finding 2: files that are links to /dev/zero are read no further than their bound", async () => {
  const { root, pkg } = await plantedPackage();
  try {
    const zero = async (file: string) => {
      await Deno.rename(`${pkg}/${file}`, `${pkg}/${file}.real`);
      await Deno.symlink("/dev/zero", `${pkg}/${file}`);
      return async () => {
        await Deno.remove(`${pkg}/${file}`);
        await Deno.rename(`${pkg}/${file}.real`, `${pkg}/${file}`);
      };
    };
    let restore = await zero("executable.tvm");
    await refusedQuickly(
      () => loadTVMPackage(pkg, { device: NO_DEVICE }),
      "executable.tvm: the file is longer than the 67108864 bytes it may have (maxFileBytes)",
    );
    await refusedQuickly(
      () => loadTVMPackage(pkg, { device: NO_DEVICE, maxFileBytes: 4096 }),
      "longer than the 4096 bytes",
    );
    await restore();
    restore = await zero("package.json");
    await refusedQuickly(
      () => loadTVMPackage(pkg, { device: NO_DEVICE }),
      "package.json: the file is longer",
    );
    await restore();
    restore = await zero(`params/${SHARD}`);
    await refusedQuickly(
      () => loadTVMPackage(pkg, { device: NO_DEVICE }),
      `${SHARD}: the file is longer than the 3232 bytes it may have (what the index says)`,
    );
    await restore();
    restore = await zero("params/ndarray-cache.json");
    await refusedQuickly(
      () => loadTVMPackage(pkg, { device: NO_DEVICE }),
      "ndarray-cache.json: the file is longer",
    );
    await restore();
    // The process is fine, and the package reads whole again.
    const files = await readPackageFiles(pkg);
    assertEquals(weightBytes(files.weights), await Deno.readFile(`${pkg}/params/${SHARD}`));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("finding 2: weights past maxMemoryBytes are refused before a shard is read", async () => {
  const { urls } = await fetched(async () => {
    const e = await refusedQuickly(
      () =>
        loadTVMPackage(new URL("mlp", PACKAGES_DIR), { device: NO_DEVICE, maxMemoryBytes: 3000 }),
      "the weights take 3232 bytes (3232 bytes of shards), more than maxMemoryBytes allows (3000)",
    );
    assertStringIncludes(e.file, "ndarray-cache.json");
  });
  assert(!urls.some((u) => u.endsWith(SHARD)), `read ${urls}`);
  await assertRejects(
    () => loadTVMPackage(new URL("mlp", PACKAGES_DIR), { maxFileBytes: -1 }),
    RangeError,
    "maxFileBytes must be a non-negative integer",
  );
  const { weights } = await readPackageFiles(new URL("mlp", PACKAGES_DIR), {
    maxMemoryBytes: 3232,
  });
  assertEquals(weightBytes(weights).length, 3232);
});

Deno.test("finding 2: an HTTP body that never ends is read no further than its bound", async () => {
  // The test runner has no network permission: the server and the loads run in a child that has.
  const child = new URL("./_tvm_package_http.ts", import.meta.url);
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net=127.0.0.1", "--allow-read", child.pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(stdout);
  assertEquals(code, 0, `${text}\n${new TextDecoder().decode(stderr)}`);
  const results = JSON.parse(text) as Record<
    string,
    { error: string; ms: number; cancelled: boolean }
  >;
  for (const file of ["executable.tvm", SHARD]) {
    for (const declared of ["no length", "a huge length"]) {
      const r = results[`${file}, ${declared}`];
      assertEquals(r.error.split(":")[0], "TVMPackageError", JSON.stringify(r));
      assertStringIncludes(r.error, `${file}: the file is longer than`);
      assert(r.ms < 5000, `${file}: ${r.ms} ms`);
      assert(r.cancelled, `${file}, ${declared}: the endless body was cancelled`);
    }
  }
  assertEquals(results["the package, after"].error, "", "a good package reads after");
});

Deno.test("a package path naming a directory is a TVMPackageError, not the fetch's TypeError", async () => {
  const { root, pkg } = await plantedPackage();
  try {
    const manifest = JSON.parse(await Deno.readTextFile(`${pkg}/package.json`));
    await Deno.writeTextFile(
      `${pkg}/package.json`,
      JSON.stringify({ ...manifest, executable: "params" }),
    );
    const e = await assertRejects(
      () => loadTVMPackage(pkg, { device: NO_DEVICE }),
      TVMPackageError,
      "params: cannot read it",
    );
    assertEquals(e.file, `file://${pkg}/params`);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("finding 1: dumpTensorCache's update writes back only files of its own cache, read bounded", async () => {
  const root = await Deno.makeTempDir({ prefix: "relaxvm-paths-" });
  const dir = `${root}/cache`;
  try {
    using w = tensor([1, 2, 3]);
    const index = await dumpTensorCache({ w_0: w }, dir);
    const shard = await Deno.readFile(`${dir}/${index.records[0].dataPath}`);
    await Deno.writeFile(`${root}/outside.bin`, shard);
    const before = (await Deno.stat(`${root}/outside.bin`)).mtime;
    for (const dataPath of ["../outside.bin", "%2e%2e/outside.bin", "..\\outside.bin"]) {
      await Deno.writeTextFile(
        `${dir}/tensor-cache.json`,
        JSON.stringify({ ...index, records: [{ ...index.records[0], dataPath }] }),
      );
      await new Promise((r) => setTimeout(r, 10)); // a write would show in the mtime
      await assertRejects(
        () => dumpTensorCache({ w_1: w }, dir, { updateIfExists: true }),
        TensorCacheError,
        "a shard must be a file of the cache",
      );
      assertEquals((await Deno.stat(`${root}/outside.bin`)).mtime, before, dataPath);
    }
    // A shard that is a link to /dev/zero is read no further than the index says.
    await Deno.writeTextFile(`${dir}/tensor-cache.json`, JSON.stringify(index));
    await Deno.remove(`${dir}/${index.records[0].dataPath}`);
    await Deno.symlink("/dev/zero", `${dir}/${index.records[0].dataPath}`);
    await refusedQuickly(
      () => dumpTensorCache({ w_1: w }, dir, { updateIfExists: true }),
      "the file is longer than the 12 bytes",
      TensorCacheError,
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

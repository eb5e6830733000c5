// The tensor cache: TVM's test_tensor_cache / test_tensor_cache_update
// (tests/python/relax/test_runtime_builtin.py), test_save_load_float8's dtype
// round trip (tests/python/contrib/test_tvmjs.py), tvmjs's record slicing
// (web/tests/node/test_tensor_cache.js), TVM's sharding rule, and every way a
// cache can be malformed.
import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertRejects,
  assertStrictEquals,
  assertThrows,
} from "@std/assert";
import {
  dumpTensorCache,
  encodeTensorCache,
  ExecBuilder,
  getGlobalFunc,
  loadTensorCache,
  type NDArray,
  type ParamModule,
  tensor,
  TensorCacheError,
  type TensorCacheIndex,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import { bfloat16BitsToFloat32, float32ToBfloat16Bits } from "../ground/float_formats.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
const cached = (name: string) => call("vm.builtin.tensor_cache.get", name) as NDArray | null;

/** Runs `fn` with a fresh temporary directory and an empty tensor cache. */
async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  call("vm.builtin.tensor_cache.clear");
  try {
    await fn(dir);
  } finally {
    call("vm.builtin.tensor_cache.clear");
    await Deno.remove(dir, { recursive: true });
  }
}

function randomFloats(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    out[i] = 10 * (seed / 2 ** 32) - 5;
  }
  return out;
}

const bf16Round = (values: Float32Array) =>
  Array.from(values, (v) => bfloat16BitsToFloat32(float32ToBfloat16Bits(v)));

async function readIndex(dir: string): Promise<TensorCacheIndex> {
  return JSON.parse(await Deno.readTextFile(`${dir}/tensor-cache.json`));
}

Deno.test("TVM test_tensor_cache: dump with f32-to-bf16, load, param_array_from_cache", () =>
  withDir(async (dir) => {
    using x0 = tensor([1, 2, 3], { dtype: "int32" });
    using x1 = tensor(randomFloats(200, 7), { shape: [10, 20] });
    await dumpTensorCache({ x_0: x0, x_1: x1 }, dir, { encodeFormat: "f32-to-bf16" });
    const index = await readIndex(dir);
    assertEquals(index.records.length, 1);
    assertEquals(index.records[0].nbytes, 412);
    assertEquals((await Deno.stat(`${dir}/params_shard_0.bin`)).size, 412);
    assertEquals(
      index.records[0].records.map((r) => [r.name, r.dtype, r.format, r.byteOffset, r.nbytes]),
      [["x_0", "int32", "f32-to-bf16", 0, 12], ["x_1", "float32", "f32-to-bf16", 12, 400]],
    );
    await call("vm.builtin.tensor_cache.load", dir, 1, 0);
    const res = call("vm.builtin.param_array_from_cache", "x", -1) as { fields: NDArray[] };
    assertEquals(res.fields.length, 2);
    assertEquals([...res.fields[0].dataSync()], [1, 2, 3]);
    assertEquals(res.fields[1].shape, [10, 20]);
    assertEquals([...res.fields[1].dataSync()], bf16Round(x1.dataSync() as Float32Array));
    // The b16 index describes the same bytes as bfloat16 tensors, which load as such.
    const b16 = JSON.parse(await Deno.readTextFile(`${dir}/tensor-cache-b16.json`));
    assertEquals(b16.records[0].records[1].dtype, "bfloat16");
    assertEquals(b16.records[0].records[1].format, "raw");
    call("vm.builtin.tensor_cache.clear");
    await loadTensorCache(`${dir}/tensor-cache-b16.json`);
    const asBf16 = cached("x_1")!;
    assertEquals(asBf16.dtype, "bfloat16");
    assertEquals([...asBf16.dataSync()], bf16Round(x1.dataSync() as Float32Array));
  }));

Deno.test("TVM test_tensor_cache_update: rewrite in place, add a shard", () =>
  withDir(async (dir) => {
    using x0 = tensor([1, 2, 3], { dtype: "int32" });
    using x1 = tensor(randomFloats(200, 7), { shape: [10, 20] });
    await dumpTensorCache({ x_0: x0, x_1: x1 }, dir, { encodeFormat: "f32-to-bf16" });
    using x1b = tensor(randomFloats(200, 99), { shape: [10, 20] });
    using x2 = tensor(randomFloats(10, 5));
    await dumpTensorCache({ x_1: x1b, x_2: x2 }, dir, {
      encodeFormat: "f32-to-bf16",
      updateIfExists: true,
    });
    const index = await readIndex(dir);
    assertEquals(
      index.records.map((s) => [s.dataPath, s.nbytes, s.records.map((r) => r.name)]),
      [["params_shard_0.bin", 412, ["x_0", "x_1"]], ["params_shard_1.bin", 20, ["x_2"]]],
    );
    await loadTensorCache(dir);
    const res = call("vm.builtin.param_array_from_cache", "x", -1) as { fields: NDArray[] };
    assertEquals(res.fields.map((t) => [...t.dataSync()]), [
      [1, 2, 3],
      bf16Round(x1b.dataSync() as Float32Array),
      bf16Round(x2.dataSync() as Float32Array),
    ]);
    using wrongSize = tensor([1, 2], { dtype: "int32" });
    await assertRejects(
      () => dumpTensorCache({ x_0: wrongSize }, dir, { updateIfExists: true }),
      RangeError,
      `cannot update "x_0" in place: 8 bytes, the cache has 12`,
    );
  }));

Deno.test("TVM test_save_load: every dtype round-trips exactly, raw and f32-to-bf16", () =>
  withDir(async (dir) => {
    const dtypes = [
      "int8",
      "int16",
      "int32",
      "int64",
      "uint8",
      "uint16",
      "uint32",
      "float16",
      "bfloat16",
      "float32",
      "float64",
    ] as const;
    for (const encodeFormat of ["raw", "f32-to-bf16"] as const) {
      for (const dtype of dtypes) {
        using arr = tensor(Array.from({ length: 16 }, (_, i) => i), { dtype });
        await dumpTensorCache({ arr }, `${dir}/${encodeFormat}_${dtype}`, { encodeFormat });
        await loadTensorCache(`${dir}/${encodeFormat}_${dtype}`);
        const back = cached("arr")!;
        assertEquals([back.dtype, [...back.dataSync()]], [dtype, [...arr.dataSync()]]);
      }
    }
  }));

Deno.test("sharding follows TVM: a large tensor gets its own shard at once", async () => {
  const cap = 100 / 2 ** 20; // 100 bytes
  const bytes = (n: number) => tensor(new Uint8Array(n), { dtype: "uint8" });
  const layout = async (sizes: [string, number][]) => {
    const params = sizes.map(([name, n]) => [name, bytes(n)] as const);
    const { index } = await encodeTensorCache(params, { shardCapMB: cap });
    params.forEach(([, t]) => t.dispose());
    return index.records.map((s) => s.records.map((r) => `${r.name}@${r.byteOffset}`));
  };
  assertEquals(await layout([["A", 30], ["B", 30], ["C", 60], ["D", 10]]), [["C@0"], [
    "A@0",
    "B@30",
    "D@60",
  ]]);
  assertEquals(await layout([["A", 30], ["B", 30], ["E", 45]]), [["A@0", "B@30"], ["E@0"]]);
  using t = tensor([1]);
  await assertRejects(
    () => encodeTensorCache([["a", t], ["a", t]]),
    RangeError,
    `duplicate name "a"`,
  );
});

Deno.test("loading: .json path, older ndarray-cache.json, file: URL, progress, metadata", () =>
  withDir(async (dir) => {
    using w = tensor([1, 2, 3, 4], { dtype: "int32" });
    using v = tensor(new Uint8Array(3), { dtype: "uint8" }); // 3 bytes: u lands at offset 3
    using u = tensor([5, 6], { dtype: "int16" });
    await dumpTensorCache([["v", v], ["w", w], ["u", u]], dir, {
      shardCapMB: 9 / 2 ** 20,
      metadata: { model: "tiny" },
    });
    const index = await readIndex(dir);
    // w (16 bytes >= half the cap) gets shard 0 at once; v and u share shard 1, u unaligned.
    assertEquals(
      index.records.map((s) => s.records.map((r) => `${r.name}@${r.byteOffset}`)),
      [["w@0"], ["v@0", "u@3"]],
    );
    const seen: string[] = [];
    const loaded = await loadTensorCache(`${dir}/tensor-cache.json`, {
      onProgress: (p) => seen.push(`${p.shardsLoaded}/${p.shards} ${p.progress.toFixed(2)}`),
    });
    assertEquals(loaded.names, ["w", "v", "u"]);
    assertEquals(loaded.metadata, { model: "tiny" });
    assertEquals(seen, ["0/2 0.00", "1/2 0.70", "2/2 1.00"]);
    assertEquals([...cached("u")!.dataSync()], [5, 6]);
    // An older cache's index name, found from the directory; a file: URL.
    await Deno.rename(`${dir}/tensor-cache.json`, `${dir}/ndarray-cache.json`);
    call("vm.builtin.tensor_cache.clear");
    const url = new URL(`file://${dir}/`);
    assertEquals((await loadTensorCache(url)).url.href, new URL("ndarray-cache.json", url).href);
    assertEquals([...cached("w")!.dataSync()], [1, 2, 3, 4]);
    await Deno.remove(`${dir}/ndarray-cache.json`);
    await assertRejects(() => loadTensorCache(dir), TensorCacheError, "no index found");
  }));

/** Writes a cache, lets `edit` change its index or files, and expects loading to fail. */
async function expectBroken(
  edit: (dir: string, index: TensorCacheIndex & { records: unknown[] }) => Promise<unknown>,
  message: string,
  record?: string,
) {
  await withDir(async (dir) => {
    using a = tensor([1, 2, 3], { dtype: "int32" });
    using b = tensor([4, 5], { dtype: "int32" });
    await dumpTensorCache({ a, b }, dir);
    await loadTensorCache(dir); // a and b are cached now
    using keep = tensor([9]);
    call("vm.builtin.tensor_cache.update", "a", keep, true);
    const index = await readIndex(dir);
    const changed = await edit(dir, index as TensorCacheIndex & { records: unknown[] });
    await Deno.writeTextFile(
      `${dir}/tensor-cache.json`,
      typeof changed === "string" ? changed : JSON.stringify(index),
    );
    const e = await assertRejects(() => loadTensorCache(dir), TensorCacheError, message);
    assertEquals(e.record, record);
    assert(e.file.endsWith(".json") || e.file.endsWith(".bin"), e.file);
    // All or nothing: the cache is as it was.
    assertStrictEquals(cached("a"), keep);
    assertEquals([...cached("b")!.dataSync()], [4, 5]);
  });
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
const recordOf = (index: TensorCacheIndex, name: string) =>
  index.records[0].records.find((r) => r.name === name) as Mutable<
    TensorCacheIndex["records"][0]["records"][0]
  >;

Deno.test("loading rejects malformed JSON, naming the file", () =>
  expectBroken(() => Promise.resolve("{ records: "), "malformed JSON"));

Deno.test("loading rejects a shard shorter than the index says", () =>
  expectBroken(async (dir) => {
    await Deno.writeFile(`${dir}/params_shard_0.bin`, new Uint8Array(12));
  }, "the shard is 12 bytes, the index says 20 (an interrupted download?)"));

Deno.test("loading rejects a record beyond its shard, naming the record", () =>
  expectBroken(
    (_, index) => {
      recordOf(index, "b").byteOffset = 16;
      return Promise.resolve();
    },
    "bytes [16, 24) exceed the shard's 20 bytes",
    "b",
  ));

Deno.test("loading rejects overlapping records, naming both", () =>
  expectBroken(
    (_, index) => {
      recordOf(index, "b").byteOffset = 8;
      return Promise.resolve();
    },
    `bytes [8, 16) overlap record "a" at [0, 12)`,
    "b",
  ));

Deno.test("loading rejects a record whose size does not match its shape and dtype", () =>
  expectBroken(
    (_, index) => {
      recordOf(index, "a").shape = [4];
      return Promise.resolve();
    },
    "nbytes 12 does not match shape [4] of int32 (16 bytes)",
    "a",
  ));

Deno.test("loading rejects a name used twice, an unknown format, a missing field", async () => {
  await expectBroken(
    (_, index) => {
      recordOf(index, "b").name = "a";
      return Promise.resolve();
    },
    "the name is used by another record too",
    "a",
  );
  await expectBroken(
    (_, index) => {
      (recordOf(index, "a") as { format: string }).format = "zstd";
      return Promise.resolve();
    },
    `format "zstd" is not supported`,
    "a",
  );
  await expectBroken((_, index) => {
    delete (index.records[0] as { nbytes?: number }).nbytes;
    return Promise.resolve();
  }, `"nbytes" must be a byte count, got nothing`);
  await expectBroken(
    (_, index) => {
      (recordOf(index, "a") as { dtype: string }).dtype = "float8";
      return Promise.resolve();
    },
    `dtype "float8" is not supported`,
    "a",
  );
});

Deno.test("loading rejects a missing shard file", () =>
  expectBroken(async (dir) => {
    await Deno.remove(`${dir}/params_shard_0.bin`);
  }, "cannot fetch it"));

Deno.test("tensor_cache.get/update/remove/clear hold references and release them", () => {
  call("vm.builtin.tensor_cache.clear");
  const t = tensor([1, 2]);
  assertEquals(call("vm.builtin.tensor_cache.get", "t"), null);
  call("vm.builtin.tensor_cache.update", "t", t);
  assertStrictEquals(cached("t"), t);
  assertThrows(
    () => call("vm.builtin.tensor_cache.update", "t", t),
    Error,
    `"t" is already in the tensor cache; pass override`.replace("tensor cache", "cache"),
  );
  t.dispose();
  assert(!t.disposed, "the cache still holds it");
  call("vm.builtin.tensor_cache.remove", "t");
  call("vm.builtin.tensor_cache.remove", "t"); // absent: nothing happens
  assert(t.disposed, "released with its last holder");
  assertThrows(() => call("vm.builtin.tensor_cache.update", "x", 3), TypeError);
  assertThrows(() => call("vm.builtin.tensor_cache.get", 3), TypeError);
});

Deno.test("param_* builtins: by prefix, by name, unpacked, modules, errors", () => {
  call("vm.builtin.tensor_cache.clear");
  const ts = [tensor([0]), tensor([1]), tensor([2])];
  ts.forEach((t, i) => call("vm.builtin.tensor_cache.update", `p_${i}`, t));
  // Read a tuple's tensors, then free the tuple (nothing holds it), releasing its references.
  const fields = (v: unknown) => {
    const tuple = v as { fields: NDArray[]; releaseIfUnowned(): void };
    const values = tuple.fields.map((t) => t.dataSync()[0]);
    tuple.releaseIfUnowned();
    return values;
  };
  assertEquals(fields(call("vm.builtin.param_array_from_cache", "p", -1)), [0, 1, 2]);
  assertEquals(fields(call("vm.builtin.param_array_from_cache", "p", 2)), [0, 1]);
  assertEquals(fields(call("vm.builtin.param_array_from_cache", "q", -1)), []);
  assertThrows(
    () => call("vm.builtin.param_array_from_cache", "p", 4),
    ReferenceError,
    `"p_3" is not in the tensor cache`,
  );
  assertEquals(fields(call("vm.builtin.param_array_from_cache_by_name", ["p_2", "p_0"])), [2, 0]);
  assertEquals(fields(call("vm.builtin.param_array_from_cache_by_name_unpacked", "p_1")), [1]);
  assertThrows(
    () => call("vm.builtin.param_array_from_cache_by_name_unpacked", "p_1", 7),
    TypeError,
    "name 1 must be a string",
  );
  assertThrows(
    () => call("vm.builtin.param_array_from_cache_by_name", ["zz"]),
    ReferenceError,
    `"zz" is not in the tensor cache`,
  );
  const module = call("vm.builtin.param_module_from_cache", "p", 3) as ParamModule;
  call("vm.builtin.tensor_cache.clear"); // a snapshot: the module keeps its tensors
  assertEquals(module.params.map((t) => t.dataSync()[0]), [0, 1, 2]);
  assertEquals(fields(module.getFunction("get_params")!()), [0, 1, 2]);
  assertEquals(module.getFunction("other"), null);
  ts.forEach((t) => t.dispose());
  assert(!ts[0].disposed, "the module holds them");
  module.releaseIfUnowned();
  assert(ts.every((t) => t.disposed), "released with the module");
  assertInstanceOf(
    assertThrows(() => call("vm.builtin.param_module_from_cache_by_name", "p_0")),
    TypeError,
  );
});

Deno.test("a VM program loads a cache and gathers its weights", () =>
  withDir(async (dir) => {
    using w0 = tensor([1, 2]);
    using w1 = tensor([10, 20]);
    await dumpTensorCache({ w_0: w0, w_1: w1 }, dir);
    const ib = new ExecBuilder();
    ib.function("main", 1, () => {
      ib.emit_call("vm.builtin.tensor_cache.load", [dir, ib.imm(1), ib.imm(0)]);
      ib.emit_call("vm.builtin.param_array_from_cache", ["w", ib.imm(2)], { dst: ib.r(1) });
      ib.emit_call("vm.builtin.tuple_getitem", [ib.r(1), ib.imm(0)], { dst: ib.r(2) });
      ib.emit_call("vm.builtin.tuple_getitem", [ib.r(1), ib.imm(1)], { dst: ib.r(3) });
      ib.emit_call("vm.op.add", [ib.r(2), ib.r(3)], { dst: ib.r(4) });
      ib.emit_call("vm.op.add", [ib.r(4), ib.r(0)], { dst: ib.r(5) });
      ib.emit_ret(ib.r(5));
    });
    using vm = new VirtualMachine(ib.get(), undefined, { tensorCacheRoots: [dir] });
    using x = tensor([100, 100]);
    using out = await vm.invoke("main", x) as NDArray;
    assertEquals([...out.dataSync()], [111, 122]);
    // The weights went into the VM's own cache, not the host's.
    assertEquals(vm.tensorCache.names(), ["w_0", "w_1"]);
    assertEquals(cached("w_0"), null);
    const bad = new ExecBuilder();
    bad.function("main", 0, () => {
      const args = [`${dir}/nowhere`, bad.imm(1), bad.imm(0)];
      bad.emit_call("vm.builtin.tensor_cache.load", args, { dst: bad.r(0) });
      bad.emit_ret(bad.r(0));
    });
    await assertRejects(
      () => new VirtualMachine(bad.get(), undefined, { tensorCacheRoots: [dir] }).invoke("main"),
      VMError,
      "vm.builtin.tensor_cache.load",
    );
  }));

Deno.test("a cache laid out as TVM writes it loads, and encodeTensorCache writes the same bytes", async () => {
  call("vm.builtin.tensor_cache.clear");
  const fixture = new URL("../testdata/tensor_cache/", import.meta.url);
  const { metadata } = await loadTensorCache(fixture);
  assertEquals(metadata, { ParamSize: 2 });
  const x0 = cached("x_0")!, x1 = cached("x_1")!;
  assertEquals([x0.dtype, [...x0.dataSync()]], ["int32", [1, 2, 3]]);
  const expected = [0.1, -2.5, 3.14159, 65504, 1e-40, -0].map((v) =>
    bfloat16BitsToFloat32(float32ToBfloat16Bits(v))
  );
  assertEquals([x1.dtype, x1.shape, [...x1.dataSync()]], ["float32", [2, 3], expected]);
  assertEquals(expected.slice(3, 6), [65536, 9.183549615799121e-41, -0]);
  const { files } = await encodeTensorCache({ x_0: x0, x_1: x1 }, {
    encodeFormat: "f32-to-bf16",
  });
  assertEquals(
    files.get("params_shard_0.bin"),
    await Deno.readFile(new URL("params_shard_0.bin", fixture)),
  );
  call("vm.builtin.tensor_cache.clear");
});

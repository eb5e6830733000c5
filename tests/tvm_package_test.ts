/**
 * TVM WebGPU packages without a GPU: the manifest's validation (every
 * field, hostile names, launch metadata that disagrees with the plan) and
 * the host plans' semantics. Running the packages is
 * `webgpu/tvm_package_suite.ts`; the fuzz family is
 * `fuzz/tvm_package_family.ts`.
 */

import { assert, assertEquals, assertRejects, assertThrows } from "@std/assert";
import {
  DEFAULT_MAX_WORKGROUPS_PER_DISPATCH,
  Executable,
  loadTVMPackage,
  parseTVMPackageManifest,
  tensor,
  TVMPackageError,
} from "../mod.ts";
import { hostFunction, type KernelLaunch } from "../tvm/host_plan.ts";
import type { HostFunction } from "../tvm/package_format.ts";
import { elementwisePackage, gridPackage, largestGrids, PACKAGES_DIR } from "./_tvm_packages.ts";

type Manifest = Record<string, unknown>;

function addManifest(): Manifest {
  return structuredClone(elementwisePackage("+").manifest) as Manifest;
}

function rejects(manifest: Manifest | string, field: string, reason: string): TVMPackageError {
  const text = typeof manifest === "string" ? manifest : JSON.stringify(manifest);
  const e = assertThrows(() => parseTVMPackageManifest(text, "package.json"), TVMPackageError);
  if (field.endsWith("*")) assert(e.field.startsWith(field.slice(0, -1)), e.message);
  else assertEquals(e.field, field, e.message);
  assert(e.message.includes(reason), `${e.message}\ndoes not say: ${reason}`);
  return e;
}

for (const name of ["mlp", "mlp_packed", "encoder", "attention4d", "cumsum", "sort"]) {
  Deno.test(`TVM package ${name}: defines every function its executable calls`, async () => {
    const dir = new URL(`${name}/`, PACKAGES_DIR);
    const manifest = parseTVMPackageManifest(
      await Deno.readTextFile(new URL("package.json", dir)),
      "package.json",
    );
    const ex = Executable.load(await Deno.readFile(new URL(manifest.executable, dir)));
    const called = ex.functions.filter((f) => f.kind === "packed" && !f.name.startsWith("vm."))
      .map((f) => f.name).sort();
    // Exactly those: the exporter leaves out TIR functions the VM never calls.
    assertEquals(called, [...manifest.host_functions.keys()].sort());
    assertEquals(manifest.functions.get("forward")!.inputs, 1);
    ex.dispose();
  });
}

Deno.test("TVM package: format, version and JSON errors name the field", () => {
  rejects("{", "", "malformed JSON");
  rejects("[]", "the manifest", "must be an object");
  rejects({ ...addManifest(), format: "tvmjs" }, "format", 'must be "relaxvm-tvm-webgpu"');
  rejects({ ...addManifest(), version: 2 }, "version", "2 is not supported: this relaxvm reads");
  const { executable: _, ...noExecutable } = addManifest();
  rejects(noExecutable, "executable", "must be a string");
});

Deno.test("TVM package: hostile names and paths are refused", () => {
  for (const path of ["../x.tvm", "/etc/passwd", "https://example.com/x", "a/../../b", "a\\b"]) {
    rejects({ ...addManifest(), executable: path }, "executable", "relative path inside");
  }
  const m = addManifest();
  const hosts = m.host_functions as Record<string, unknown>;
  rejects(
    { ...m, host_functions: { "vm.builtin.alloc_storage": hosts.add } },
    'host_functions["vm.builtin.alloc_storage"]',
    "may not define vm.* functions",
  );
  rejects(
    { ...m, host_functions: { "a\u0007b": hosts.add } },
    'host_functions["a\\u0007b"]',
    "without control characters",
  );
  const kernels = m.kernels as Record<string, unknown>;
  rejects(
    { ...m, kernels: { "add; fn evil": kernels.add } },
    'kernels["add; fn evil"]',
    "WGSL identifier",
  );
  // __proto__ is only a name: it neither fails nor reaches Object.prototype.
  const text = JSON.stringify(m).replace(
    '"host_functions":{"add"',
    '"host_functions":{"__proto__"',
  );
  const parsed = parseTVMPackageManifest(text, "package.json");
  assert(parsed.host_functions.has("__proto__"));
  assertEquals(({} as Record<string, unknown>).params, undefined);
});

Deno.test("TVM package: launch metadata that disagrees with the plan is refused", () => {
  const kernel = (m: Manifest) => (m.kernels as Record<string, Record<string, unknown>>).add;
  const launch = (m: Manifest) =>
    ((m.host_functions as Record<string, HostFunction>).add.body[0]) as unknown as Record<
      string,
      unknown
    >;
  let m = addManifest();
  kernel(m).arg_types = ["handle", "handle", "handle", "int32", "int32"];
  rejects(m, 'kernels["add"].wgsl', "its uniform PODArgs holds {n: i32, packGridDimX: u32}");
  kernel(m).wgsl = (kernel(m).wgsl as string).replace("n: i32,", "n: i32,\n  m: i32,");
  rejects(m, 'host_functions["add"].body[0].args', "takes 5 arguments (its arg_types)");
  m = addManifest();
  kernel(m).arg_types = ["handle", "handle", "handle", "int64"];
  rejects(m, 'kernels["add"].arg_types[3]', '"int64" is not supported');
  m = addManifest();
  kernel(m).launch_param_tags = ["blockIdx.x", "blockIdx.z", "paramWriteAccess:[1,0,0]"];
  rejects(m, 'kernels["add"].launch_param_tags[1]', "blockIdx.z is not supported");
  m = addManifest();
  kernel(m).launch_param_tags = ["blockIdx.x", "threadIdx.x", "paramWriteAccess:[1,0]"];
  rejects(m, 'kernels["add"].launch_param_tags[2]', "for each of the 3 buffers");
  m = addManifest();
  kernel(m).launch_param_tags = ["blockIdx.x", "threadIdx.x", "warpIdx.x"];
  rejects(m, 'kernels["add"].launch_param_tags[2]', "unknown launch tag");
  m = addManifest();
  launch(m).grid_tags = ["threadIdx.x", "blockIdx.x"];
  rejects(m, 'host_functions["add"].body[0].grid_tags', "is launched over");
  m = addManifest();
  launch(m).args = [{ var: "n" }, { data: 0 }, { data: 1 }, { var: "n" }];
  rejects(m, 'host_functions["add"].body[0].args[0]', "takes a buffer here");
  m = addManifest();
  launch(m).launch = "sub";
  rejects(m, 'host_functions["add"].body[0].launch', 'no kernel named "sub"');
});

Deno.test("TVM package: host expressions are checked before anything runs", () => {
  const grid = (m: Manifest, g: unknown) => {
    ((m.host_functions as Record<string, HostFunction>).add.body[0] as unknown as {
      grid: unknown[];
    })
      .grid[0] = g;
    return m;
  };
  rejects(
    grid(addManifest(), { var: "m" }),
    'host_functions["add"].body[0].grid[0]',
    "before it is bound",
  );
  rejects(
    grid(addManifest(), { op: "pow", args: [1, 2] }),
    'host_functions["add"].body[0].grid[0].op',
    "unknown operator",
  );
  rejects(
    grid(addManifest(), { op: "add", args: [1] }),
    'host_functions["add"].body[0].grid[0].args',
    "add takes 2 operands, got 1",
  );
  rejects(
    grid(addManifest(), { data: 0 }),
    'host_functions["add"].body[0].grid[0]',
    "may only be passed to a kernel",
  );
  rejects(grid(addManifest(), 0.5), 'host_functions["add"].body[0].grid[0]', "integer literal");
  let deep: unknown = 1;
  for (let i = 0; i < 100; i++) deep = { op: "add", args: [deep, 1] };
  const e = rejects(
    grid(addManifest(), deep),
    'host_functions["add"].body[0].grid[0].args[0]*',
    "nested deeper than 64",
  );
  assert(e.message.length < 400, "the field path is abbreviated");
});

/** Runs a one-statement host function computing `expr` into an int64 heap slot. */
function evaluate(expr: unknown): number {
  const fn = {
    params: [{ name: "H", kind: "tensor", dtype: "int64", shape: [1] }],
    body: [{ store: 0, index: 0, value: expr }],
  };
  const m = addManifest();
  m.host_functions = { f: fn };
  const parsed = parseTVMPackageManifest(JSON.stringify(m), "package.json");
  using heap = tensor([0n], { dtype: "int64" });
  hostFunction("f", parsed.host_functions.get("f")!, () => {})(heap);
  return Number((heap.cpuView() as BigInt64Array)[0]);
}

Deno.test("TVM host plans: integer division follows TIR (Python's // and %, C's / and %)", () => {
  // The reference: Python's -7 // 2 == -4, -7 % 2 == 1; C's -7 / 2 == -3, -7 % 2 == -1.
  const cases: [string, number, number, number][] = [
    ["floordiv", -7, 2, -4],
    ["floormod", -7, 2, 1],
    ["floordiv", 7, -2, -4],
    ["floormod", 7, -2, -1],
    ["truncdiv", -7, 2, -3],
    ["truncmod", -7, 2, -1],
    ["min", 3, -3, -3],
    ["max", 3, -3, 3],
  ];
  for (const [op, a, b, want] of cases) {
    assertEquals(evaluate({ op, args: [a, b] }), want, `${op}(${a}, ${b})`);
  }
  assertEquals(evaluate({ op: "select", args: [{ op: "lt", args: [1, 2] }, 10, 20] }), 10);
  assertThrows(() => evaluate({ op: "floordiv", args: [1, 0] }), Error, "f: division by zero");
  assertThrows(
    () => evaluate({ op: "cast", dtype: "int32", args: [2 ** 31] }),
    Error,
    "f: 2147483648 does not fit int32",
  );
});

Deno.test("TVM host plans: the MLP's shape function sizes storage as TVM does", async () => {
  const manifest = parseTVMPackageManifest(
    await Deno.readTextFile(new URL("mlp/package.json", PACKAGES_DIR)),
    "package.json",
  );
  const shapeFunc = hostFunction("shape_func", manifest.host_functions.get("shape_func")!, () => {
    throw new Error("a shape function launches nothing");
  });
  for (const n of [1, 7, 1000]) {
    using heap = tensor([BigInt(n), 0n, 0n], { dtype: "int64" });
    shapeFunc(heap);
    // Bytes of the (n, 32) hidden layer and of the (n, 8) output, float32.
    assertEquals([...heap.cpuView() as BigInt64Array], [
      BigInt(n),
      BigInt(n * 32 * 4),
      BigInt(n * 8 * 4),
    ]);
  }
});

Deno.test("TVM host plans: arguments are checked as TVM's argument binder does", () => {
  const parsed = parseTVMPackageManifest(JSON.stringify(addManifest()), "package.json");
  const launches: KernelLaunch[] = [];
  const add = hostFunction("add", parsed.host_functions.get("add")!, (l) => launches.push(l));
  using a = tensor([1, 2, 3]), b = tensor([4, 5, 6]), c = tensor([0, 0, 0]);
  add(a, b, c);
  assertEquals(launches.length, 1);
  assertEquals(launches[0].grid, [1, 64]);
  assertEquals(launches[0].args.slice(3), [3]);
  assertEquals(launches[0].args.slice(0, 3), [c, a, b], "buffers in the kernel's order");
  using short = tensor([1, 2]);
  assertThrows(() => add(a, short, c), Error, "add: argument 1 (B) dimension 0 must be 3 (n)");
  assertThrows(() => add(a, b), Error, "add: expected 3 arguments, got 2");
  assertThrows(() => add(a, 5, c), Error, "add: argument 1 (B) must be a tensor, got number 5");
});

Deno.test("TVM host plans: sizes bind before they are checked, wherever they appear", () => {
  // TVM's take(word_weight, ids[batch * seq], batch, seq, out[batch * seq, 384]): the flat ids
  // come before the scalars that bind batch and seq, as in the MiniLM package.
  const m = addManifest();
  m.host_functions = {
    take: {
      params: [
        {
          name: "ids",
          kind: "tensor",
          dtype: "int32",
          shape: [{ op: "mul", args: [{ var: "batch" }, { var: "seq" }] }],
        },
        { name: "batch", kind: "scalar", dtype: "int64" },
        { name: "out", kind: "tensor", dtype: "float32", shape: [{ var: "n" }, { var: "seq" }] },
      ],
      body: [],
    },
  };
  const parsed = parseTVMPackageManifest(JSON.stringify(m), "package.json");
  const take = hostFunction("take", parsed.host_functions.get("take")!, () => {});
  using ids = tensor(new Int32Array(6), { dtype: "int32" });
  using out = tensor(new Float32Array(3 * 3), { shape: [3, 3] });
  take(ids, 2n, out); // batch 2 (a bigint, as call_tir_dyn passes it), seq 3 from out
  using wrong = tensor(new Float32Array(3 * 4), { shape: [3, 4] });
  assertThrows(() => take(ids, 2n, wrong), Error, "take: argument 0 (ids) dimension 0 must be 8");
});

Deno.test("TVM package: a package in memory that lacks a file says which", async () => {
  await assertRejects(
    () => loadTVMPackage(new Map()),
    TVMPackageError,
    "package.json: the package has no such file",
  );
  const { manifest } = elementwisePackage("+");
  await assertRejects(
    () => loadTVMPackage(new Map([["package.json", JSON.stringify(manifest)]])),
    TVMPackageError,
    "executable.tvm: the package has no such file",
  );
  const broken = elementwisePackage("+");
  await assertRejects(
    () =>
      loadTVMPackage(
        new Map<string, string | Uint8Array>([
          ["package.json", JSON.stringify(broken.manifest)],
          ["executable.tvm", broken.executable.subarray(0, 20)],
        ]),
      ),
    TVMPackageError,
    "executable.tvm: Cannot load executable",
  );
});

Deno.test("TVM package: a constant grid over the launch budget fails the load, naming it", async () => {
  // 2^24 workgroups froze the process for 8.7 s on the software adapter (issue 27, finding 5).
  // Refused before a device is acquired: this test needs no GPU.
  const e = await assertRejects(() => loadTVMPackage(gridPackage(2 ** 24)), TVMPackageError);
  assertEquals(e.field, 'host_functions["add"].body[0].grid');
  assert(
    e.message.includes(
      `kernel add: a grid of [16777216, 64] is 16777216 workgroups, more than the ${DEFAULT_MAX_WORKGROUPS_PER_DISPATCH}`,
    ),
    e.message,
  );
  await assertRejects(
    () => loadTVMPackage(gridPackage(1000), { maxWorkgroupsPerDispatch: 999 }),
    TVMPackageError,
    "is 1000 workgroups, more than the 999 one dispatch may have (maxWorkgroupsPerDispatch)",
  );
  for (const bad of [0, -1, 1.5, NaN, -Infinity, 2 ** 53, "many"]) {
    await assertRejects(
      () => loadTVMPackage(gridPackage(1), { maxWorkgroupsPerDispatch: bad as number }),
      RangeError,
      "maxWorkgroupsPerDispatch must be a positive integer",
    );
  }
});

Deno.test("TVM package: the shipped packages' largest grids fit the default launch budget", async () => {
  const minilm = new URL("../.weights/tvm-minilm/", import.meta.url);
  const cases: [string, URL, () => ReturnType<typeof tensor>[]][] = [
    [
      "mlp",
      new URL("mlp/", PACKAGES_DIR),
      () => [tensor(new Float32Array(4096 * 16), { shape: [4096, 16] })],
    ],
    [
      "encoder",
      new URL("encoder/", PACKAGES_DIR),
      () => [tensor(new Float32Array(4096 * 32), { shape: [4096, 32] })],
    ],
  ];
  try {
    Deno.statSync(new URL("package.json", minilm));
    // Its longest sequence (512 positions), at the batch of 32 the benches use.
    cases.push(["all-MiniLM-L6-v2", minilm, () => [
      tensor(new Int32Array(32 * 512), { shape: [32, 512] }),
      tensor(new Float32Array(32 * 512).fill(1), { shape: [32, 512] }),
    ]]);
  } catch {
    console.log("no .weights/tvm-minilm: MiniLM's grids not checked");
  }
  for (const [name, dir, inputs] of cases) {
    const args = inputs();
    try {
      const largest = Math.max(
        ...[...(await largestGrids(dir, args)).values()].map((l) => l.workgroups),
      );
      console.log(`${name}: largest grid ${largest} workgroups`);
      assert(largest <= DEFAULT_MAX_WORKGROUPS_PER_DISPATCH, `${name}: ${largest}`);
      assert(largest >= 1, `${name}: no launch recorded`);
    } finally {
      for (const t of args) t.dispose();
    }
  }
});

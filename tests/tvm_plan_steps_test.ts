/**
 * Issue 28's launch-plan steps, on the CPU with a launcher that records:
 * `return` (a host function's value: TVM computes the attention scale on
 * the host), `for` and `alloc` (the scans' host code loops over kernels
 * and allocates a workspace), `shl`/`shr`, and tensors with a symbolic
 * `elem_offset` (the paged KV cache's views: the offset binds and goes to
 * the kernel, the buffer is bound whole). Running them on WebGPU is
 * `webgpu/tvm_package_suite.ts` (cumsum) and
 * `webgpu/tvm_plan_steps_suite.ts` (an element offset).
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { NDArray, parseTVMPackageManifest, tensor, TVMPackageError } from "../mod.ts";
import { hostFunction, type KernelLaunch, type KernelLauncher } from "../tvm/host_plan.ts";
import type { HostFunction } from "../tvm/package_format.ts";
import { elementwisePackage } from "./_tvm_packages.ts";

/** A launcher that records launches and scratch tensors. */
function recorder(): { launch: KernelLauncher; launches: KernelLaunch[]; scratch: NDArray[] } {
  const launches: KernelLaunch[] = [], scratch: NDArray[] = [];
  const launch: KernelLauncher = (l) => void launches.push(l);
  launch.alloc = (shape, dtype) => {
    const t = NDArray.empty(shape, dtype as "float32");
    scratch.push(t);
    return t;
  };
  return { launch, launches, scratch };
}

/** The elementwise package's manifest with host function `add`'s body and params replaced. */
function manifestWith(params: unknown[] | undefined, body: unknown[]): string {
  const m = structuredClone(elementwisePackage("+").manifest) as unknown as {
    host_functions: { add: { params: unknown[]; body: unknown[] } };
  };
  if (params !== undefined) m.host_functions.add.params = params;
  m.host_functions.add.body = body;
  return JSON.stringify(m);
}

const launchAdd = (c: unknown) => ({
  launch: "add",
  args: [c, { data: 0 }, { data: 1 }, { var: "n" }],
  grid: [{ op: "floordiv", args: [{ op: "add", args: [{ var: "n" }, 63] }, 64] }, 64],
  grid_tags: ["blockIdx.x", "threadIdx.x"],
});

Deno.test("TVM plan steps: a host function returns its value (TVM's attention scale)", () => {
  const m = JSON.parse(manifestWith(undefined, [{ return: { float: 8 ** -0.5 } }]));
  m.host_functions.compute_symbolic_expr = { params: [], body: [{ return: { float: 8 ** -0.5 } }] };
  const parsed = parseTVMPackageManifest(JSON.stringify(m), "package.json");
  const { launch } = recorder();
  const f = hostFunction(
    "compute_symbolic_expr",
    parsed.host_functions.get("compute_symbolic_expr")!,
    launch,
  );
  assertEquals(f(), 8 ** -0.5);
});

Deno.test("TVM plan steps: loops, shifts and a scratch tensor freed after the call", () => {
  // As cumsum's host code: a workspace, then kernels launched in a loop over rounds.
  const parsed = parseTVMPackageManifest(
    manifestWith(undefined, [
      { alloc: 3, dtype: "float32", shape: [{ var: "n" }] },
      {
        for: "i",
        extent: { op: "shr", args: [{ var: "n" }, 1] },
        body: [
          { let: "w", value: { op: "shl", args: [1, { var: "i" }] } },
          launchAdd({ data: 3 }),
        ],
      },
      launchAdd({ data: 2 }),
    ]),
    "package.json",
  );
  const { launch, launches, scratch } = recorder();
  const f = hostFunction("add", parsed.host_functions.get("add")!, launch);
  using a = tensor([1, 2, 3, 4, 5]), b = tensor([1, 1, 1, 1, 1]), c = tensor(new Float32Array(5));
  f(a, b, c);
  assertEquals(launches.length, 3, "n >> 1 = 2 rounds, then the last kernel");
  assertEquals(scratch.length, 1);
  assert(launches[0].args[0] === scratch[0] && launches[1].args[0] === scratch[0]);
  assert(launches[2].args[0] === c);
  assert(scratch[0].disposed, "the workspace is freed when the call ends");
});

Deno.test("TVM plan steps: what a plan may not do is refused at load or at the call", () => {
  // A scratch tensor must be numbered after the parameters, in order.
  const e = assertThrows(
    () =>
      parseTVMPackageManifest(
        manifestWith(undefined, [{ alloc: 7, dtype: "float32", shape: [4] }]),
        "package.json",
      ),
    TVMPackageError,
  );
  assertEquals(e.field, 'host_functions["add"].body[0].alloc');
  // A loop's variable is bound only inside it.
  assertThrows(
    () =>
      parseTVMPackageManifest(
        manifestWith(undefined, [{ for: "i", extent: 2, body: [] }, {
          let: "j",
          value: { var: "i" },
        }]),
        "package.json",
      ),
    TVMPackageError,
    'variable "i" is used before it is bound',
  );
  // A hostile loop ends with an error naming the host function, not a hang.
  const parsed = parseTVMPackageManifest(
    manifestWith(undefined, [{ for: "i", extent: 10 ** 9, body: [] }]),
    "package.json",
  );
  const f = hostFunction("add", parsed.host_functions.get("add")!, recorder().launch);
  using a = tensor([1]), b = tensor([1]), c = tensor([0]);
  assertThrows(() => f(a, b, c), Error, "add: its loops run more than 1000000 iterations");
});

Deno.test("TVM plan steps: a symbolic element offset binds from the view and reaches the kernel", () => {
  const vector = { kind: "tensor", dtype: "float32", shape: [{ var: "n" }] };
  const fn: HostFunction = parseTVMPackageManifest(
    manifestWith(
      [{ name: "A", ...vector, elem_offset: { var: "A_elem_offset" } }, { name: "B", ...vector }, {
        name: "C",
        ...vector,
      }],
      [{
        ...launchAdd({ data: 2 }),
        args: [{ data: 2 }, { data: 0 }, { data: 1 }, { var: "A_elem_offset" }],
      }],
    ),
    "package.json",
  ).host_functions.get("add")!;
  const { launch, launches } = recorder();
  const f = hostFunction("add", fn, launch);
  using whole = tensor([0, 0, 1, 2, 3]);
  const view = new NDArray(whole.storage, 8, [3], "float32"); // whole[2:]
  try {
    using b = tensor([1, 1, 1]), c = tensor(new Float32Array(3));
    f(view, b, c);
    assertEquals(launches[0].args[3], 2, "the offset in elements, as TVM passes it");
    assertEquals(launches[0].offsets, [false, true, false], "A may start inside its buffer");
    // An offset that is not a whole element is refused.
    const odd = new NDArray(whole.storage, 6, [3], "float32");
    try {
      assertThrows(() => f(odd, b, c), Error, "starts at byte 6, inside an element");
    } finally {
      odd.release();
    }
  } finally {
    view.release();
  }
});

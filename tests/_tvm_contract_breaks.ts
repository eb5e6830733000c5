/**
 * The committed `attention4d` package (issue 28's 4-D attention matmul)
 * broken in the ways a kernel can disagree with relaxvm's launcher while
 * WebGPU still compiles it: each break ran to a wrong answer before
 * tvm/kernel_contract.ts refused it at load. Used by
 * `tvm_kernel_contract_test.ts`.
 *
 * @module
 */

import { PACKAGES_DIR } from "./_tvm_packages.ts";

/** A package manifest as JSON, to break. */
export type Manifest = {
  kernels: Record<string, { wgsl: string; arg_types: string[]; launch_param_tags: string[] }>;
  host_functions: Record<string, { params: { dtype: string }[]; body: Record<string, unknown>[] }>;
  [field: string]: unknown;
};

/** The committed attention4d manifest. */
export async function attentionManifest(): Promise<Manifest> {
  const url = new URL("attention4d/package.json", PACKAGES_DIR);
  return JSON.parse(await Deno.readTextFile(url)) as Manifest;
}

const KERNEL = "matmul1_kernel";

/** One way to break the package: what it changes, the field and words of the refusal. */
export interface Break {
  readonly name: string;
  readonly apply: (m: Manifest) => void;
  readonly field: string;
  readonly reason: string;
}

function launch(m: Manifest): { grid: unknown[]; grid_tags: string[] } {
  return m.host_functions.matmul1.body.find((s) => "launch" in s) as unknown as {
    grid: unknown[];
    grid_tags: string[];
  };
}

function replaceWGSL(m: Manifest, from: string, to: string): void {
  const k = m.kernels[KERNEL];
  if (!k.wgsl.includes(from)) throw new Error(`${KERNEL}'s WGSL has no ${from}`);
  k.wgsl = k.wgsl.replace(from, to);
}

/** The breaks, each refused at load naming the kernel and the construct. */
export const BREAKS: readonly Break[] = [
  {
    name: "blockIdx.y read but not among the launch tags (it would run with extent 1)",
    apply: (m) => {
      m.kernels[KERNEL].launch_param_tags.shift();
      const l = launch(m);
      l.grid.shift();
      l.grid_tags.shift();
    },
    field: `kernels["${KERNEL}"].wgsl`,
    reason: "reads blockIdx.y, which its launch_param_tags",
  },
  {
    name: "a threadIdx extent other than the kernel's @workgroup_size",
    apply: (m) => {
      launch(m).grid[2] = 4;
    },
    field: 'host_functions["matmul1"].body[2].grid[2]',
    reason: `kernel ${KERNEL} was compiled for 8 threads along threadIdx.y`,
  },
  {
    name: "the uniform struct with packGridDimX before the scalars",
    apply: (m) =>
      replaceWGSL(
        m,
        "  b: i32,\n  cse_v9: i32,\n  s: i32,\n  packGridDimX: u32",
        "  packGridDimX: u32,\n  b: i32,\n  cse_v9: i32,\n  s: i32",
      ),
    field: `kernels["${KERNEL}"].wgsl`,
    reason: "the launcher writes the scalar arguments (int32, int32, int32) in argument order",
  },
  {
    name: "a float32 scalar the kernel reads as i32",
    apply: (m) => {
      m.kernels[KERNEL].arg_types[5] = "float32";
    },
    field: `kernels["${KERNEL}"].wgsl`,
    reason: "holds {b: i32, cse_v9: i32, s: i32, packGridDimX: u32}",
  },
  {
    name: "the x workgroup index read unfolded",
    apply: (m) =>
      replaceWGSL(
        m,
        "let v__1 : i32 = i32(blockIdx.z * gridDim.x + blockIdx.x);",
        "let v__1 : i32 = i32(blockIdx.x);",
      ),
    field: `kernels["${KERNEL}"].wgsl`,
    reason: "reads blockIdx.x or blockIdx.z other than as blockIdx.z * gridDim.x + blockIdx.x",
  },
  {
    name: "a builtin the launcher does not fill as tvmjs does",
    apply: (m) =>
      replaceWGSL(
        m,
        "@builtin(workgroup_id) blockIdx : vec3<u32>,",
        "@builtin(workgroup_id) blockIdx : vec3<u32>,\n  @builtin(global_invocation_id) gid : vec3<u32>,",
      ),
    field: `kernels["${KERNEL}"].wgsl`,
    reason: 'entry parameter "@builtin(global_invocation_id) gid : vec3<u32>"',
  },
  {
    name: "an int32 tensor bound where the kernel reads f32",
    apply: (m) => {
      m.host_functions.matmul1.params[0].dtype = "int32";
    },
    field: 'host_functions["matmul1"].body[2].args[1]',
    reason: "reads buffer 1 as array<f32>, the plan binds permute_dims1, a int32 tensor",
  },
  {
    // What TVM's build of log_softmax over rows of one element did before the exporter's
    // tir_fixups.py: the output handed to a kernel again as a read-only input.
    name: "one tensor bound twice to a launch, one binding written",
    apply: (m) => {
      const l = m.host_functions.matmul1.body[2] as { args: unknown[] };
      l.args[1] = { data: 2 };
      m.host_functions.matmul1.params[0].dtype = "float32";
    },
    field: 'host_functions["matmul1"].body[2].args[1]',
    reason: "kernel matmul1_kernel is handed matmul as buffer 0 and buffer 1, and writes one",
  },
  {
    name: "the scalars' uniform at another binding",
    apply: (m) => replaceWGSL(m, "@binding(3) var<uniform>", "@binding(4) var<uniform>"),
    field: `kernels["${KERNEL}"].wgsl`,
    reason: "is not where the launcher binds",
  },
];

/**
 * What relaxvm's launcher (tvm/webgpu_kernels.ts, tvmjs's contract) assumes
 * about a TVM WGSL kernel, checked against the kernel's source and every
 * launch of it when a package loads. WebGPU itself only checks that the
 * bindings have the right kinds; a kernel that reads its scalars in
 * another order, indexes with a grid dimension its tags do not launch,
 * needs another workgroup size than the plan launches, or binds a tensor
 * as another element type compiles and runs — to a wrong answer. Each of
 * those is refused here with a `TVMPackageError` naming the kernel and the
 * construct.
 *
 * The source is read as TVM's WebGPU codegen writes it
 * (`src/target/source/codegen_webgpu.cc`): storage buffers at bindings
 * `0..n-1` in argument order, one uniform struct after them holding the
 * scalar arguments in argument order and then `packGridDimX: u32`, an
 * entry point with a literal `@workgroup_size` whose parameters are the
 * `workgroup_id`, `num_workgroups` and `local_invocation_id` builtins, and
 * the x workgroup index read only as `blockIdx.z * gridDim.x + blockIdx.x`
 * (so that the launcher may fold a large x grid into z).
 *
 * @module
 */

import type { HostFunction, KernelInfo, PlanExpr, PlanStmt } from "./package_manifest.ts";

/** A kernel's launch tags, decoded. */
export interface LaunchTags {
  /** The grid dimension each launch extent sets: 0-2 blockIdx.x-z, 3-5 threadIdx.x-z. */
  readonly dims: readonly number[];
  /** Per buffer argument, whether the kernel writes it. */
  readonly writes: readonly boolean[];
}

/** Decodes `launch_param_tags` as tvmjs's launcher does (web/src/webgpu.ts). */
export function launchTags(kernel: KernelInfo): LaunchTags {
  const dims: number[] = [];
  let writes: boolean[] = [];
  for (const tag of kernel.launch_param_tags) {
    const m = /^(blockIdx|threadIdx)\.([xyz])$/.exec(tag);
    if (m !== null) {
      dims.push("xyz".indexOf(m[2]) + (m[1] === "threadIdx" ? 3 : 0));
    } else writes = (JSON.parse(tag.slice("paramWriteAccess:".length)) as number[]).map(Boolean);
  }
  return { dims, writes };
}

/** What the checks learn of a kernel's source. */
export interface KernelSource {
  /** `@workgroup_size`, x, y and z. */
  readonly workgroupSize: readonly [number, number, number];
  /** Each storage buffer's WGSL element type (`f32`, `i32`, ...), by binding. */
  readonly elements: readonly string[];
}

/** Throws the loader's error for `field`. */
export type Fail = (field: string, reason: string) => never;

/** The WGSL scalar type of each scalar argument type. */
const POD_WGSL: Readonly<Record<string, string>> = { int32: "i32", uint32: "u32", float32: "f32" };

/** The WGSL element type a tensor of each dtype is bound as. */
const ELEMENT_WGSL: Readonly<Record<string, string>> = {
  float32: "f32",
  int32: "i32",
  uint32: "u32",
};

/** The builtins the launcher fills, by the names TVM's codegen gives them. */
const BUILTINS: Readonly<Record<string, string>> = {
  workgroup_id: "blockIdx",
  num_workgroups: "gridDim",
  local_invocation_id: "threadIdx",
};

/** The largest finite float32. */
const FLOAT32_MAX = 3.4028234663852886e38;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Checks kernel `name`'s WGSL against its metadata and the launcher's
 * contract; `field` names the kernel in errors. Returns what the launch
 * checks need.
 */
export function checkKernelSource(
  name: string,
  info: KernelInfo,
  field: string,
  fail: Fail,
): KernelSource {
  const at = `${field}.wgsl`;
  const refuse: (what: string) => never = (what) => fail(at, `kernel ${name}: ${what}`);
  const src = info.wgsl.replace(/\/\/[^\n]*/g, "");

  // The entry point and its workgroup size.
  const entries = [
    ...src.matchAll(
      new RegExp(
        `@compute\\s*@workgroup_size\\(([^)]*)\\)\\s*fn\\s+${
          escape(name)
        }\\s*\\(((?:[^(){}]|\\([^()]*\\))*)\\)`,
        "g",
      ),
    ),
  ];
  if (entries.length !== 1) {
    refuse(
      `no single entry point "fn ${name}" with @compute @workgroup_size: the launcher needs the workgroup size the kernel was compiled for`,
    );
  }
  const size = entries[0][1].split(",").map((s) => s.trim().replace(/[ui]$/, ""));
  if (size.length > 3 || !size.every((s) => /^[1-9][0-9]*$/.test(s))) {
    refuse(
      `@workgroup_size(${
        entries[0][1]
      }) is not literal integers: the launcher checks each launch's threadIdx extents against it`,
    );
  }
  const workgroupSize = [1, 2, 3].map((_, i) => Number(size[i] ?? 1)) as [number, number, number];

  // Decimal f32 literals within float32's range: WGSL takes a literal's exact value, and
  // Chromium's compiler rejects one past the largest finite float32 (3.4028235e+38, its shortest
  // decimal, is past it) where Deno's accepts it, so a package would load in one and not the other.
  for (const m of src.matchAll(/(?<![\w.])((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)f\b/g)) {
    if (Number(m[1]) > FLOAT32_MAX) {
      refuse(
        `the f32 literal ${
          m[0]
        } is past float32's largest value (3.4028234663852886e+38), which WGSL does not round down to; write it as 0x1.fffffep+127f`,
      );
    }
  }

  // The entry's parameters: only the builtins the launcher fills, under TVM's names.
  for (const p of entries[0][2].split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const m = /^@builtin\((\w+)\)\s*(\w+)\s*:\s*vec3<u32>$/.exec(p);
    if (m === null || BUILTINS[m[1]] !== m[2]) {
      refuse(
        `entry parameter ${
          JSON.stringify(p)
        } is not one of the builtins tvmjs's launch contract fills (${
          Object.entries(BUILTINS).map(([b, v]) => `@builtin(${b}) ${v}`).join(", ")
        })`,
      );
    }
  }

  // Storage buffers at 0..n-1, then one uniform with the scalars in argument order.
  const handles = info.arg_types.filter((t) => t === "handle").length;
  const pods = info.arg_types.filter((t) => t !== "handle");
  const bindings = [
    ...src.matchAll(
      /@group\((\d+)\)\s*@binding\((\d+)\)\s*var<(\w+)(?:\s*,\s*(\w+))?>\s*(\w+)\s*:\s*([^;]+);/g,
    ),
  ];
  const elements: string[] = [];
  let uniform: { name: string; type: string } | undefined;
  for (const [all, group, binding, space, , varName, type] of bindings) {
    const b = Number(binding);
    if (group !== "0") refuse(`${all.trim()}: the launcher binds group 0 only`);
    if (space === "storage" && b < handles && elements[b] === undefined) {
      const m = /^array<\s*(\w+)\s*>$/.exec(type.trim());
      if (m === null) refuse(`buffer binding ${b} is ${type.trim()}, not an array of scalars`);
      elements[b] = m[1];
    } else if (space === "uniform" && b === handles && uniform === undefined) {
      uniform = { name: varName, type: type.trim() };
    } else {
      refuse(
        `binding ${all.trim()} is not where the launcher binds: the ${handles} buffer arguments at 0..${
          handles - 1
        } in argument order, the scalars' uniform at ${handles}`,
      );
    }
  }
  for (let b = 0; b < handles; b++) {
    if (elements[b] === undefined) refuse(`no storage buffer at binding ${b}`);
  }
  if (uniform === undefined) refuse(`no uniform at binding ${handles} for the scalar arguments`);
  const struct = new RegExp(`struct\\s+${escape(uniform.type)}\\s*\\{([^}]*)\\}`).exec(src);
  if (struct === null) refuse(`no struct ${uniform.type} for its uniform`);
  const fields = struct[1].split(",").map((s) => s.trim()).filter((s) => s !== "").map((f) => {
    const m = /^(\w+)\s*:\s*(\w+)$/.exec(f);
    return m === null ? refuse(`uniform field ${JSON.stringify(f)} is not "name: scalar"`) : m;
  });
  const want = [...pods.map((t) => POD_WGSL[t]), "u32"];
  const got = fields.map((f) => f[2]);
  if (got.join() !== want.join() || fields[fields.length - 1][1] !== "packGridDimX") {
    refuse(
      `its uniform ${uniform.type} holds {${
        fields.map((f) => `${f[1]}: ${f[2]}`).join(", ")
      }}, the launcher writes the scalar arguments (${
        pods.join(", ") || "none"
      }) in argument order, then packGridDimX: u32`,
    );
  }

  // The x workgroup index only in its folded form; every grid dimension it reads is launched.
  const folded = /blockIdx\.z\s*\*\s*gridDim\.x\s*\+\s*blockIdx\.x/g;
  const { dims } = launchTags(info);
  if (dims.includes(0) && !new RegExp(`>\\s*${escape(uniform.name)}\\.packGridDimX\\)`).test(src)) {
    refuse(
      `it never compares its x workgroup index with ${uniform.name}.packGridDimX: a grid the launcher folds into z would run extra workgroups`,
    );
  }
  const rest = src.replace(folded, "");
  if (/\bblockIdx\s*\.\s*[xz]\b|\bblockIdx\s*\[/.test(rest)) {
    refuse(
      "it reads blockIdx.x or blockIdx.z other than as blockIdx.z * gridDim.x + blockIdx.x: the launcher folds x grids beyond 65535 into z (tvmjs)",
    );
  }
  for (const [i, axis] of ["x", "y", "z"].entries()) {
    const reads = new RegExp(`\\b(blockIdx|threadIdx)\\s*\\.\\s*${axis}\\b`, "g");
    for (const [, kind] of src.matchAll(reads)) {
      const dim = i + (kind === "threadIdx" ? 3 : 0);
      if (dim === 2 || dims.includes(dim)) continue;
      if (kind === "threadIdx" && workgroupSize[i] === 1) continue;
      refuse(
        `it reads ${kind}.${axis}, which its launch_param_tags (${
          info.launch_param_tags.join(", ")
        }) do not launch: that dimension would run with extent 1`,
      );
    }
  }
  return { workgroupSize, elements };
}

/**
 * Checks every launch of host function `fn` (`field` names it) against
 * the sources of the kernels it launches: each threadIdx extent is the
 * literal workgroup size the kernel was compiled with, no tensor is bound
 * twice to one launch where the kernel writes either binding, and each
 * tensor is bound as its dtype's WGSL element type.
 */
export function checkLaunches(
  fn: HostFunction,
  field: string,
  sources: ReadonlyMap<string, KernelSource>,
  kernels: ReadonlyMap<string, KernelInfo>,
  fail: Fail,
): void {
  // Buffers are parameters, then the scratch tensors the plan allocates.
  const buffers: { name: string; dtype: string }[] = [...fn.params];
  const visit = (body: readonly PlanStmt[], at: string) =>
    body.forEach((s, i) => {
      const here = `${at}[${i}]`;
      if ("if" in s) {
        visit(s.then, `${here}.then`);
        visit(s.else, `${here}.else`);
        return;
      }
      if ("for" in s) return visit(s.body, `${here}.body`);
      if ("alloc" in s) buffers[s.alloc] = { name: `scratch ${s.alloc}`, dtype: s.dtype };
      if (!("launch" in s)) return;
      const source = sources.get(s.launch)!;
      const info = kernels.get(s.launch)!;
      const { dims } = launchTags(info);
      s.grid.forEach((g, k) => {
        if (dims[k] < 3) return;
        const axis = dims[k] - 3;
        const size = source.workgroupSize[axis];
        if (g !== size) {
          fail(
            `${here}.grid[${k}]`,
            `kernel ${s.launch} was compiled for ${size} threads along threadIdx.${
              "xyz"[axis]
            } (its @workgroup_size), the plan launches ${
              show(g)
            }: the launcher cannot change a kernel's workgroup size`,
          );
        }
      });
      // One tensor bound twice, one binding written: WebGPU refuses the bind group at the
      // call (a writable storage binding may not alias another), and TVM means two buffers.
      const { writes } = launchTags(info);
      const bound = new Map<number, number>();
      let handle = 0;
      s.args.forEach((a, k) => {
        if (info.arg_types[k] !== "handle") return;
        const data = (a as { data: number }).data;
        const first = bound.get(data);
        if (first !== undefined && (writes[first] || writes[handle])) {
          fail(
            `${here}.args[${k}]`,
            `kernel ${s.launch} is handed ${
              buffers[data].name
            } as buffer ${first} and buffer ${handle}, and writes one of them: one tensor bound twice, one binding writable (TVM's build aliased two buffers)`,
          );
        }
        if (first === undefined) bound.set(data, handle);
        handle++;
      });
      let b = 0;
      s.args.forEach((a, k) => {
        if (info.arg_types[k] !== "handle") return;
        const p = buffers[(a as { data: number }).data];
        const element = source.elements[b++];
        if (ELEMENT_WGSL[p.dtype] !== element) {
          fail(
            `${here}.args[${k}]`,
            `kernel ${s.launch} reads buffer ${
              b - 1
            } as array<${element}>, the plan binds ${p.name}, a ${p.dtype} tensor${
              ELEMENT_WGSL[p.dtype] === undefined ? " (no WGSL element type)" : ""
            }`,
          );
        }
      });
    });
  visit(fn.body, `${field}.body`);
}

function show(e: PlanExpr): string {
  return JSON.stringify(e);
}

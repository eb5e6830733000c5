/**
 * Runs a TVM host function from its launch plan (tvm/package_format.ts):
 * what TVM's LLVM-compiled host code does before a WebGPU kernel runs.
 *
 * 1. Check the arguments as MakePackedAPI's argument binder does: count,
 *    tensor or scalar, dtype, rank, and each dimension — a bare symbolic
 *    variable binds on first sight (`n` from `x.shape[0]`), every other
 *    dimension must equal what it evaluates to.
 * 2. Run the statements: let-bindings, integer stores into the shape heap
 *    (shape functions), asserts, branches, kernel launches with grid
 *    extents computed from the bound variables.
 *
 * A failed check throws an `Error` naming the host function, the argument
 * and what was expected; the VM turns it into a `VMError` naming the VM
 * function and instruction too. Integer arithmetic is exact (JS numbers,
 * checked to stay safe integers) with TIR's semantics: floordiv/floormod
 * round toward minus infinity, truncdiv/truncmod toward zero, int32 casts
 * that would wrap are refused rather than silently wrapped.
 *
 * @module
 */

import { NDArray } from "../devices/ndarray.ts";
import type { HostFunction, PlanExpr, PlanStmt } from "./package_format.ts";
import { LIMITS } from "./package_manifest.ts";
import { elementBytes } from "../ground/dtype.ts";

/** What a host function hands the device for one kernel launch. */
export interface KernelLaunch {
  /** The kernel's name. */
  readonly kernel: string;
  /** One value per kernel argument: a tensor for a buffer, a number for a scalar. */
  readonly args: readonly (NDArray | number)[];
  /** The launch extents, in the kernel's tag order. */
  readonly grid: readonly number[];
  /**
   * Per argument, whether the tensor may start inside its buffer: its
   * parameter declares an `elem_offset`, which the kernel takes as a scalar.
   */
  readonly offsets?: readonly boolean[];
}

/**
 * Records kernel launches (tvm/webgpu_kernels.ts for a WebGPU device);
 * `alloc` makes the scratch tensors plans allocate, on the kernels' device.
 */
export type KernelLauncher = ((launch: KernelLaunch) => void) & {
  alloc?: (shape: readonly number[], dtype: string) => NDArray;
};

type Env = Map<string, number>;

class HostCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HostCallError";
  }
}

/**
 * The packed function that runs host function `name` of a package: checks
 * its arguments against `fn.params`, then runs `fn.body`, calling `launch`
 * for each kernel.
 */
export function hostFunction(
  name: string,
  fn: HostFunction,
  launch: KernelLauncher,
): (...args: unknown[]) => number | void {
  const fail = (message: string): never => {
    throw new HostCallError(`${name}: ${message}`);
  };
  const run = new PlanRunner(fn, launch, fail);
  return (...args: unknown[]) => run.call(args);
}

/** How a plan's `return` ends the statements that run it. */
class Returned {
  constructor(readonly value: number) {}
}

class PlanRunner {
  #iterations = 0;

  constructor(
    readonly fn: HostFunction,
    readonly launch: KernelLauncher,
    readonly fail: (message: string) => never,
  ) {}

  call(args: unknown[]): number | void {
    const { params } = this.fn;
    this.#iterations = 0;
    if (args.length !== params.length) {
      this.fail(`expected ${params.length} arguments, got ${args.length}`);
    }
    const env: Env = new Map();
    const tensors: (NDArray | null)[] = [];
    // First the kinds, dtypes and ranks, binding each symbolic variable at its first bare
    // occurrence (TVM's argument binder does the same); then every other dimension is checked,
    // so `batch * seq` may come before the parameter that binds `batch`.
    const binders = new Set<string>();
    params.forEach((p, i) => {
      const a = args[i];
      const what = `argument ${i} (${p.name})`;
      if (p.kind === "scalar") {
        const v = typeof a === "bigint" ? Number(a) : a;
        if (typeof v !== "number" || (p.dtype !== "float32" && !Number.isSafeInteger(v))) {
          this.fail(`${what} must be a ${p.dtype} scalar, got ${describe(a)}`);
        }
        env.set(p.name, v);
        tensors.push(null);
        return;
      }
      if (!(a instanceof NDArray)) this.fail(`${what} must be a tensor, got ${describe(a)}`);
      if (a.dtype !== p.dtype) this.fail(`${what} must be ${p.dtype}, got ${a.dtype}`);
      const shape = p.shape!;
      if (a.shape.length !== shape.length) {
        this.fail(
          `${what} must have ${shape.length} dimensions, got shape [${a.shape.join(", ")}]`,
        );
      }
      shape.forEach((d, k) => {
        if (typeof d === "object" && "var" in d && !env.has(d.var)) {
          env.set(d.var, a.shape[k]);
          binders.add(`${i}:${k}`);
        }
      });
      const offset = p.elem_offset;
      if (offset === undefined) {
        // Launches refuse such a tensor, naming the kernel (webgpu_kernels.ts).
      } else if (a.byteOffset % elementBytes(a.dtype) !== 0) {
        this.fail(`${what} starts at byte ${a.byteOffset}, inside an element`);
      } else if (typeof offset === "object" && "var" in offset && !env.has(offset.var)) {
        env.set(offset.var, a.byteOffset / elementBytes(a.dtype));
        binders.add(`${i}:offset`);
      }
      tensors.push(a);
    });
    params.forEach((p, i) => {
      const a = tensors[i];
      if (a === null) return;
      p.shape!.forEach((d, k) => {
        if (binders.has(`${i}:${k}`)) return;
        const want = this.eval(d, env, tensors);
        if (want !== a.shape[k]) {
          this.fail(
            `argument ${i} (${p.name}) dimension ${k} must be ${want}${
              typeof d === "object" && "var" in d ? ` (${d.var})` : ""
            }, got shape [${a.shape.join(", ")}]`,
          );
        }
      });
      if (p.elem_offset !== undefined && !binders.has(`${i}:offset`)) {
        const want = this.eval(p.elem_offset, env, tensors);
        if (want * elementBytes(a.dtype) !== a.byteOffset) {
          this.fail(
            `argument ${i} (${p.name}) must start at element ${want} of its buffer, it starts at byte ${a.byteOffset}`,
          );
        }
      }
    });
    const scratch = tensors.length;
    try {
      this.stmts(this.fn.body, env, tensors);
    } catch (e) {
      if (e instanceof Returned) return e.value;
      throw e;
    } finally {
      // Scratch memory lives for the call: the kernels recorded after it run in order.
      for (const t of tensors.splice(scratch)) t?.dispose();
    }
  }

  stmts(body: readonly PlanStmt[], env: Env, tensors: (NDArray | null)[]): void {
    for (const s of body) {
      if ("let" in s) env.set(s.let, this.eval(s.value, env, tensors));
      else if ("store" in s) {
        const heap = tensors[s.store]!;
        const view = heapView(heap, this.fail);
        const i = this.index(heap, this.eval(s.index, env, tensors));
        const v = this.eval(s.value, env, tensors);
        if (!Number.isSafeInteger(v)) this.fail(`stores ${v} into ${heap.dtype} shape data`);
        if (view instanceof BigInt64Array) view[i] = BigInt(v);
        else (view as Int32Array)[i] = v;
      } else if ("assert" in s) {
        if (!this.eval(s.assert, env, tensors)) this.fail(`assertion failed: ${s.message}`);
      } else if ("if" in s) {
        this.stmts(this.eval(s.if, env, tensors) ? s.then : s.else, env, tensors);
      } else if ("return" in s) {
        throw new Returned(this.eval(s.return, env, tensors));
      } else if ("for" in s) {
        const extent = this.eval(s.extent, env, tensors);
        for (let i = 0; i < extent; i++) {
          if (++this.#iterations > LIMITS.loopIterations) {
            this.fail(`its loops run more than ${LIMITS.loopIterations} iterations`);
          }
          env.set(s.for, i);
          this.stmts(s.body, env, tensors);
        }
      } else if ("alloc" in s) {
        const shape = s.shape.map((d) => this.eval(d, env, tensors));
        if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
          this.fail(`scratch tensor ${s.alloc} has shape [${shape.join(", ")}]`);
        }
        if (this.launch.alloc === undefined) this.fail("no device to allocate scratch memory on");
        tensors[s.alloc]?.dispose(); // allocated again in a loop
        try {
          tensors[s.alloc] = this.launch.alloc!(shape, s.dtype);
        } catch (e) {
          this.fail(`scratch tensor ${s.alloc} [${shape.join(", ")}]: ${(e as Error).message}`);
        }
      } else {
        const offsets: boolean[] = [];
        const args = s.args.map((a, i) => {
          if (typeof a !== "object" || !("data" in a)) return this.eval(a, env, tensors);
          const t = tensors[a.data];
          if (t === undefined || t === null) {
            return this.fail(`scratch tensor ${a.data} is not allocated`);
          }
          offsets[i] = this.fn.params[a.data]?.elem_offset !== undefined;
          return t;
        });
        const grid = s.grid.map((g) => this.eval(g, env, tensors));
        this.launch({ kernel: s.launch, args, grid, offsets });
      }
    }
  }

  index(heap: NDArray, i: number): number {
    if (!Number.isSafeInteger(i) || i < 0 || i >= heap.size) {
      this.fail(`index ${i} is outside the ${heap.size} elements of its shape data`);
    }
    return i;
  }

  eval(e: PlanExpr, env: Env, tensors: (NDArray | null)[]): number {
    if (typeof e === "number") return e;
    if ("float" in e) return e.float;
    if ("var" in e) return env.get(e.var)!;
    if ("data" in e) return this.fail("a buffer is used as a number");
    if ("load" in e) {
      const heap = tensors[e.load]!;
      const view = heapView(heap, this.fail);
      const v = view[this.index(heap, this.eval(e.index, env, tensors))];
      return typeof v === "bigint" ? this.safe(Number(v), `loaded ${v}`) : v as number;
    }
    const a = e.args.map((x) => this.eval(x, env, tensors));
    const [x, y] = a;
    switch (e.op) {
      case "add":
        return this.safe(x + y, `${x} + ${y}`);
      case "sub":
        return this.safe(x - y, `${x} - ${y}`);
      case "mul":
        return this.safe(x * y, `${x} * ${y}`);
      case "floordiv":
        return Number.isInteger(x) && Number.isInteger(y)
          ? Math.floor(this.nonZero(x, y) / y)
          : Math.floor(x / y);
      case "floormod":
        this.nonZero(x, y);
        return x - Math.floor(x / y) * y;
      case "truncdiv":
        return Number.isInteger(x) && Number.isInteger(y)
          ? Math.trunc(this.nonZero(x, y) / y)
          : x / y;
      case "truncmod":
        return this.nonZero(x, y) % y;
      case "min":
        return Math.min(x, y);
      case "max":
        return Math.max(x, y);
      case "eq":
        return +(x === y);
      case "ne":
        return +(x !== y);
      case "lt":
        return +(x < y);
      case "le":
        return +(x <= y);
      case "gt":
        return +(x > y);
      case "ge":
        return +(x >= y);
      case "and":
        return +(x !== 0 && y !== 0);
      case "or":
        return +(x !== 0 || y !== 0);
      case "not":
        return +(x === 0);
      case "select":
        return x !== 0 ? y : a[2];
      case "shl":
        return this.safe(x * 2 ** y, `${x} << ${y}`);
      case "shr":
        return Math.floor(x / 2 ** y);
      case "cast":
        return this.cast(x, e.dtype!);
      default:
        return this.fail(`unknown operator ${e.op}`);
    }
  }

  cast(x: number, dtype: string): number {
    switch (dtype) {
      case "float32":
        return Math.fround(x);
      case "bool":
        return +(x !== 0);
      case "int32":
        if (!(Math.trunc(x) >= -(2 ** 31) && Math.trunc(x) < 2 ** 31)) {
          return this.fail(`${x} does not fit int32 (TVM's WebGPU kernels take 32-bit sizes)`);
        }
        return Math.trunc(x);
      case "uint32":
        if (!(Math.trunc(x) >= 0 && Math.trunc(x) < 2 ** 32)) {
          return this.fail(`${x} does not fit uint32`);
        }
        return Math.trunc(x);
      default: // int64
        return this.safe(Math.trunc(x), `int64(${x})`);
    }
  }

  nonZero(x: number, y: number): number {
    if (y === 0) this.fail(`division by zero (${x} / 0)`);
    return x;
  }

  safe(v: number, what: string): number {
    if (Number.isFinite(v) && Math.abs(v) > Number.MAX_SAFE_INTEGER && Number.isInteger(v)) {
      this.fail(`${what} is beyond 2^53, where shape arithmetic would lose precision`);
    }
    return v;
  }
}

function describe(v: unknown): string {
  if (v instanceof NDArray) return `a ${v.dtype} tensor of shape [${v.shape.join(", ")}]`;
  if (v === null) return "null";
  return typeof v === "object" ? (v.constructor?.name ?? "an object") : `${typeof v} ${String(v)}`;
}

/** A shape-data tensor's elements; it must live in host memory, as host code reads it synchronously. */
function heapView(t: NDArray, fail: (message: string) => never): ArrayLike<number | bigint> {
  if (t.device.kind !== "cpu") fail(`shape data must be on the CPU, got a tensor on ${t.device}`);
  return t.cpuView() as ArrayLike<number | bigint>;
}

/**
 * The static check of a TVM host function's launch plan (the statements and
 * expressions tvm/package_format.ts describes): operators and operand
 * counts, variables bound before use, parameter references, and every
 * launch against its kernel's metadata. Used by `parseTVMPackageManifest`.
 *
 * @module
 */

import {
  CAST_DTYPES,
  type HostFunction,
  type HostParam,
  isObject,
  type Json,
  type KernelInfo,
  LIMITS,
  PLAN_OPS,
  type PlanExpr,
  type PlanStmt,
  type Reader,
  SCALAR_DTYPES,
  show,
  TENSOR_DTYPES,
} from "./package_manifest.ts";

/** Checks one host function's plan, statically: operators, arity, scopes, references. */
export class PlanChecker {
  #nodes = 0;
  #params: HostParam[] = [];
  /** Scratch tensors (`alloc`), indexed after the parameters. */
  #scratch: string[] = [];

  constructor(
    readonly r: Reader,
    readonly field: string,
    readonly kernels: ReadonlyMap<string, KernelInfo>,
  ) {}

  hostFunction(v: unknown): HostFunction {
    const r: Reader = this.r;
    const f = r.object(v, this.field);
    const scope = new Set<string>();
    const params = r.array(f.params, `${this.field}.params`);
    // As TVM's argument binder: scalar parameters and bare symbolic dimensions bind first, so
    // `batch * seq` may come before the parameter that binds `batch`.
    for (const p of params) {
      if (isObject(p) && p.kind === "scalar" && typeof p.name === "string") scope.add(p.name);
      if (!isObject(p) || !Array.isArray(p.shape)) continue;
      for (const d of [...p.shape, p.elem_offset]) {
        if (isObject(d) && typeof d.var === "string" && Object.keys(d).length === 1) {
          scope.add(d.var);
        }
      }
    }
    params.forEach((p, i) => {
      const at = `${this.field}.params[${i}]`;
      const o = r.object(p, at);
      const name = r.name(o.name, `${at}.name`);
      const dtype = r.string(o.dtype, `${at}.dtype`);
      if (o.kind === "tensor") {
        if (!TENSOR_DTYPES.has(dtype)) {
          r.fail(`${at}.dtype`, `tensor dtype ${show(dtype)} is not supported`);
        }
        const shape = r.array(o.shape, `${at}.shape`).map((d, j) => {
          const dimAt = `${at}.shape[${j}]`;
          // A bare variable binds on first sight; anything else must be computable now.
          if (isObject(d) && typeof d.var === "string" && Object.keys(d).length === 1) {
            scope.add(r.name(d.var, dimAt));
            return { var: d.var };
          }
          return this.expr(d, dimAt, scope, 0);
        });
        const offset = o.elem_offset;
        if (offset === undefined) this.#params.push({ name, kind: "tensor", dtype, shape });
        else {
          const offsetAt = `${at}.elem_offset`;
          const elem_offset =
            isObject(offset) && typeof offset.var === "string" && Object.keys(offset).length === 1
              ? { var: r.name(offset.var, offsetAt) }
              : this.expr(offset, offsetAt, scope, 0);
          this.#params.push({ name, kind: "tensor", dtype, shape, elem_offset });
        }
      } else if (o.kind === "scalar") {
        if (!SCALAR_DTYPES.has(dtype)) {
          r.fail(`${at}.dtype`, `scalar dtype ${show(dtype)} is not supported`);
        }
        scope.add(name);
        this.#params.push({ name, kind: "scalar", dtype });
      } else r.fail(`${at}.kind`, `must be "tensor" or "scalar", got ${show(o.kind)}`);
    });
    const body = this.stmts(f.body, `${this.field}.body`, scope, 0);
    return { params: this.#params, body };
  }

  #count(at: string, depth: number): void {
    if (++this.#nodes > LIMITS.nodesPerFunction) {
      this.r.fail(at, `the plan has more than ${LIMITS.nodesPerFunction} nodes`);
    }
    if (depth > LIMITS.depth) this.r.fail(at, `nested deeper than ${LIMITS.depth}`);
  }

  #param(v: unknown, at: string, want: "buffer" | "heap"): number {
    const i = this.r.count(v, at);
    if (
      want === "buffer" && i >= this.#params.length &&
      i < this.#params.length + this.#scratch.length
    ) {
      return i; // a scratch tensor allocated before (`alloc`)
    }
    const p = this.#params[i];
    if (p === undefined || p.kind !== "tensor") {
      this.r.fail(at, `${i} is not a tensor parameter of this function`);
    }
    if (want === "heap" && p.dtype !== "int64" && p.dtype !== "int32") {
      this.r.fail(at, `parameter ${i} (${p.name}) is ${p.dtype}: host code reads only int tensors`);
    }
    return i;
  }

  stmts(v: unknown, at: string, scope: Set<string>, depth: number): PlanStmt[] {
    const r: Reader = this.r;
    return r.array(v, at).map((s, i) => {
      const sAt = `${at}[${i}]`;
      this.#count(sAt, depth);
      const o = r.object(s, sAt);
      if ("let" in o) {
        const value = this.expr(o.value, `${sAt}.value`, scope, depth + 1);
        const name = r.name(o.let, `${sAt}.let`);
        scope.add(name);
        return { let: name, value };
      }
      if ("store" in o) {
        return {
          store: this.#param(o.store, `${sAt}.store`, "heap"),
          index: this.expr(o.index, `${sAt}.index`, scope, depth + 1),
          value: this.expr(o.value, `${sAt}.value`, scope, depth + 1),
        };
      }
      if ("assert" in o) {
        return {
          assert: this.expr(o.assert, `${sAt}.assert`, scope, depth + 1),
          message: r.string(o.message, `${sAt}.message`, LIMITS.messageLength),
        };
      }
      if ("if" in o) {
        const cond = this.expr(o.if, `${sAt}.if`, scope, depth + 1);
        // Names bound in a branch stay in that branch.
        const then = this.stmts(o.then, `${sAt}.then`, new Set(scope), depth + 1);
        const otherwise = this.stmts(o.else, `${sAt}.else`, new Set(scope), depth + 1);
        return { if: cond, then, else: otherwise };
      }
      if ("launch" in o) return this.launch(o, sAt, scope, depth);
      if ("return" in o) return { return: this.expr(o.return, `${sAt}.return`, scope, depth + 1) };
      if ("for" in o) {
        const extent = this.expr(o.extent, `${sAt}.extent`, scope, depth + 1);
        const name = r.name(o.for, `${sAt}.for`);
        const body = this.stmts(o.body, `${sAt}.body`, new Set([...scope, name]), depth + 1);
        return { for: name, extent, body };
      }
      if ("alloc" in o) {
        const index = this.#params.length + this.#scratch.length;
        if (o.alloc !== index) {
          r.fail(
            `${sAt}.alloc`,
            `scratch tensors are numbered after the parameters in order: expected ${index}`,
          );
        }
        const dtype = r.string(o.dtype, `${sAt}.dtype`);
        if (!TENSOR_DTYPES.has(dtype)) {
          r.fail(`${sAt}.dtype`, `tensor dtype ${show(dtype)} is not supported`);
        }
        const shape = r.array(o.shape, `${sAt}.shape`).map((d, j) =>
          this.expr(d, `${sAt}.shape[${j}]`, scope, depth + 1)
        );
        this.#scratch.push(dtype);
        return { alloc: index, dtype, shape };
      }
      return r.fail(sAt, `unknown statement ${show(o)}`);
    });
  }

  launch(o: Json, at: string, scope: Set<string>, depth: number): PlanStmt {
    const r: Reader = this.r;
    const name = r.name(o.launch, `${at}.launch`);
    const kernel = this.kernels.get(name);
    if (kernel === undefined) r.fail(`${at}.launch`, `no kernel named ${show(name)}`);
    const args = r.array(o.args, `${at}.args`);
    if (args.length !== kernel.arg_types.length) {
      r.fail(
        `${at}.args`,
        `kernel ${name} takes ${kernel.arg_types.length} arguments (its arg_types), the plan passes ${args.length}`,
      );
    }
    const checked = args.map((a, i) => {
      const aAt = `${at}.args[${i}]`;
      if (kernel.arg_types[i] === "handle") {
        const d = r.object(a, aAt);
        if (Object.keys(d).length !== 1 || !("data" in d)) {
          r.fail(aAt, `kernel ${name} takes a buffer here: expected { data: param }`);
        }
        return { data: this.#param(d.data, `${aAt}.data`, "buffer") };
      }
      return this.expr(a, aAt, scope, depth + 1);
    });
    const tags = kernel.launch_param_tags.filter((t) => !t.startsWith("paramWriteAccess:"));
    const gridTags = r.array(o.grid_tags, `${at}.grid_tags`).map((t, i) =>
      r.string(t, `${at}.grid_tags[${i}]`)
    );
    if (gridTags.join() !== tags.join()) {
      r.fail(
        `${at}.grid_tags`,
        `kernel ${name} is launched over ${show(tags)}, the plan gives ${show(gridTags)}`,
      );
    }
    const grid = r.array(o.grid, `${at}.grid`);
    if (grid.length !== tags.length) {
      r.fail(
        `${at}.grid`,
        `kernel ${name} needs ${tags.length} launch extents, got ${grid.length}`,
      );
    }
    return {
      launch: name,
      args: checked,
      grid: grid.map((g, i) => this.expr(g, `${at}.grid[${i}]`, scope, depth + 1)),
      grid_tags: gridTags,
    };
  }

  expr(v: unknown, at: string, scope: Set<string>, depth: number): PlanExpr {
    const r: Reader = this.r;
    this.#count(at, depth);
    if (typeof v === "number") {
      if (!Number.isSafeInteger(v)) r.fail(at, `an integer literal must be safe, got ${show(v)}`);
      return v;
    }
    const o = r.object(v, at);
    const keys = Object.keys(o);
    if ("float" in o && keys.length === 1) {
      const x = o.float;
      if (typeof x !== "number") return r.fail(at, `float must be a number, got ${show(x)}`);
      return { float: x };
    }
    if ("var" in o && keys.length === 1) {
      const name = r.name(o.var, `${at}.var`);
      if (!scope.has(name)) r.fail(at, `variable ${show(name)} is used before it is bound`);
      return { var: name };
    }
    if ("load" in o && keys.length === 2) {
      return {
        load: this.#param(o.load, `${at}.load`, "heap"),
        index: this.expr(o.index, `${at}.index`, scope, depth + 1),
      };
    }
    if ("op" in o) {
      const op = r.string(o.op, `${at}.op`);
      const arity = Object.hasOwn(PLAN_OPS, op) ? PLAN_OPS[op] : undefined;
      if (arity === undefined) r.fail(`${at}.op`, `unknown operator ${show(op)}`);
      const args = r.array(o.args, `${at}.args`);
      if (args.length !== arity) {
        r.fail(`${at}.args`, `${op} takes ${arity} operands, got ${args.length}`);
      }
      const out: { op: string; args: PlanExpr[]; dtype?: string } = {
        op,
        args: args.map((a, i) => this.expr(a, `${at}.args[${i}]`, scope, depth + 1)),
      };
      if (op === "cast") {
        const dtype = r.string(o.dtype, `${at}.dtype`);
        if (!CAST_DTYPES.has(dtype)) r.fail(`${at}.dtype`, `cannot cast to ${show(dtype)}`);
        out.dtype = dtype;
      }
      return out;
    }
    if ("data" in o) {
      r.fail(at, "a tensor's buffer ({ data }) may only be passed to a kernel");
    }
    return r.fail(at, `unknown expression ${show(o)}`);
  }
}

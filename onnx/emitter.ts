/**
 * Records the calls a converted graph makes, then writes them as one VM
 * function with `ExecBuilder`. Recording first lets the function begin with
 * `vm.builtin.alloc_shape_heap` of the size the whole graph needed: every
 * symbolic dimension (a graph input's `dim_param`, or a size known only once
 * an operator has run) is a slot of that heap, bound by
 * `vm.builtin.match_shape` and read back by `vm.builtin.make_shape`.
 *
 * @module
 */

import type { CallArg } from "../builder/builder_options.ts";
import type { ExecBuilder } from "../builder/exec_builder.ts";
import type { Operand } from "../builder/operand.ts";
import { MakeShapeCode, MatchShapeCode } from "../builtins/shape_lowering/shape_heap.ts";
import type { TensorDType } from "../ground/dtype.ts";
import { type Dim, Unsupported, type Value } from "./graph_values.ts";

/** A recorded call, or (`name` `""`) control flow: an `If` to `label`, a `Goto`, a label. */
interface Recorded {
  name: string;
  args: CallArg[];
  dst: Operand | null;
  /** For control flow: `"if"` (args[0] the condition), `"goto"` or `"label"`. */
  flow?: "if" | "goto" | "label";
  label?: string;
}

/**
 * The operators whose int64 form WebGPU lacks (WGSL has no 64-bit
 * integers): on int64 tensors they are called through
 * `vm.builtin.call_on_host`, which on the CPU is the plain call and
 * elsewhere computes on the host's copies, so an imported graph's int64
 * arithmetic runs on every device.
 */
const INT64_ON_HOST = new Set(
  [
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "negative",
    "relu",
    "abs",
    "sum",
    "max",
    "mean",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "where",
  ].map((op) => `vm.op.${op}`),
);

/** The calls of one VM function, recorded, and the registers and heap slots they use. */
export class Emitter {
  readonly ib: ExecBuilder;
  readonly #calls: Recorded[] = [];
  readonly #slots = new Map<string, number>();
  #next: number;
  #fresh = 0;
  /** The dtype of each register holding a tensor value (for `INT64_ON_HOST`). */
  readonly #dtypes = new Map<Operand, TensorDType>();
  /** The register of the shape heap (written first thing in the function). */
  readonly heap: Operand;
  /** Registers written by recorded calls (results the function may hand out as they are). */
  readonly #produced = new Set<Operand>();
  /** The register holding the parameter tuple, when the function takes one. */
  params: Operand | null = null;

  /** An emitter for a function whose first `firstFree` registers are its parameters. */
  constructor(ib: ExecBuilder, firstFree: number) {
    this.ib = ib;
    this.#next = firstFree;
    this.heap = this.newReg();
  }

  /**
   * An immediate for a dimension, axis or index: one a file could make huge
   * (a dim of 2^60) is unsupported rather than a builder's `RangeError`.
   */
  imm(v: number): Operand {
    if (!Number.isSafeInteger(v) || Math.abs(v) >= 2 ** 31) {
      throw new Unsupported(`the dimension or index ${v}, past 2^31`);
    }
    return this.ib.imm(v);
  }

  /** A register not used yet. */
  newReg(): Operand {
    return this.ib.r(this.#next++);
  }

  /** Records `name(args)`; returns the destination register (or none, `dst` false). */
  record(name: string, args: CallArg[], dst = true): Operand | null {
    const r = dst ? this.newReg() : null;
    this.#calls.push({ name, args, dst: r });
    return r;
  }

  #labels = 0;

  /** A label name not used yet. */
  newLabel(): string {
    return `L${this.#labels++}`;
  }

  /** Records `If`: falls through when `cond` holds, else jumps to `label`. */
  recordIf(cond: Operand, label: string): void {
    this.#calls.push({ name: "", args: [cond], dst: null, flow: "if", label });
  }

  /** Records a jump to `label`. */
  recordGoto(label: string): void {
    this.#calls.push({ name: "", args: [], dst: null, flow: "goto", label });
  }

  /** Records `label` at this point. */
  recordLabel(label: string): void {
    this.#calls.push({ name: "", args: [], dst: null, flow: "label", label });
  }

  /** Records a copy of `v`'s register into `dst` (an output of a branch). */
  recordCopy(v: Value, dst: Operand): void {
    this.#calls.push({ name: "vm.builtin.copy", args: [this.reg(v)], dst });
  }

  /** The heap slot of symbol `s`, made on first use. */
  slot(s: string): number {
    let k = this.#slots.get(s);
    if (k === undefined) {
      k = this.#slots.size;
      this.#slots.set(s, k);
    }
    return k;
  }

  /** Whether symbol `s` is bound to a slot already. */
  bound(s: string): boolean {
    return this.#slots.has(s);
  }

  /**
   * Binds or checks `reg`'s dimensions against `shape`: numbers are asserted,
   * a symbol seen before is asserted equal to its slot, a new one is stored,
   * `null` gets a fresh symbol (written back into `shape`). `context` prefixes
   * a mismatch's message.
   */
  matchShape(reg: Operand, shape: Dim[], context: string): void {
    const { AssertEqualToImm, StoreToHeap, AssertEqualToLoad, NoOp } = MatchShapeCode;
    const args: CallArg[] = [reg, this.heap, this.imm(shape.length)];
    let useful = false;
    for (let i = 0; i < shape.length; i++) {
      let d = shape[i];
      if (d === null) d = shape[i] = `?${this.#fresh++}`;
      if (typeof d === "number") {
        args.push(this.imm(context === "" ? NoOp : AssertEqualToImm), this.imm(d));
        useful ||= context !== "";
      } else if (this.bound(d)) {
        args.push(
          this.imm(context === "" ? NoOp : AssertEqualToLoad),
          this.imm(this.slot(d)),
        );
        useful ||= context !== "";
      } else {
        args.push(this.imm(StoreToHeap), this.imm(this.slot(d)));
        useful = true;
      }
    }
    if (!useful) return;
    if (context !== "") args.push(context);
    this.record("vm.builtin.match_shape", args, false);
  }

  /** A shape operand for `dims`: a constant when all are numbers, else a `make_shape` call. */
  shape(dims: readonly Dim[]): CallArg {
    if (dims.every((d) => typeof d === "number")) return dims as number[];
    const args: CallArg[] = [this.heap, this.imm(dims.length)];
    for (const d of dims) {
      if (d === null) throw new Unsupported("a dimension unknown before run time");
      if (typeof d === "number") args.push(this.imm(MakeShapeCode.UseImm), this.imm(d));
      else args.push(this.imm(MakeShapeCode.LoadShape), this.imm(this.slot(d)));
    }
    return this.record("vm.builtin.make_shape", args)!;
  }

  /** The register holding `v` (a known value becomes a constant of the executable). */
  reg(v: Value): Operand {
    const r = this.#reg(v);
    this.#dtypes.set(r, v.dtype);
    return r;
  }

  #reg(v: Value): Operand {
    if (v.reg !== null) return v.reg;
    if (v.param !== undefined && this.params !== null) {
      v.reg = this.record("vm.builtin.tuple_getitem", [this.params, this.imm(v.param)])!;
      return v.reg;
    }
    if (v.tensor === undefined) {
      // Sizes known only at run time (symbols): a tensor made from the shape heap.
      if (v.ints === undefined || v.shape.length > 1 || v.ints.includes(null)) {
        throw new Unsupported(
          "a value computed from shapes is used as a tensor (not supported yet)",
        );
      }
      v.reg = this.record("vm.op.shape_to_tensor", [this.shape(v.ints), v.dtype])!;
      if (v.shape.length === 0) v.reg = this.record("vm.builtin.reshape", [v.reg, []])!;
      return v.reg;
    }
    v.reg = this.ib.convert_constant(v.tensor) as Operand;
    return v.reg;
  }

  /**
   * A call that makes a tensor of `dtype` and `shape`: recorded, and its
   * unknown dimensions (`null`) bound from the result.
   */
  call(name: string, args: CallArg[], dtype: TensorDType, shape: Dim[]): Value {
    const int64 = INT64_ON_HOST.has(name) &&
      args.some((a) => this.#dtypes.get(a as Operand) === "int64");
    const reg = int64
      ? this.record("vm.builtin.call_on_host", [name, ...args])!
      : this.record(name, args)!;
    this.#dtypes.set(reg, dtype);
    this.#produced.add(reg);
    const out: Value = { dtype, shape: [...shape], reg };
    if (out.shape.includes(null)) this.matchShape(reg, out.shape, "");
    return out;
  }

  /**
   * A register to return `v` from: its own when a call made it; else (an
   * input, a parameter, a constant of the executable) a copy, so the caller
   * who disposes a result never frees what the VM or the caller still holds.
   */
  result(v: Value): Operand {
    const reg = this.reg(v);
    if (this.#produced.has(reg)) return reg;
    return this.call("vm.op.cast", [reg, v.dtype], v.dtype, v.shape).reg!;
  }

  /** Writes the recorded calls (after the heap's allocation) into the current function. */
  flush(): void {
    this.ib.emit_call("vm.builtin.alloc_shape_heap", [this.imm(Math.max(1, this.#slots.size))], {
      dst: this.heap,
    });
    for (const c of this.#calls) {
      if (c.flow === "if") this.ib.emit_if(c.args[0] as Operand, c.label!);
      else if (c.flow === "goto") this.ib.emit_goto(c.label!);
      else if (c.flow === "label") this.ib.label(c.label!);
      else this.ib.emit_call(c.name, c.args, c.dst === null ? {} : { dst: c.dst });
    }
  }
}

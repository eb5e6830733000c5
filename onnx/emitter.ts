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
import { Operand } from "../builder/operand.ts";
import { MakeShapeCode, MatchShapeCode } from "../builtins/shape_lowering/shape_heap.ts";
import { NDArray } from "../devices/ndarray.ts";
import type { TensorDType } from "../ground/dtype.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { type Dim, knownSize, Unsupported, type Value } from "./graph_values.ts";

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

/**
 * The calls folded at import when every tensor they read is known (a
 * `Constant`, a bound input, an earlier fold; not a parameter, which
 * `load_params` may replace): they only move or convert data, so running
 * them once on the CPU gives the bits every device would. Exporters write
 * such chains on weights (Silero VAD's LSTM reorders its gates with twelve
 * `Slice`s and five `Concat`s of constants), which would otherwise run on
 * every call.
 */
const FOLDABLE = new Set([
  "vm.op.strided_slice",
  "vm.op.concat",
  "vm.op.take",
  "vm.op.transpose",
  "vm.op.cast",
  "vm.builtin.reshape",
]);

/**
 * Elements a fold may make beyond those it reads: a fold that would grow
 * the executable past that (a `Gather` of many rows of a small table) is
 * left to run time.
 */
const FOLD_GROWTH = 1 << 16;

/** Calls that only make a view or a value of their arguments: left out when nothing reads them. */
const PURE = new Set([
  "vm.builtin.reshape",
  "vm.builtin.make_tuple",
  "vm.builtin.make_shape",
  "vm.builtin.tuple_getitem",
]);

/** Whether two shapes are the same: equal sizes, or the same symbol (one heap slot). */
function sameDims(a: readonly Dim[], b: readonly Dim[]): boolean {
  return a.length === b.length && a.every((d, i) => d !== null && d === b[i]);
}

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
  /**
   * Registers that stand for tensors known at import, by number: `flush`
   * writes the executable's constant in their place, so a constant only a
   * fold read never enters the executable.
   */
  readonly #known = new Map<number, NDArray>();
  /** Registers of `make_tuple`s of known tensors, by number (read by folds; written when used). */
  readonly #knownTuples = new Map<number, NDArray[]>();
  /** The tensors folds made, disposed with the emitter (the executable holds its own). */
  readonly #folded: NDArray[] = [];
  /** For a fold that made a view (a reshape): the tensor whose memory it views. */
  readonly #viewOf = new Map<NDArray, NDArray>();
  /** The shape of each register a call wrote (its symbols bound). */
  readonly #shapes = new Map<Operand, readonly Dim[]>();
  /** For a register `vm.builtin.reshape` wrote: the register it reshaped. */
  readonly #reshapeOf = new Map<Operand, Operand>();
  /** Registers `result` hands out: one is never handed out twice, nor dropped. */
  readonly #returned = new Set<Operand>();

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
    if (r !== null && name === "vm.builtin.make_tuple") {
      const known = args.map((a) => this.#knownTensor(a));
      if (known.every((t) => t !== undefined)) this.#knownTuples.set(r.value as number, known);
    }
    return r;
  }

  /** The tensor a register stands for when it is known at import. */
  #knownTensor(a: CallArg): NDArray | undefined {
    return a instanceof Operand && a.kind === "register"
      ? this.#known.get(a.value as number)
      : undefined;
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
    // A register that stands for the constant until `flush`: a fold may read it instead.
    v.reg = this.newReg();
    this.#known.set(v.reg.value as number, v.tensor);
    return v.reg;
  }

  /**
   * `name(args)` computed now, when `FOLDABLE` and every tensor it reads is
   * known: a known value (its register stands for the result), or
   * undefined to record the call (an argument known only at run time, a
   * result past `FOLD_GROWTH`, or an error, which the call then raises at
   * run time as it would unfolded).
   */
  #fold(name: string, args: CallArg[], dtype: TensorDType, shape: Dim[]): Value | undefined {
    const size = knownSize(shape);
    const fn = FOLDABLE.has(name) ? getGlobalFunc(name) : undefined;
    if (size === null || fn === undefined) return undefined;
    let read = 0;
    const values: unknown[] = [];
    for (const a of args) {
      if (typeof a === "string") values.push(a);
      else if (Array.isArray(a)) values.push(new ShapeTuple(a));
      else if (!(a instanceof Operand)) return undefined;
      else if (a.kind === "immediate") values.push(a.value);
      else if (a.kind !== "register") return undefined;
      else {
        const t = this.#known.get(a.value as number) ?? this.#knownTuples.get(a.value as number);
        if (t === undefined) return undefined;
        for (const x of Array.isArray(t) ? t : [t]) read += x.size;
        values.push(t);
      }
    }
    if (size > read + FOLD_GROWTH) return undefined;
    let out: unknown;
    try {
      out = fn(...values);
    } catch {
      return undefined;
    }
    if (!(out instanceof NDArray)) return undefined;
    this.#folded.push(out);
    // A reshape's result views its input's memory: owned only as far as that input is.
    if (name === "vm.builtin.reshape" && values[0] instanceof NDArray) {
      this.#viewOf.set(out, values[0]);
    }
    if (out.dtype !== dtype || out.shape.join() !== shape.join()) return undefined;
    const reg = this.newReg();
    this.#known.set(reg.value as number, out);
    this.#dtypes.set(reg, dtype);
    return { dtype, shape: [...out.shape], reg, tensor: out };
  }

  /**
   * A call that makes a tensor of `dtype` and `shape`: recorded, and its
   * unknown dimensions (`null`) bound from the result.
   */
  call(name: string, args: CallArg[], dtype: TensorDType, shape: Dim[]): Value {
    const x = args[0];
    if (
      name === "vm.op.cast" && args[1] === dtype && x instanceof Operand && this.#produced.has(x) &&
      this.#dtypes.get(x) === dtype
    ) {
      // A cast to the dtype a value has is that value (Silero's STFT casts float32 to float32).
      return { dtype, shape: [...shape], reg: x };
    }
    let given = args;
    if (name === "vm.builtin.reshape") {
      const from = this.#reshapeSource(args[0]);
      if (from !== undefined) {
        const had = this.#shapes.get(from);
        if (had !== undefined && sameDims(had, shape)) {
          return { dtype, shape: [...shape], reg: from };
        }
        given = [from, ...args.slice(1)];
      }
    }
    const out = this.#fold(name, given, dtype, shape) ?? this.#call(name, given, dtype, shape);
    const source = given[0];
    if (name === "vm.builtin.reshape" && out.reg !== null && source instanceof Operand) {
      // Only a register a call wrote once may be read later in its place.
      if (this.#produced.has(source)) this.#reshapeOf.set(out.reg, source);
    }
    return out;
  }

  /**
   * What a reshape of `a` may read instead: the input of the reshape that
   * made `a` (a view of a view is a view of the first), else `a`; undefined
   * where `a` is not a register a call wrote once (a branch's or loop's
   * register, written again, may hold another value by then).
   */
  #reshapeSource(a: CallArg): Operand | undefined {
    if (!(a instanceof Operand) || !this.#produced.has(a)) return undefined;
    return this.#reshapeOf.get(a) ?? a;
  }

  #call(name: string, args: CallArg[], dtype: TensorDType, shape: Dim[]): Value {
    const int64 = INT64_ON_HOST.has(name) &&
      args.some((a) => this.#dtypes.get(a as Operand) === "int64");
    const reg = int64
      ? this.record("vm.builtin.call_on_host", [name, ...args])!
      : this.record(name, args)!;
    this.#dtypes.set(reg, dtype);
    this.#produced.add(reg);
    const out: Value = { dtype, shape: [...shape], reg };
    if (out.shape.includes(null)) this.matchShape(reg, out.shape, "");
    this.#shapes.set(reg, out.shape);
    return out;
  }

  /**
   * A register to return `v` from: its own when a call made it; else (an
   * input, a parameter, a constant of the executable) a copy, so the caller
   * who disposes a result never frees what the VM or the caller still holds.
   */
  result(v: Value): Operand {
    const reg = this.reg(v);
    const out = this.#produced.has(reg) && !this.#returned.has(reg)
      ? reg
      : this.#call("vm.op.cast", [reg, v.dtype], v.dtype, v.shape).reg!;
    this.#returned.add(out);
    return out;
  }

  /**
   * Writes the recorded calls (after the heap's allocation) into the current
   * function: a register standing for a known tensor becomes its constant,
   * and the `PURE` calls nothing reads are left out (`#unread`).
   */
  flush(): void {
    this.ib.emit_call("vm.builtin.alloc_shape_heap", [this.imm(Math.max(1, this.#slots.size))], {
      dst: this.heap,
    });
    const dropped = this.#unread();
    const constants = new Map<number, Operand>();
    const arg = (a: CallArg): CallArg => {
      const t = this.#knownTensor(a);
      if (t === undefined) return a;
      const k = (a as Operand).value as number;
      let c = constants.get(k);
      if (c === undefined) constants.set(k, c = this.ib.convert_constant(t) as Operand);
      return c;
    };
    for (const c of this.#calls) {
      if (c.flow === "if") this.ib.emit_if(arg(c.args[0]) as Operand, c.label!);
      else if (c.flow === "goto") this.ib.emit_goto(c.label!);
      else if (c.flow === "label") this.ib.label(c.label!);
      else if (!dropped.has(c)) {
        this.ib.emit_call(c.name, c.args.map(arg), c.dst === null ? {} : { dst: c.dst });
      }
    }
  }

  /**
   * The recorded calls to leave out: those of `PURE` whose result nothing
   * reads (a reshape a later one looked through, a tuple only folds read),
   * until none is left; a result `result` hands out is read.
   */
  #unread(): Set<Recorded> {
    const dropped = new Set<Recorded>();
    for (let changed = true; changed;) {
      changed = false;
      const read = new Set<number>();
      for (const r of this.#returned) read.add(r.value as number);
      for (const c of this.#calls) {
        if (dropped.has(c)) continue;
        for (const a of c.args) {
          if (a instanceof Operand && a.kind === "register") read.add(a.value as number);
        }
      }
      for (const c of this.#calls) {
        if (dropped.has(c) || c.dst === null || !PURE.has(c.name)) continue;
        if (!read.has(c.dst.value as number)) {
          dropped.add(c);
          changed = true;
        }
      }
    }
    return dropped;
  }

  /**
   * The tensors among `constants` that the import made itself (`made`, and
   * the folds'): nothing outside holds a view of them, so they may be
   * sealed (`NDArray.seal()`) once the builder is done with them.
   */
  ownConstants(constants: readonly unknown[], made: readonly NDArray[]): NDArray[] {
    const own = new Set<NDArray>(made);
    const owned = (t: NDArray): boolean => {
      // A view of a caller's tensor (a reshape of an `inputValues` one) shares the caller's memory.
      const source = this.#viewOf.get(t);
      return source === undefined ? own.has(t) || this.#folded.includes(t) : owned(source);
    };
    return constants.filter((c): c is NDArray => c instanceof NDArray && owned(c));
  }

  /** Disposes the tensors folds made (the executable holds its own references). */
  [Symbol.dispose](): void {
    for (const t of this.#folded) t.dispose();
    this.#folded.length = 0;
  }
}

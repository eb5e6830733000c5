/**
 * A small WebAssembly binary emitter: enough of the module format and the
 * instruction set (integer and float scalars, structured control flow,
 * SIMD128 and relaxed SIMD) to write the CPU kernels of kernels/cpu/wasm/
 * as TypeScript that produces their bytes at run time.
 *
 * Why an emitter rather than C compiled by clang. The kernels are a few
 * hundred instructions of loops around multiply-adds; generating them here
 * means no toolchain on any machine, no committed binary and so no
 * rebuild-and-compare step in CI, tile sizes that are parameters rather
 * than `#define`s, and one module per feature level (relaxed SIMD's fused
 * multiply-add or SIMD128's multiply then add) built from the same source.
 * The price is that the emitter itself must be right, so
 * tests/wasm_emitter_test.ts checks its encodings byte for byte against the
 * specification and runs what it emits. jax-js builds its WebAssembly the
 * same way.
 *
 * Encodings follow the WebAssembly core specification 2.0 (binary format,
 * §5) and the relaxed-SIMD proposal (opcodes 0xfd 0x100–0x113).
 *
 * @module
 */

/** Value types (§5.3.1). */
export const ValType = {
  i32: 0x7f,
  i64: 0x7e,
  f32: 0x7d,
  f64: 0x7c,
  v128: 0x7b,
} as const;
/** One of `ValType`'s codes. */
export type ValType = typeof ValType[keyof typeof ValType];

/** Single-byte opcodes used by the kernels (§5.4). */
export const Op = {
  unreachable: 0x00,
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  else: 0x05,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  return: 0x0f,
  drop: 0x1a,
  select: 0x1b,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  i32Load: 0x28,
  f32Load: 0x2a,
  i32Store: 0x36,
  f32Store: 0x38,
  i32Const: 0x41,
  f32Const: 0x43,
  i32Eqz: 0x45,
  i32Eq: 0x46,
  i32Ne: 0x47,
  i32LtS: 0x48,
  i32LtU: 0x49,
  i32GtS: 0x4a,
  i32GtU: 0x4b,
  i32LeS: 0x4c,
  i32GeS: 0x4e,
  i32GeU: 0x4f,
  i32Add: 0x6a,
  i32Sub: 0x6b,
  i32Mul: 0x6c,
  i32And: 0x71,
  i32Shl: 0x74,
  i32ShrU: 0x76,
  f32Eq: 0x5b,
  f32Add: 0x92,
  f32Sub: 0x93,
  f32Mul: 0x94,
  f32Div: 0x95,
  f32Sqrt: 0x91,
  f32Max: 0x97,
  f64Add: 0xa0,
  f64Div: 0xa3,
  f32ConvertI32S: 0xb2,
  f32DemoteF64: 0xb6,
  f64ConvertI32S: 0xb7,
  f64PromoteF32: 0xbb,
  i32ReinterpretF32: 0xbc,
  f32ReinterpretI32: 0xbe,
} as const;

/** SIMD opcodes, each written as 0xfd followed by its number as an unsigned LEB128 (§5.4.8). */
export const SimdOp = {
  v128Load: 0x00,
  v128Load32Splat: 0x09,
  v128Store: 0x0b,
  v128Const: 0x0c,
  f32x4Splat: 0x13,
  f32x4ExtractLane: 0x1f,
  i32x4Splat: 0x11,
  v128Bitselect: 0x52,
  f32x4Eq: 0x41,
  f32x4Lt: 0x43,
  f32x4Gt: 0x44,
  f32x4Nearest: 0x6a,
  i32x4Shl: 0xab,
  i32x4Add: 0xae,
  f32x4Abs: 0xe0,
  i32x4TruncSatF32x4S: 0xf8,
  f32x4Add: 0xe4,
  f32x4Sub: 0xe5,
  f32x4Mul: 0xe6,
  f32x4Div: 0xe7,
  f32x4Min: 0xe8,
  f32x4Max: 0xe9,
  /** `b < a ? b : a` lane by lane (NaN in a kept). */
  f32x4Pmin: 0xea,
  /** `a < b ? b : a` lane by lane (NaN in a kept): TypeScript's `v < 0 ? 0 : v`. */
  f32x4Pmax: 0xeb,
  i32x4GtS: 0x3b,
  f64x2ExtractLane: 0x21,
  v128Load64Zero: 0x5d,
  f64x2PromoteLowF32x4: 0x5f,
  f64x2Add: 0xf0,
  /** Relaxed SIMD: `a * b + c`, fused or not as the hardware does it. */
  f32x4RelaxedMadd: 0x105,
} as const;

/** Appends `value` as an unsigned LEB128 (§5.2.2). */
export function writeU32(out: number[], value: number): void {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`Cannot encode ${value} as a WebAssembly u32`);
  }
  do {
    let byte = value & 0x7f;
    value = Math.floor(value / 128);
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
}

/** Appends `value` as a signed LEB128 of at most 32 bits (§5.2.2). */
export function writeI32(out: number[], value: number): void {
  if (!Number.isInteger(value) || value < -(2 ** 31) || value > 0xffffffff) {
    throw new RangeError(`Cannot encode ${value} as a WebAssembly i32`);
  }
  value |= 0; // values above 2^31 wrap, as i32.const's operand does
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    const done = (value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0);
    out.push(done ? byte : byte | 0x80);
    if (done) return;
  }
}

/** The bytes of a UTF-8 name with its length first (§5.2.4). */
function writeName(out: number[], name: string): void {
  const bytes = new TextEncoder().encode(name);
  writeU32(out, bytes.length);
  for (const b of bytes) out.push(b);
}

/**
 * The body of one function: locals and instructions, with helpers named for
 * each instruction. Parameters are locals `0 .. params.length - 1`; `local`
 * adds more after them.
 */
export class FunctionCode {
  /** The encoded instructions so far. */
  readonly bytes: number[] = [];
  readonly #paramCount: number;
  readonly #locals: ValType[] = [];
  #depth = 0;

  /** A body for a function taking `paramCount` parameters. */
  constructor(paramCount: number) {
    this.#paramCount = paramCount;
  }

  /** Declares a local of type `type` and returns its index. */
  local(type: ValType): number {
    this.#locals.push(type);
    return this.#paramCount + this.#locals.length - 1;
  }

  /** Appends one single-byte instruction with no immediates. */
  op(code: number): this {
    this.bytes.push(code);
    return this;
  }

  /** `local.get i`. */
  get(i: number): this {
    this.bytes.push(Op.localGet);
    writeU32(this.bytes, i);
    return this;
  }

  /** `local.set i`. */
  set(i: number): this {
    this.bytes.push(Op.localSet);
    writeU32(this.bytes, i);
    return this;
  }

  /** `local.tee i`. */
  tee(i: number): this {
    this.bytes.push(Op.localTee);
    writeU32(this.bytes, i);
    return this;
  }

  /** `i32.const v`. */
  i32(v: number): this {
    this.bytes.push(Op.i32Const);
    writeI32(this.bytes, v);
    return this;
  }

  /** `f32.const v`, stored as little-endian IEEE 754 bits. */
  f32(v: number): this {
    this.bytes.push(Op.f32Const);
    const bits = new Uint8Array(new Float32Array([v]).buffer);
    for (const b of bits) this.bytes.push(b);
    return this;
  }

  /** A load or store with a memory argument: `align` is log2 of the byte alignment. */
  mem(code: number, align: number, offset = 0): this {
    this.bytes.push(code);
    writeU32(this.bytes, align);
    writeU32(this.bytes, offset);
    return this;
  }

  /** A SIMD instruction without immediates. */
  simd(code: number): this {
    this.bytes.push(0xfd);
    writeU32(this.bytes, code);
    return this;
  }

  /** A SIMD load or store with a memory argument. */
  simdMem(code: number, align: number, offset = 0): this {
    this.simd(code);
    writeU32(this.bytes, align);
    writeU32(this.bytes, offset);
    return this;
  }

  /** A SIMD lane instruction (`extract_lane`) with its lane index. */
  simdLane(code: number, lane: number): this {
    this.simd(code);
    this.bytes.push(lane);
    return this;
  }

  /** `v128.const` of four float32 lanes. */
  f32x4Const(lanes: readonly [number, number, number, number]): this {
    this.simd(SimdOp.v128Const);
    const bits = new Uint8Array(new Float32Array(lanes).buffer);
    for (const b of bits) this.bytes.push(b);
    return this;
  }

  /** `v128.const` of four int32 lanes. */
  i32x4Const(lanes: readonly [number, number, number, number]): this {
    this.simd(SimdOp.v128Const);
    const bits = new Uint8Array(new Int32Array(lanes).buffer);
    for (const b of bits) this.bytes.push(b);
    return this;
  }

  /** `block` with no result; close it with `end()`. */
  block(): this {
    this.#depth++;
    this.bytes.push(Op.block, 0x40);
    return this;
  }

  /** `loop` with no result; close it with `end()`. */
  loop(): this {
    this.#depth++;
    this.bytes.push(Op.loop, 0x40);
    return this;
  }

  /** `if` with no result (pops the condition); close it with `end()`. */
  if(): this {
    this.#depth++;
    this.bytes.push(Op.if, 0x40);
    return this;
  }

  /** Closes the innermost `block`, `loop` or `if`. */
  end(): this {
    if (this.#depth === 0) throw new Error("end() without an open block, loop or if");
    this.#depth--;
    this.bytes.push(Op.end);
    return this;
  }

  /** `br depth`. */
  br(depth: number): this {
    this.bytes.push(Op.br);
    writeU32(this.bytes, depth);
    return this;
  }

  /** `br_if depth`. */
  brIf(depth: number): this {
    this.bytes.push(Op.brIf);
    writeU32(this.bytes, depth);
    return this;
  }

  /**
   * `for (i = from; i < limit; i += step) body()` over i32 locals, as
   * `block { loop { br_if (i >= limit) 1; body; i += step; br 0 } }`. The
   * body sits two labels deep. `from` and `step` are constants; `limit` is a
   * local.
   */
  forLoop(i: number, from: number, limit: number, step: number, body: () => void): this {
    this.i32(from).set(i);
    this.block().loop();
    this.get(i).get(limit).op(Op.i32GeS).brIf(1);
    body();
    this.get(i).i32(step).op(Op.i32Add).set(i);
    this.br(0).end().end();
    return this;
  }

  /** The encoded body: local declarations (runs of one type), instructions, `end` (§5.5.13). */
  encode(): number[] {
    if (this.#depth !== 0) throw new Error(`${this.#depth} block(s) left open`);
    const runs: [number, ValType][] = [];
    for (const t of this.#locals) {
      const last = runs[runs.length - 1];
      if (last !== undefined && last[1] === t) last[0]++;
      else runs.push([1, t]);
    }
    const body: number[] = [];
    writeU32(body, runs.length);
    for (const [n, t] of runs) {
      writeU32(body, n);
      body.push(t);
    }
    body.push(...this.bytes, Op.end);
    const out: number[] = [];
    writeU32(out, body.length);
    out.push(...body);
    return out;
  }
}

interface FunctionEntry {
  name: string;
  params: readonly ValType[];
  results: readonly ValType[];
  code: FunctionCode;
}

/** How a module gets its memory. */
export interface MemoryImport {
  /** Import module name. */
  module: string;
  /** Import field name. */
  name: string;
  /** Initial size in 64 KiB pages. */
  minPages: number;
  /** Largest size in pages; required when `shared`. */
  maxPages?: number;
  /** A shared memory (threads). */
  shared?: boolean;
}

/**
 * Builds a module of exported functions over one imported memory.
 *
 * @example
 * ```ts ignore
 * const m = new ModuleBuilder({ module: "env", name: "memory", minPages: 1 });
 * const f = m.function("add", [ValType.i32, ValType.i32], [ValType.i32]);
 * f.get(0).get(1).op(Op.i32Add);
 * const bytes = m.encode();
 * ```
 */
export class ModuleBuilder {
  readonly #memory: MemoryImport | null;
  readonly #functions: FunctionEntry[] = [];

  /** A module importing `memory`, or with none. */
  constructor(memory: MemoryImport | null) {
    this.#memory = memory;
  }

  /** Adds an exported function and returns its body to fill. */
  function(
    name: string,
    params: readonly ValType[],
    results: readonly ValType[] = [],
  ): FunctionCode {
    const code = new FunctionCode(params.length);
    this.#functions.push({ name, params, results, code });
    return code;
  }

  /** The module's bytes. */
  encode(): Uint8Array<ArrayBuffer> {
    const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    const section = (id: number, content: number[]) => {
      out.push(id);
      writeU32(out, content.length);
      out.push(...content);
    };
    // Type section: one function type per function (duplicates are allowed).
    const types: number[] = [];
    writeU32(types, this.#functions.length);
    for (const f of this.#functions) {
      types.push(0x60);
      writeU32(types, f.params.length);
      types.push(...f.params);
      writeU32(types, f.results.length);
      types.push(...f.results);
    }
    section(1, types);
    if (this.#memory !== null) {
      const m = this.#memory;
      const imports: number[] = [];
      writeU32(imports, 1);
      writeName(imports, m.module);
      writeName(imports, m.name);
      imports.push(0x02); // memory
      if (m.shared && m.maxPages === undefined) throw new Error("A shared memory needs maxPages");
      imports.push(m.maxPages === undefined ? 0x00 : m.shared ? 0x03 : 0x01);
      writeU32(imports, m.minPages);
      if (m.maxPages !== undefined) writeU32(imports, m.maxPages);
      section(2, imports);
    }
    const funcs: number[] = [];
    writeU32(funcs, this.#functions.length);
    this.#functions.forEach((_, i) => writeU32(funcs, i));
    section(3, funcs);
    const exports: number[] = [];
    writeU32(exports, this.#functions.length);
    this.#functions.forEach((f, i) => {
      writeName(exports, f.name);
      exports.push(0x00);
      writeU32(exports, i);
    });
    section(7, exports);
    const code: number[] = [];
    writeU32(code, this.#functions.length);
    for (const f of this.#functions) code.push(...f.code.encode());
    section(10, code);
    return new Uint8Array(out);
  }
}

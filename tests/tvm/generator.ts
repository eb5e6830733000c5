/**
 * A seeded generator of program descriptions (tests/tvm/description.ts) for
 * the differential suite against TVM. Two shapes of program:
 *
 * - format programs cover every instruction form (Call with register,
 *   immediate, constant and function operands, `%void`, `%vm`; Ret, Goto,
 *   If), every constant kind TVM has (tensors of every dtype both support,
 *   shapes, strings, Int, Float, dtypes), several functions calling each
 *   other, declared functions (packed and VM), unknown packed functions and
 *   sparse register numbers that formalize renumbers. They are built, not run.
 * - run programs call only `vm.builtin.*` functions both VMs have (tuples,
 *   shape_of, closures, If on an input) and VM functions, and are run in
 *   both VMs with the same inputs.
 *
 * Programs stay within what both builders accept (TVM's `CheckExecutable`:
 * reads after writes in code order, `ib.f()` of a name already in the
 * table, If offsets > 1; relaxvm's verifier: jumps inside the function,
 * calls to VM functions with their arity, no immediates of 2^51 or more).
 *
 * @module
 */

import { Random } from "../fuzz/random.ts";
import { TENSOR_DTYPES } from "../../mod.ts";
import {
  bitsOf,
  type InstructionDesc,
  type ItemDesc,
  type OperandDesc,
  type ProgramDesc,
  toHex,
  type Value,
} from "./description.ts";

const REAL_BUILTINS = [
  "vm.builtin.make_tuple",
  "vm.builtin.shape_of",
  "vm.builtin.tuple_getitem",
  "vm.builtin.null_value",
  "vm.builtin.copy",
  "vm.builtin.read_if_cond",
];
const DTYPE_CONSTANTS = [
  "float32",
  "float64",
  "float16",
  "bfloat16",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "bool",
  "float32x4",
  "int8x16",
  "float16x2",
];
// No control characters: stats() escapes them where TVM prints them raw (the one deliberate
// difference, tested in tvm_format_test.ts); golden_programs.ts has one for the bytes and runs.
const STRINGS = ["", "a", "hello world", 'quote " and \\ backslash', "ünïcödé ✓", "$x{y}", "{}[]"];
const ELEMENT_BYTES: Record<string, number> = {
  float32: 4,
  float64: 8,
  float16: 2,
  bfloat16: 2,
  int8: 1,
  int16: 2,
  int32: 4,
  int64: 8,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  bool: 1,
};

// Packed functions neither VM defines (built, never run). Some are not ASCII: TVM's as_text pads
// names to a width in UTF-8 bytes (std::setw), not in characters; some are 16 bytes or more.
const EXTERNAL_NAMES = [
  "ext.op_0",
  "ext.op_1",
  "ext.op_2",
  "ext.op_3",
  "ext.op_4",
  "ext.café",
  "ext.名前",
  "ext.ünïcödé_✓",
  "ext.αβγδεζηθ",
];

/** The largest immediate relaxvm holds (2^51 - 1); TVM's reaches 2^55 - 1. */
const MAX_IMM = 2 ** 51 - 1;

function randomInt(rng: Random): bigint {
  switch (rng.int(4)) {
    case 0: // an immediate (TVM's builder makes small ints immediates)
      return BigInt(rng.between(-1000, 1000));
    case 1:
      return BigInt(rng.pick([MAX_IMM, -MAX_IMM, 2 ** 40 + rng.int(1000)]));
    case 2: // an Int constant beyond TVM's immediates: kept exact as a bigint
      return (rng.chance(0.5) ? 1n : -1n) * (2n ** 55n + BigInt(rng.int(2 ** 30)));
    default: // the int64 edges
      return rng.pick([2n ** 63n - 1n, -(2n ** 63n), -(2n ** 63n) + 1n, 2n ** 62n + 12345n]);
  }
}

function randomFloat(rng: Random): number {
  return rng.pick([
    0,
    -0,
    0.5,
    -2.25,
    1e300,
    5e-324,
    Infinity,
    -Infinity,
    NaN,
    Math.PI,
    rng.next() * 1e6 - 5e5,
    1 / 3,
    0.1,
    -1e-300,
  ]);
}

function randomTensor(rng: Random): Value {
  const dt = rng.pick(TENSOR_DTYPES);
  // TVM 0.27 writes but cannot load back a tensor of rank 2 or more with a 0 dimension
  // ("Invalid DLTensor file format"), so an empty tensor here is rank 1.
  const shape = rng.chance(0.05)
    ? [0]
    : Array.from({ length: rng.int(4) }, () => rng.between(1, 3));
  const n = shape.reduce((a, b) => a * b, 1);
  const bytes = dt === "bool"
    ? Uint8Array.from({ length: n }, () => rng.int(2))
    : rng.bytes(n * ELEMENT_BYTES[dt]);
  return ["tensor", dt, shape, toHex(bytes)];
}

/** A constant of any kind TVM's pool holds. */
export function randomConstant(rng: Random, kinds = 6): Value {
  switch (rng.int(kinds)) {
    case 0:
      return ["int", String(randomInt(rng))];
    case 1:
      return ["float", bitsOf(randomFloat(rng))];
    case 2:
      return ["str", rng.pick(STRINGS)];
    case 3:
      return ["shape", Array.from({ length: rng.int(5) }, () => rng.between(-1, 64))];
    case 4:
      return ["dtype", rng.pick(DTYPE_CONSTANTS)];
    default:
      return randomTensor(rng);
  }
}

interface Signature {
  name: string;
  inputs: number;
}

/** A program covering the instruction forms and constant kinds, for building (not running). */
export function formatProgram(rng: Random, name: string): ProgramDesc {
  const vmFuncs: Signature[] = Array.from(
    { length: rng.between(1, 4) },
    (_, i) => ({ name: i === 0 ? "main" : `func${i}`, inputs: rng.int(4) }),
  );
  const table = new Set<string>(); // names in TVM's function table, in order of arrival
  const items: ItemDesc[] = [];
  const declared = new Set<string>();
  // Some VM functions are declared ahead, so others can call them before they are defined.
  for (const f of vmFuncs) {
    if (rng.chance(0.4)) {
      items.push(["declare", f.name, "vm"]);
      table.add(f.name);
      declared.add(f.name);
    }
  }
  if (rng.chance(0.3)) {
    const packed = `ext.declared_${rng.int(3)}`;
    items.push(["declare", packed, "packed"]);
    table.add(packed);
  }
  const order = [...vmFuncs].sort(() => rng.next() - 0.5);
  const defined = new Set<string>();
  for (const f of order) {
    table.add(f.name);
    const body = functionBody(rng, f, vmFuncs, table, defined, declared);
    const params = rng.chance(0.3) ? Array.from({ length: f.inputs }, (_, i) => `p${i}`) : null;
    items.push(["function", f.name, f.inputs, params, body]);
    defined.add(f.name);
  }
  return { name, items };
}

function functionBody(
  rng: Random,
  f: Signature,
  vmFuncs: readonly Signature[],
  table: Set<string>,
  defined: ReadonlySet<string>,
  declared: ReadonlySet<string>,
): InstructionDesc[] {
  const readable: number[] = Array.from({ length: f.inputs }, (_, i) => i);
  let nextReg = f.inputs + rng.int(50); // sparse numbers: formalize renumbers them
  const fresh = () => (nextReg += 1 + rng.int(20));
  // VM functions callable here: those in the table as VM functions (declared or defined).
  const callableVm = () =>
    vmFuncs.filter((g) => defined.has(g.name) || declared.has(g.name) || g.name === f.name);
  const operandOf = (): OperandDesc => {
    const choice = rng.int(10);
    if (choice <= 2 && readable.length > 0) return ["r", rng.pick(readable)];
    if (choice === 3) {
      return [
        "imm",
        String(rng.chance(0.2) ? rng.pick([MAX_IMM, -MAX_IMM]) : rng.between(-500, 500)),
      ];
    }
    if (choice <= 5) return ["const", randomConstant(rng)];
    if (choice === 6 && table.size > 0) return ["f", rng.pick([...table])];
    if (choice === 7) return ["vm"];
    if (choice === 8) return ["void"];
    return ["imm", String(rng.between(0, 9))];
  };
  const call = (writeTo: number | "void" | null): InstructionDesc => {
    let callee: string, arity: number;
    const vm = callableVm();
    if (vm.length > 0 && rng.chance(0.25)) {
      const g = rng.pick(vm);
      callee = g.name;
      arity = g.inputs;
    } else {
      callee = rng.chance(0.5) ? rng.pick(REAL_BUILTINS) : rng.pick(EXTERNAL_NAMES);
      arity = rng.int(5);
    }
    // Python evaluates the arguments (ib.f() included) before emit_call adds the callee.
    const args = Array.from({ length: arity }, operandOf);
    table.add(callee);
    return ["call", callee, args, writeTo];
  };
  const body: InstructionDesc[] = [];
  const prefix = rng.between(readable.length === 0 ? 1 : 0, 5);
  for (let i = 0; i < prefix; i++) {
    const overwrite = readable.length > f.inputs && rng.chance(0.15);
    const dst = overwrite ? rng.pick(readable.slice(f.inputs)) : rng.chance(0.1) ? null : fresh();
    body.push(call(dst));
    if (dst !== null && !readable.includes(dst)) readable.push(dst);
  }
  if (readable.length === 0) {
    const r = fresh();
    body.push(call(r));
    readable.push(r);
  }
  if (rng.chance(0.5)) {
    // if cond, then-block, goto over the else-block, else-block: registers written in
    // the blocks are not read after them (relaxvm checks reads on every path).
    const thenLength = rng.int(3), elseLength = rng.int(3);
    body.push(["if", rng.pick(readable), thenLength + 2]);
    for (let i = 0; i < thenLength; i++) body.push(call(rng.chance(0.5) ? "void" : fresh()));
    body.push(["goto", elseLength + 1]);
    for (let i = 0; i < elseLength; i++) body.push(call(rng.chance(0.5) ? null : fresh()));
  }
  if (rng.chance(0.3)) {
    const skip = rng.between(1, 2);
    body.push(["goto", skip + 1]);
    for (let i = 0; i < skip; i++) body.push(call("void"));
  }
  body.push(["ret", rng.pick(readable)]);
  return body;
}

/** A program calling only builtins both VMs have, with inputs to run it on. */
export function runProgram(rng: Random, name: string): ProgramDesc {
  const constant = (): OperandDesc => ["const", randomConstant(rng)];
  const imm = (): OperandDesc => ["imm", String(rng.between(-1000, 1000))];
  const helper: InstructionDesc[] = [
    ["call", "vm.builtin.make_tuple", [["r", 1], ["r", 0], imm()], 7],
    ["ret", 7],
  ];
  const extra = Array.from(
    { length: rng.between(0, 4) },
    () => rng.chance(0.5) ? constant() : imm(),
  );
  const main: InstructionDesc[] = [
    ["call", "vm.builtin.shape_of", [["r", 0]], 10],
    [
      "call",
      "vm.builtin.make_tuple",
      [imm(), constant(), ["r", 0], ["r", 10], ["r", 1], ...extra],
      11,
    ],
    ["call", "vm.builtin.tuple_getitem", [["r", 11], ["imm", String(rng.int(5))]], 12],
    ["call", "helper", [["r", 12], rng.chance(0.5) ? constant() : ["r", 10]], 13],
    ["call", "vm.builtin.make_closure", [["f", "helper"], constant()], 14],
    ["call", "vm.builtin.invoke_closure", [["vm"], ["r", 14], ["r", 11]], 15],
    ["if", 1, 3],
    ["call", "vm.builtin.make_tuple", [imm(), ["r", 13]], 16],
    ["goto", 2],
    ["call", "vm.builtin.make_tuple", [constant(), ["r", 12]], 16],
    ["call", "vm.builtin.make_tuple", [["r", 11], ["r", 12], ["r", 13], ["r", 15], ["r", 16]], 17],
    ["ret", 17],
  ];
  const items: ItemDesc[] = rng.chance(0.5)
    ? [["function", "helper", 2, null, helper], ["function", "main", 2, ["x", "n"], main]]
    : [["declare", "helper", "vm"], ["function", "main", 2, ["x", "n"], main], [
      "function",
      "helper",
      2,
      null,
      helper,
    ]];
  const x = randomTensor(rng);
  return {
    name,
    items,
    runs: [["main", [x, ["int", "0"]]], ["main", [x, ["int", String(rng.between(1, 9))]]]],
  };
}

/** `count` programs from `seed`: one run program in four, the rest format programs. */
export function generatePrograms(seed: number, count: number): ProgramDesc[] {
  const rng = new Random(seed);
  return Array.from(
    { length: count },
    (_, i) =>
      i % 4 === 3 ? runProgram(rng, `run_${seed}_${i}`) : formatProgram(rng, `format_${seed}_${i}`),
  );
}

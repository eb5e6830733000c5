/**
 * Scalar arithmetic on prim values, for loops and counters in hand-written
 * programs: `vm.prim.add`, `vm.prim.lt`, ... A prim value is a JavaScript
 * number (an integer from `ib.imm()`, `make_prim_value` or `shape_of`
 * element reads, or a float constant) or a `bigint` (an int64 beyond 2^53).
 *
 * TVM's VM has no such builtins: TVM compiles prim-value arithmetic
 * (`tir.Add`, `tir.FloorDiv`, `tir.LT`, ...) into the module's TIR
 * functions, which relaxvm does not have. These follow TIR's semantics:
 * `floordiv`/`floormod` round toward negative infinity (Python's `//` and
 * `%`), comparisons give booleans, which `If` takes directly.
 *
 * A loop that counts `i` from 0 to `n` (`r(0)` = n):
 *
 * ```text
 * @count:
 *   call  vm.builtin.copy  in: i0             dst: %1      i = 0
 *   call  vm.prim.lt       in: %1, %0         dst: %2      loop: i < n ?
 *   If    %2, 3                                            false: jump 3 ahead, to ret
 *   call  vm.prim.add      in: %1, i1         dst: %1      i = i + 1
 *   goto  -3                                               back to loop
 *   ret   %1
 * ```
 *
 * @module
 */

import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const primArithmeticBuiltins = new BuiltinTable("Prim arithmetic", import.meta.url);

type Scalar = number | bigint;

/** `v` as a scalar operand of `who`; a `TypeError` for anything else. */
function scalar(v: unknown, who: string, which: string): Scalar {
  if (typeof v === "number" || typeof v === "bigint") return v;
  throw new TypeError(
    `${who}: the ${which} operand must be a number or bigint prim value, got ${describe(v)}`,
  );
}

/** Both operands in one representation: bigints when either is one (then both must be integers). */
function operands(a: unknown, b: unknown, who: string): [number, number] | [bigint, bigint] {
  const x = scalar(a, who, "first"), y = scalar(b, who, "second");
  if (typeof x === "number" && typeof y === "number") return [x, y];
  const big = (v: Scalar, which: string): bigint => {
    if (typeof v === "bigint") return v;
    if (Number.isInteger(v)) return BigInt(v);
    throw new TypeError(`${who}: the ${which} operand is ${v}, which cannot meet a bigint`);
  };
  return [big(x, "first"), big(y, "second")];
}

/** `x` as a condition: a boolean, or a number that is nonzero (as `If` reads it). */
function truth(v: unknown, who: string): boolean {
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "bigint") return v !== 0n;
  throw new TypeError(`${who}: expected a boolean or number, got ${describe(v)}`);
}

const DTYPES = ["int64", "float64"] as const;
const DEVICES = ["cpu", "webgpu"] as const;
const ARITHMETIC_ERRORS =
  "`TypeError` (an operand that is not a number or bigint, a fraction meeting a bigint).";

function arithmetic(
  name: string,
  tir: string,
  what: string,
  numbers: (x: number, y: number) => number,
  bigints: (x: bigint, y: bigint) => bigint,
  errors = ARITHMETIC_ERRORS,
): void {
  const who = `vm.prim.${name}`;
  primArithmeticBuiltins.add(who, (a: unknown, b: unknown) => {
    const [x, y] = operands(a, b, who);
    return typeof x === "number" ? numbers(x, y as number) : bigints(x, y as bigint);
  }, {
    signature: "(a, b) → number",
    summary: `${what} Numbers give a number, a bigint operand a bigint.`,
    dtypes: DTYPES,
    devices: DEVICES,
    errors,
    tvm: `none: \`${tir}\`, which TVM compiles into TIR rather than calling a builtin`,
  });
}

/** Division by zero of integers is an error (TIR's is undefined); floats follow IEEE 754. */
function checkDivisor(x: number, y: number, who: string): void {
  if (y === 0 && Number.isInteger(x)) {
    throw new RangeError(`${who}: integer division by zero (${x} by 0)`);
  }
}

function checkBigDivisor(y: bigint, who: string): void {
  if (y === 0n) throw new RangeError(`${who}: integer division by zero`);
}

/** Floor division of bigints (BigInt's `/` truncates toward zero). */
function bigFloorDiv(x: bigint, y: bigint): bigint {
  const q = x / y;
  return (x % y !== 0n) && ((x < 0n) !== (y < 0n)) ? q - 1n : q;
}

arithmetic("add", "tir.Add", "`a + b`.", (x, y) => x + y, (x, y) => x + y);
arithmetic("sub", "tir.Sub", "`a - b`.", (x, y) => x - y, (x, y) => x - y);
arithmetic("mul", "tir.Mul", "`a * b`.", (x, y) => x * y, (x, y) => x * y);
arithmetic(
  "floordiv",
  "tir.FloorDiv",
  "`floor(a / b)`, rounding toward negative infinity (Python's `a // b`): `-7 // 2` is -4.",
  (x, y) => {
    checkDivisor(x, y, "vm.prim.floordiv");
    return Math.floor(x / y);
  },
  (x, y) => {
    checkBigDivisor(y, "vm.prim.floordiv");
    return bigFloorDiv(x, y);
  },
  `${ARITHMETIC_ERRORS.slice(0, -1)}, \`RangeError\` (an integer divided by zero).`,
);
arithmetic(
  "floormod",
  "tir.FloorMod",
  "`a - b * floor(a / b)`, with the sign of `b` (Python's `a % b`): `-7 % 2` is 1.",
  (x, y) => {
    checkDivisor(x, y, "vm.prim.floormod");
    const r = x - y * Math.floor(x / y);
    if (r !== 0) return r;
    // Zero takes the sign of b for floats (Python, NumPy: 7.5 % -2.5 is -0.0); integers have no -0.
    return Number.isInteger(x) && Number.isInteger(y) ? 0 : y < 0 ? -0 : 0;
  },
  (x, y) => {
    checkBigDivisor(y, "vm.prim.floormod");
    return x - y * bigFloorDiv(x, y);
  },
  `${ARITHMETIC_ERRORS.slice(0, -1)}, \`RangeError\` (an integer divided by zero).`,
);
arithmetic(
  "min",
  "tir.Min",
  "The smaller of `a` and `b` (NaN if either is).",
  Math.min,
  (x, y) => x < y ? x : y,
);
arithmetic(
  "max",
  "tir.Max",
  "The larger of `a` and `b` (NaN if either is).",
  Math.max,
  (x, y) => x > y ? x : y,
);

primArithmeticBuiltins.add("vm.prim.div", (a: unknown, b: unknown) => {
  const x = scalar(a, "vm.prim.div", "first"), y = scalar(b, "vm.prim.div", "second");
  return Number(x) / Number(y);
}, {
  signature: "(a, b) → number",
  summary:
    "`a / b` as a float (Python's `a / b`; a bigint operand is converted to a number first). For integer division use `vm.prim.floordiv`.",
  dtypes: DTYPES,
  devices: DEVICES,
  errors: "`TypeError` (an operand that is not a number or bigint).",
  tvm: "none: `tir.Div` on floats, which TVM compiles into TIR rather than calling a builtin",
});

const COMPARISONS: [string, string, string, (x: Scalar, y: Scalar) => boolean][] = [
  ["lt", "tir.LT", "<", (x, y) => x < y],
  ["le", "tir.LE", "<=", (x, y) => x <= y],
  ["gt", "tir.GT", ">", (x, y) => x > y],
  ["ge", "tir.GE", ">=", (x, y) => x >= y],
  ["eq", "tir.EQ", "==", (x, y) => x == y],
  ["ne", "tir.NE", "!=", (x, y) => x != y],
];

for (const [name, tir, op, compare] of COMPARISONS) {
  const who = `vm.prim.${name}`;
  primArithmeticBuiltins.add(who, (a: unknown, b: unknown) => {
    return compare(scalar(a, who, "first"), scalar(b, who, "second"));
  }, {
    signature: "(a, b) → boolean",
    summary:
      `\`a ${op} b\` as a boolean, for \`If\` (a number and a bigint compare by value; NaN compares false${
        name === "ne" ? ", except for `ne`" : ""
      }).`,
    dtypes: DTYPES,
    devices: DEVICES,
    errors: "`TypeError` (an operand that is not a number or bigint).",
    tvm: `none: \`${tir}\`, which TVM compiles into TIR rather than calling a builtin`,
  });
}

primArithmeticBuiltins.add(
  "vm.prim.and",
  (a: unknown, b: unknown) => truth(a, "vm.prim.and") && truth(b, "vm.prim.and"),
  {
    signature: "(a, b) → boolean",
    summary: "Whether both are true (a number is true when nonzero, as `If` reads it).",
    dtypes: DTYPES,
    devices: DEVICES,
    errors: "`TypeError` (an operand that is not a boolean, number or bigint).",
    tvm: "none: `tir.And`, which TVM compiles into TIR rather than calling a builtin",
  },
);

primArithmeticBuiltins.add(
  "vm.prim.or",
  (a: unknown, b: unknown) => truth(a, "vm.prim.or") || truth(b, "vm.prim.or"),
  {
    signature: "(a, b) → boolean",
    summary: "Whether either is true (a number is true when nonzero, as `If` reads it).",
    dtypes: DTYPES,
    devices: DEVICES,
    errors: "`TypeError` (an operand that is not a boolean, number or bigint).",
    tvm: "none: `tir.Or`, which TVM compiles into TIR rather than calling a builtin",
  },
);

primArithmeticBuiltins.add("vm.prim.not", (a: unknown) => !truth(a, "vm.prim.not"), {
  signature: "(a) → boolean",
  summary: "Whether `a` is false (a number is true when nonzero, as `If` reads it).",
  dtypes: DTYPES,
  devices: DEVICES,
  errors: "`TypeError` (an operand that is not a boolean, number or bigint).",
  tvm: "none: `tir.Not`, which TVM compiles into TIR rather than calling a builtin",
});

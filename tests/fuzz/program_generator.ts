/**
 * Random valid programs for the fuzz families: a few VM functions of calls
 * to builtins and to each other, branches and loops (so some never end
 * without a fuel budget), constants of every kind, and names chosen to
 * break anything that pastes them into text or source code.
 *
 * @module
 */

import { dtype, ExecBuilder, type Executable, shape, tensor } from "../../mod.ts";
import type { Random } from "./random.ts";

/** Names that break naive printing, quoting or code generation. */
export const HOSTILE_NAMES: readonly string[] = [
  'x"); globalThis.pwned = 1; ("',
  "x`; globalThis.pwned = 1; `",
  "*/ globalThis.pwned = 1; /*",
  "a\nret   %0\n@fake:",
  "\u001b[31mred\u001b[0m",
  "\u0000nul",
  "constructor",
  "__proto__",
  "名前",
  "x'\\u0027",
];

/** Packed functions a generated program may call, with how many values each takes. */
const CALLS: readonly { name: string; arity: [number, number] }[] = [
  { name: "vm.builtin.copy", arity: [1, 1] },
  { name: "vm.builtin.make_tuple", arity: [0, 4] },
  { name: "vm.builtin.tuple_getitem", arity: [2, 2] },
  { name: "vm.builtin.null_value", arity: [0, 0] },
  { name: "vm.builtin.shape_of", arity: [1, 1] },
  { name: "vm.builtin.read_if_cond", arity: [1, 1] },
  { name: "vm.op.add", arity: [2, 2] },
  { name: "vm.op.multiply", arity: [2, 2] },
  { name: "vm.op.relu", arity: [1, 1] },
  { name: "vm.builtin.alloc_shape_heap", arity: [1, 1] },
  { name: "vm.builtin.reshape", arity: [2, 2] },
];

interface FunctionPlan {
  name: string;
  inputs: number;
  length: number;
}

/** Options of `randomProgram`. */
export interface GeneratorOptions {
  /** Most VM functions (default 4). */
  maxFunctions?: number;
  /** Most instructions per function (default 40). */
  maxLength?: number;
  /** Probability that a name is hostile (default 0.2). */
  hostileNames?: number;
}

/** A constant operand value of a random kind. */
function randomConstant(rand: Random): Parameters<ExecBuilder["convert_constant"]>[0] {
  switch (rand.int(6)) {
    case 0:
      return rand.pick([0, 1, -1, 0.5, -0, NaN, Infinity, 2 ** 53, 1e-300]);
    case 1:
      return rand.pick(["", "text", ...HOSTILE_NAMES]);
    case 2:
      return shape(...Array.from({ length: rand.int(4) }, () => rand.int(5)));
    case 3:
      return dtype(rand.pick(["float32", "int32", "uint8", "bool", "float64"]));
    default: {
      const n = rand.int(5);
      return tensor(Array.from({ length: n }, () => rand.int(9) - 4), {
        dtype: rand.pick(["float32", "int32"]),
      });
    }
  }
}

/** A random program that passes the checker. */
export function randomProgram(rand: Random, options: GeneratorOptions = {}): Executable {
  const ib = new ExecBuilder();
  const count = rand.between(1, options.maxFunctions ?? 4);
  const hostile = options.hostileNames ?? 0.2;
  const plans: FunctionPlan[] = [];
  for (let f = 0; f < count; f++) {
    const base = rand.chance(hostile) ? rand.pick(HOSTILE_NAMES) : "f";
    plans.push({
      name: `${base}${f}`,
      inputs: rand.int(4),
      length: rand.between(1, options.maxLength ?? 40),
    });
  }
  for (const plan of plans) ib.declare_function(plan.name, "vm");
  for (const plan of plans) {
    ib.function(plan.name, { num_inputs: plan.inputs }, () => {
      const written: number[] = Array.from({ length: plan.inputs }, (_, i) => i);
      let next = plan.inputs;
      const value = () =>
        written.length > 0 && rand.chance(0.8)
          ? ib.r(rand.pick(written))
          : rand.chance(0.5)
          ? ib.imm(rand.int(7) - 2)
          : ib.convert_constant(randomConstant(rand));
      const body = plan.length - 1;
      for (let pc = 0; pc < body; pc++) {
        const kind = rand.int(10);
        if (kind < 6 || written.length === 0) {
          const dst = rand.chance(0.3) && written.length > 0 ? rand.pick(written) : next++;
          if (rand.chance(0.15)) {
            const callee = rand.pick(plans);
            const args = Array.from({ length: callee.inputs }, value);
            ib.emit_call(callee.name, args, { dst: ib.r(dst) });
          } else {
            const call = rand.pick(CALLS);
            const args = Array.from({ length: rand.between(...call.arity) }, value);
            if (rand.chance(0.1)) {
              ib.emit_call(call.name, args);
              continue;
            }
            ib.emit_call(call.name, args, { dst: ib.r(dst) });
          }
          if (!written.includes(dst)) written.push(dst);
        } else if (kind < 8) {
          // A branch forward or backward, never to itself and never past the final ret.
          let offset = rand.between(-pc, body - pc);
          if (offset === 0) offset = 1;
          ib.emit_if(ib.r(rand.pick(written)), offset);
        } else if (kind < 9) {
          let offset = rand.between(-pc, body - pc);
          if (offset === 0) offset = 1;
          ib.emit_goto(offset);
        } else {
          ib.emit_ret(ib.r(rand.pick(written)));
        }
      }
      if (written.length === 0) {
        ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(next) });
        written.push(next);
      }
      ib.emit_ret(ib.r(rand.pick(written)));
    });
  }
  return ib.get({ liveness: rand.chance(0.8) });
}

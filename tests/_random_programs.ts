/**
 * Random programs for property tests: any function-table order (VM and
 * packed entries interleaved, declared before or after use), any code order,
 * every operand kind and constant kind, branches and jumps. Deterministic
 * for a seed.
 *
 * @module
 */

import { dtype, ExecBuilder, type Executable, shape, tensor } from "../mod.ts";

/** A small deterministic generator (xorshift32). */
export class Random {
  #s: number;
  constructor(seed: number) {
    this.#s = (seed * 2654435761) >>> 0 || 1;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    let s = this.#s;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    this.#s = s >>> 0;
    return this.#s % n;
  }
  /** One of `items`. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
  /** `items` in a random order. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

const PACKED = ["vm.builtin.copy", "vm.builtin.make_tuple", "test.random.a", "test.random.b"];

/** A random program that checks; `seed` picks it. */
export function randomProgram(seed: number): Executable {
  const rnd = new Random(seed);
  const ib = new ExecBuilder();
  const vmFuncs = Array.from({ length: 1 + rnd.int(4) }, (_, i) => ({
    name: `fn${i}`,
    inputs: rnd.int(3),
  }));
  const packed = rnd.shuffle(PACKED).slice(0, 1 + rnd.int(PACKED.length));
  // Declare a random subset of everything first, in a random order.
  const all = [
    ...vmFuncs.map((f) => ({ name: f.name, kind: "vm" as const })),
    ...packed.map((name) => ({ name, kind: "packed" as const })),
  ];
  for (const d of rnd.shuffle(all)) if (rnd.int(2) === 0) ib.declare_function(d.name, d.kind);
  const constants = () => [
    ib.convert_constant(rnd.pick([0, -0, 1.5, NaN, -Infinity, 7])),
    rnd.pick(["a", "b", ""]),
    shape(rnd.int(3), 2),
    [rnd.int(4)],
    dtype(rnd.pick(["float32", "int32", "uint8"])),
    tensor([rnd.int(5), 1], { dtype: rnd.pick(["float32", "int32"]) }),
  ];
  // Define the VM functions in another random order.
  for (const f of rnd.shuffle(vmFuncs)) {
    ib.function(f.name, { num_inputs: f.inputs }, () => {
      const written = Array.from({ length: f.inputs }, (_, i) => i);
      let next = f.inputs + rnd.int(3); // register numbers with gaps, as users write them
      const operand = () => {
        switch (rnd.int(6)) {
          case 0:
            return written.length > 0 ? ib.r(rnd.pick(written)) : ib.imm(rnd.int(9) - 4);
          case 1:
            return ib.imm(rnd.int(1000) - 500);
          case 2:
            return rnd.pick(constants());
          case 3:
            return ib.f(rnd.pick(vmFuncs).name);
          case 4:
            return ib.vm_state();
          default:
            return ib.void_arg();
        }
      };
      const steps = 1 + rnd.int(6);
      for (let s = 0; s < steps; s++) {
        const kind = rnd.int(8);
        if (kind === 0 && written.length > 0) {
          // Skip the next call when the condition is false.
          ib.emit_if(ib.r(rnd.pick(written)), 2);
          ib.emit_call(rnd.pick(packed), [operand()]);
        } else if (kind === 1) {
          ib.emit_goto(1);
        } else if (kind === 2) {
          const callee = rnd.pick(vmFuncs);
          const args = Array.from({ length: callee.inputs }, operand);
          ib.emit_call(callee.name, args, { dst: ib.r(next) });
          written.push(next);
          next += 1 + rnd.int(2);
          continue;
        }
        const args = Array.from({ length: rnd.int(4) }, operand);
        if (rnd.int(3) === 0) {
          ib.emit_call(rnd.pick(packed), args);
        } else {
          ib.emit_call(rnd.pick(packed), args, { dst: ib.r(next) });
          written.push(next);
          next += 1 + rnd.int(2);
        }
      }
      if (written.length === 0) {
        ib.emit_call(rnd.pick(packed), [], { dst: ib.r(next) });
        written.push(next);
      }
      ib.emit_ret(ib.r(rnd.pick(written)));
    });
  }
  return ib.get({ liveness: rnd.int(2) === 0 });
}

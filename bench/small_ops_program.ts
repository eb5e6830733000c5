/**
 * The program of bench/small_ops_bench.ts, shared with its tests: 200
 * alternating `vm.op.add` / `vm.op.multiply` on 4-element float32 tensors,
 * `x1 = add(x0, a); x2 = multiply(x1, b); …`, and the same chain in plain JS.
 *
 * @module
 */

import { ExecBuilder, type Executable } from "../mod.ts";

/** Instructions in the chain. */
export const OPS = 200;
/** Elements per tensor. */
export const SIZE = 4;

// Starting point and operands: x ↦ (x + a)·b with b = 0.5 converges to a, so
// 200 steps stay in the normal float range (no overflow, no denormals).
export const X0 = [1, -2, 3, -4];
export const A = [0.25, 0.5, 0.75, 1];
export const B = [0.5, 0.5, 0.5, 0.5];

/**
 * The chain as a user writes it: inputs `x0, a, b`; each op writes a new
 * register that the next op reads (the builder's liveness releases each one
 * after that read).
 */
export function smallOpsProgram(ops = OPS): Executable {
  const ib = new ExecBuilder();
  ib.function("chain", { num_inputs: 3 }, () => {
    let x = 0;
    for (let i = 0; i < ops; i++) {
      const op = i % 2 === 0 ? "vm.op.add" : "vm.op.multiply";
      const operand = i % 2 === 0 ? 1 : 2;
      ib.emit_call(op, [ib.r(x), ib.r(operand)], { dst: ib.r(3 + i) });
      x = 3 + i;
    }
    ib.emit_ret(ib.r(x));
  });
  return ib.get();
}

// The plain JS baseline: one function per op, a fresh result array per call.
function jsAdd(x: Float32Array, y: Float32Array): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = x[i] + y[i];
  return out;
}

function jsMultiply(x: Float32Array, y: Float32Array): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = x[i] * y[i];
  return out;
}

/** The same chain in plain JS. */
export function plainChain(x0: Float32Array, a: Float32Array, b: Float32Array): Float32Array {
  let x = x0;
  for (let i = 0; i < OPS; i += 2) {
    x = jsAdd(x, a);
    x = jsMultiply(x, b);
  }
  return x;
}

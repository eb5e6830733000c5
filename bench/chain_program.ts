/**
 * The layer chain used by the memory benchmark and tests: `layers` times
 * `x = relu(x @ W_i + b_i)` on `size × size` activations. Weights and biases
 * are inputs (as a model's parameters usually are), so the VM's allocator
 * counts only what the program itself allocates: the activations.
 *
 * @module
 */

import { type Device, ExecBuilder, type Executable, type NDArray, tensor } from "../mod.ts";

/** Builds the chain: inputs `x, W_0, b_0, …, W_{n-1}, b_{n-1}`. */
export function chainProgram(layers: number, liveness: boolean): Executable {
  const ib = new ExecBuilder();
  ib.function("chain", 1 + 2 * layers, () => {
    let x = 0;
    let next = 1 + 2 * layers;
    for (let l = 0; l < layers; l++) {
      const w = 1 + 2 * l, b = 2 + 2 * l;
      const mm = next++, biased = next++, act = next++;
      ib.emit_call("vm.op.matmul", [ib.r(x), ib.r(w)], { dst: ib.r(mm) });
      ib.emit_call("vm.op.add", [ib.r(mm), ib.r(b)], { dst: ib.r(biased) });
      ib.emit_call("vm.op.relu", [ib.r(biased)], { dst: ib.r(act) });
      x = act;
    }
    ib.emit_ret(ib.r(x));
  });
  return ib.get({ liveness });
}

/** Deterministic inputs for the chain on `device`: `[x, W_0, b_0, …]`, owned by the caller. */
export function chainInputs(layers: number, size: number, device: Device): NDArray[] {
  let seed = 7;
  const rand = (n: number, scale: number) =>
    Float32Array.from(
      { length: n },
      () => ((seed = (seed * 16807) % 2147483647) / 2147483647 - 0.5) * scale,
    );
  const inputs = [tensor(rand(size * size, 1), { shape: [size, size], device })];
  for (let l = 0; l < layers; l++) {
    inputs.push(tensor(rand(size * size, 2 / Math.sqrt(size)), { shape: [size, size], device }));
    inputs.push(tensor(rand(size, 0.1), { shape: [size], device }));
  }
  return inputs;
}

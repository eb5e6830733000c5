/**
 * Per-op overhead on tiny tensors (issue 7, part 3): a VM function of 200
 * alternating `vm.op.add` / `vm.op.multiply` on 4-element float32 tensors,
 * `x1 = add(x0, a); x2 = multiply(x1, b); …`, each result flowing into the
 * next instruction, run the way users run it: `new VirtualMachine(ex)` with
 * default options (pooled allocator, specialized dispatch, liveness on), then
 * `await vm.invoke(...)`, reading the result and disposing it.
 *
 * Baselines, in the same process, rounds interleaved so drift on a shared
 * machine hits all three alike:
 *
 * - a plain JS loop doing the same arithmetic with one small function per op
 *   that allocates a fresh `Float32Array` for its result (target: relaxvm
 *   ≤ 1.0× its time);
 * - TF.js eager ops on `tfjs-backend-cpu` (`tf.add` / `tf.mul`) inside
 *   `tf.tidy`, so every intermediate is disposed (target: relaxvm ≥ 8×
 *   faster).
 *
 * Each side computes the whole 200-op chain and reads the result; the
 * figure is time per chain / 200.
 *
 * ```sh
 * deno run -A bench/small_ops_bench.ts            # the table
 * deno run -A bench/small_ops_bench.ts --rounds 51   # more rounds, steadier medians
 * ```
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-cpu@4.22.0";
import { type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { A, B, OPS, plainChain, SIZE, smallOpsProgram, X0 } from "./small_ops_program.ts";
import { median } from "./_stats.ts";

/** The same chain as TF.js eager ops; `tf.tidy` disposes every intermediate. */
function tfChain(x0: tf.Tensor, a: tf.Tensor, b: tf.Tensor): Float32Array {
  const out = tf.tidy(() => {
    let x = x0;
    for (let i = 0; i < OPS; i += 2) {
      x = tf.add(x, a);
      x = tf.mul(x, b);
    }
    return x;
  });
  const values = out.dataSync() as Float32Array;
  out.dispose();
  return values;
}

/** Runs `body` `reps` times; returns ns per op. */
async function timeRound(body: () => unknown, reps: number): Promise<number> {
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) await body();
  return ((performance.now() - t0) * 1e6) / (reps * OPS);
}

/** The three figures (ns per op, medians over interleaved rounds) and the result of each side. */
export async function measureSmallOps(rounds = 31): Promise<{
  relaxvm: number;
  plainJs: number;
  tfjs: number;
  results: { relaxvm: number[]; plainJs: number[]; tfjs: number[] };
}> {
  const vm = new VirtualMachine(smallOpsProgram());
  using x0 = tensor(X0), a = tensor(A), b = tensor(B);
  const jx = Float32Array.from(X0), ja = Float32Array.from(A), jb = Float32Array.from(B);
  const tx = tf.tensor1d(X0), ta = tf.tensor1d(A), tb = tf.tensor1d(B);
  const runVm = async () => {
    using out = await vm.invoke("chain", x0, a, b) as NDArray;
    return out.dataSync();
  };
  const runJs = () => plainChain(jx, ja, jb);
  const runTf = () => tfChain(tx, ta, tb);
  const results = {
    relaxvm: [...await runVm() as Float32Array],
    plainJs: [...runJs()],
    tfjs: [...runTf()],
  };
  // Warm-up: enough calls that V8 optimizes every path.
  for (let i = 0; i < 300; i++) {
    await runVm();
    runJs();
    if (i % 10 === 0) runTf();
  }
  const t = { relaxvm: [] as number[], plainJs: [] as number[], tfjs: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    t.relaxvm.push(await timeRound(runVm, 200));
    t.plainJs.push(await timeRound(runJs, 200));
    t.tfjs.push(await timeRound(runTf, 20));
  }
  tx.dispose();
  ta.dispose();
  tb.dispose();
  return {
    relaxvm: median(t.relaxvm),
    plainJs: median(t.plainJs),
    tfjs: median(t.tfjs),
    results,
  };
}

if (import.meta.main) {
  tf.enableProdMode();
  await tf.setBackend("cpu");
  const at = Deno.args.indexOf("--rounds");
  const rounds = at >= 0 ? Number(Deno.args[at + 1]) : 31;
  const m = await measureSmallOps(rounds);
  const same = (p: number[], q: number[]) => p.every((v, i) => Math.abs(v - q[i]) < 1e-5);
  if (!same(m.results.relaxvm, m.results.plainJs) || !same(m.results.tfjs, m.results.plainJs)) {
    throw new Error(`The chains disagree: ${JSON.stringify(m.results)}`);
  }
  const speedup = (ms: number) => `${(ms / m.relaxvm).toFixed(2)}×`;
  console.log(
    `| ${OPS} chained ops on ${SIZE}-element float32 tensors | ns per op | ` +
      "relaxvm speedup (this ÷ relaxvm) | target |",
  );
  console.log("| --- | ---: | ---: | ---: |");
  console.log(`| relaxvm: one VM call, default options | ${m.relaxvm.toFixed(0)} | | |`);
  console.log(
    `| plain JS loop, fresh Float32Array per op | ${m.plainJs.toFixed(0)} | ${
      speedup(m.plainJs)
    } | ≥ 1.0× |`,
  );
  console.log(
    `| TF.js eager ops, tfjs-backend-cpu | ${m.tfjs.toFixed(0)} | ${speedup(m.tfjs)} | ≥ 8× |`,
  );
  console.log(
    `\nMedians of ${rounds} interleaved rounds. relaxvm takes ${
      (m.relaxvm / m.plainJs).toFixed(2)
    }× the plain JS loop's time (target ≤ 1.0×).`,
  );
}

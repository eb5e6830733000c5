/**
 * Building, finishing, saving and loading an executable of 1,000,000
 * instructions (issue targets: build + get well under a second; save +
 * load at ≥ 100 MB/s). Prints a table.
 *
 *   deno run bench/build_and_serialize.ts
 *
 * @module
 */

import { ExecBuilder, Executable } from "../mod.ts";
import { median } from "./_stats.ts";

const N = 1_000_000;

function time<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const out = fn();
  return [out, performance.now() - t0];
}

if (import.meta.main) {
  const emits: number[] = [], gets: number[] = [], saves: number[] = [], loads: number[] = [];
  let bytes = 0;
  for (let round = 0; round < 5; round++) {
    const [ib, emit] = time(() => {
      const ib = new ExecBuilder();
      ib.function("big", 2, () => {
        for (let i = 0; i < N - 1; i++) {
          ib.emit_call(i % 2 ? "vm.op.add" : "vm.op.multiply", [ib.r(0), ib.r(1)], {
            dst: ib.r(2 + (i % 16)),
          });
        }
        ib.emit_ret(ib.r(2));
      });
      return ib;
    });
    const [ex, get] = time(() => ib.get());
    const [saved, save] = time(() => ex.save());
    const [, load] = time(() => Executable.load(saved));
    bytes = saved.length;
    emits.push(emit), gets.push(get), saves.push(save), loads.push(load);
  }
  const mb = bytes / 1e6;
  console.log(
    `| step (${N.toLocaleString("en")} instructions, ${mb.toFixed(1)} MB) | median ms | rate |`,
  );
  console.log("| --- | ---: | ---: |");
  console.log(`| emit (ExecBuilder calls) | ${median(emits).toFixed(0)} | |`);
  console.log(`| get (check + formalize) | ${median(gets).toFixed(0)} | |`);
  console.log(`| build total | ${(median(emits) + median(gets)).toFixed(0)} | |`);
  console.log(
    `| save | ${median(saves).toFixed(0)} | ${(mb / (median(saves) / 1e3)).toFixed(0)} MB/s |`,
  );
  console.log(
    `| load (incl. validation and check) | ${median(loads).toFixed(0)} | ${
      (mb / (median(loads) / 1e3)).toFixed(0)
    } MB/s |`,
  );
  console.log(
    `| save + load | ${(median(saves) + median(loads)).toFixed(0)} | ${
      (mb / ((median(saves) + median(loads)) / 1e3)).toFixed(0)
    } MB/s |`,
  );
}

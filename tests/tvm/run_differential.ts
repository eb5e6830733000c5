/**
 * `deno task tvm:differential`: the differential suite at scale (10,000
 * programs by default; `--programs N --seed S`), in batches of 2,000 (one
 * Python process each). Prints the figures; exits 1 on any difference.
 *
 * @module
 */

import { differential, type Figures, formatFigures } from "./differential.ts";
import { generatePrograms } from "./generator.ts";

const flag = (name: string) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const total = Number(flag("programs") ?? 10_000);
const seed = Number(flag("seed") ?? 20261125);
const BATCH = 2000;
let sum: Figures | undefined;
for (let start = 0, batch = 0; start < total; start += BATCH, batch++) {
  const f = await differential(generatePrograms(seed + batch, Math.min(BATCH, total - start)));
  if (sum === undefined) sum = f;
  else {
    for (const key of Object.keys(f) as (keyof Figures)[]) {
      if (key === "mismatches") sum.mismatches.push(...f.mismatches);
      else if (key !== "tvm") sum[key] += f[key];
    }
  }
}
console.log(formatFigures(sum!));
for (const m of sum!.mismatches.slice(0, 10)) console.log(m);
const ok = sum!.built === sum!.tried && sum!.bytes === sum!.built && sum!.text === sum!.built &&
  sum!.python === sum!.built && sum!.roundTrip === sum!.built && sum!.loadedByTvm === sum!.built &&
  sum!.ranByTvm === sum!.runs &&
  sum!.stats === sum!.statsComparable && sum!.results === sum!.runs;
if (!ok) Deno.exit(1);

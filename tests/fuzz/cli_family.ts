/**
 * Fuzz family "cli": the `relaxvm` command (`cli/main.ts`, in process) on
 * hostile files and arguments. A case writes a saved program (as built, or
 * cut, with bytes flipped) whose functions loop forever, return a tensor of
 * 4 million elements, return strings and carry names full of terminal
 * escapes, and runs `run`, `profile` or `dump` on it with random arguments
 * and options: JSON at the edges, escapes, megabytes of text, options given
 * twice or without values, limits of every kind (`--timeout` always bounded).
 *
 * The command must return 0 or 1 (never throw); an exit of 1 is a
 * "rejection". Bugs: an exception out of `main`; a case over `HANG_MS`;
 * output with raw control characters (only newlines and tabs may reach the
 * terminal) or longer than `MAX_OUTPUT` ("wrong results").
 *
 * @module
 */

import { ExecBuilder } from "../../mod.ts";
import { main } from "../../cli/main.ts";
import { addBigTensor, addSpin } from "../_hostile_functions.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 5000;
/** The most output one case may print. */
const MAX_OUTPUT = 256 * 1024;
/** A control character other than newline and tab. */
// deno-lint-ignore no-control-regex
const RAW_CONTROL = new RegExp("[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]");

const NAMES = ["spin", "big", "text", "echo", "t\u001b[2Jx\u009b31m"];

/** The program every case starts from. */
function hostileProgram(): Uint8Array {
  const ib = new ExecBuilder();
  addSpin(ib);
  addBigTensor(ib, "big", 0);
  ib.function("text", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", ["\u001b]0;x\u0007\u009b2J" + "y".repeat(100_000)], {
      dst: ib.r(0),
    });
    ib.emit_ret(ib.r(0));
  });
  ib.function("echo", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("t\u001b[2Jx\u009b31m", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.print", ["\u001b[31mred"], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  return ib.get().save();
}

/** An argument of `run`: JSON at the edges, escapes, long text. */
function argument(rand: Random): string {
  return rand.pick([
    () => String(rand.pick([0, -1, 1e308, -0, 2 ** 53 + 1])),
    () => "[".repeat(rand.int(3000)) + "1" + "]".repeat(rand.int(3000)),
    () => JSON.stringify(Array.from({ length: rand.int(2000) }, () => rand.next())),
    () => "[1, [2]]",
    () => "\u001b[2J\u009b",
    () => '"' + "z".repeat(rand.int(200_000)) + '"',
    () => "{}",
    () => "true",
    () => "--",
    () => "-x",
    () => "--timeout",
  ])();
}

/** The options of a case: limits (the timeout always bounded), devices, dtypes, odd ones. */
function options(rand: Random): string[] {
  const out = ["--timeout", rand.pick(["0", "50", "300", "1e3"])];
  if (rand.chance(0.3)) out.push("--fuel", rand.pick(["0", "10", "1e6", "-5", "x"]));
  if (rand.chance(0.3)) out.push("--max-memory", rand.pick(["0", "1024", "1e7", "none"]));
  if (rand.chance(0.2)) out.push("--dtype", rand.pick(["int64", "bool", "float16", "nope"]));
  if (rand.chance(0.1)) out.push("--timeout", "100"); // twice
  if (rand.chance(0.1)) out.push(rand.pick(["--nope", "--dtype", "--device=tpu", "-"]));
  if (rand.chance(0.05)) out.push("--preload", "\u001b[2J.ts");
  return out;
}

/** `bytes` cut or with bytes flipped (or as they are). */
function mutate(rand: Random, bytes: Uint8Array): Uint8Array {
  const out = bytes.slice();
  switch (rand.int(4)) {
    case 0:
      return out.slice(0, rand.int(out.length));
    case 1:
      for (let k = rand.between(1, 8); k > 0; k--) out[rand.int(out.length)] = rand.int(256);
      return out;
    default:
      return out;
  }
}

/** Runs `cases` command lines from `rand`'s sequence. */
export async function cliFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("cli");
  const program = hostileProgram();
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_fuzz_" });
  const file = `${dir}/case.rvm`;
  const log = console.log, error = console.error;
  let printed = "";
  const capture = (...args: unknown[]) => {
    printed += args.map(String).join(" ") + "\n";
  };
  try {
    for (const [i, seed] of caseSeeds(rand, cases)) {
      const caseRand = new Random(seed);
      report.tried++;
      const where = `case ${i}`;
      await Deno.writeFile(file, mutate(caseRand, program));
      const command = caseRand.pick(["run", "run", "run", "profile", "dump"]);
      const name = caseRand.pick(NAMES);
      const args = command === "dump"
        ? ["dump", file, ...caseRand.pick([[], ["--typescript"], ["--text", "--releases"]])]
        : [
          command,
          file,
          name,
          ...Array.from({ length: caseRand.int(3) }, () => argument(caseRand)),
          ...options(caseRand),
        ];
      printed = "";
      console.log = capture;
      console.error = capture;
      const t0 = performance.now();
      let outcome;
      try {
        outcome = await settle(main(args), HANG_MS);
      } finally {
        console.log = log;
        console.error = error;
      }
      const ms = performance.now() - t0;
      const shown = `${where}: ${JSON.stringify(args.map((a) => a.slice(0, 40)))}`;
      if (outcome === "hang" || ms > HANG_MS) {
        recordBug(report, "hangs", `${shown}: ${ms.toFixed(0)} ms`);
        continue;
      }
      if ("error" in outcome) {
        recordBug(report, "otherExceptions", `${shown}: ${String(outcome.error).slice(0, 200)}`);
        continue;
      }
      if (outcome.value === 0) report.loaded++;
      else if (outcome.value === 1) report.rejected++;
      else recordBug(report, "wrong", `${shown}: exit code ${outcome.value}`);
      if (RAW_CONTROL.test(printed)) {
        const at = printed.search(RAW_CONTROL);
        recordBug(
          report,
          "wrong",
          `${shown}: raw control character in ${printed.slice(at - 20, at + 5)}`,
        );
      }
      if (printed.length > MAX_OUTPUT) {
        recordBug(report, "wrong", `${shown}: printed ${printed.length} characters`);
      }
    }
  } finally {
    console.log = log;
    console.error = error;
    await Deno.remove(dir, { recursive: true });
  }
  return report;
}

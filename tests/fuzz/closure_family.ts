/**
 * Fuzz family "closures": closures handed between VMs and called under
 * limits. Each case makes two or three VMs of one loaded program (random
 * dispatch forms, call depths and memory limits), takes closures from one
 * (of a function that loops forever, of one returning what it captured, of
 * one that recurses through `invoke_closure`), maybe disposes their VM, and
 * calls them through another VM's `invoke_closure` or program, or their
 * own, under random fuel, timeouts and signals.
 *
 * Every call must end with a result or a `VMError`; a closure called
 * through a VM that did not make it, or after its VM was disposed, must be
 * refused (a result is a "wrong result"), and one called in its own VM
 * must return what it captured. After the case every VM holds no memory.
 *
 * @module
 */

import {
  type Closure,
  ExecBuilder,
  Executable,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../../mod.ts";
import { addSpin } from "../_hostile_functions.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 3000;

const FORMS: readonly VirtualMachineOptions[] = [
  {},
  { dispatch: "generic" },
  { mode: "compiled" },
];

/**
 * `spin()` loops forever; `echo(x) = x`; `make_spin()`, `make_echo(x)` and
 * `make_rec()` return closures; `call(c, ...)` invokes a closure;
 * `rec(c, n)` calls `c(c, n)` through `invoke_closure`, forever.
 */
function closureProgram(): Executable {
  const ib = new ExecBuilder();
  addSpin(ib);
  ib.function("echo", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("rec", { num_inputs: 2 }, () => {
    ib.emit_call("vm.builtin.make_tuple", [ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.invoke_closure", [ib.r(0), ib.r(0), ib.r(2)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  ib.function("make_spin", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("spin")], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("make_echo", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("echo"), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("make_rec", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("rec")], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("call0", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.invoke_closure", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("call_rec", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.invoke_closure", [ib.r(0), ib.r(0), ib.imm(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  return Executable.load(ib.get().save());
}

/** Runs `cases` closure cases from `rand`'s sequence. */
export async function closureFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("closures");
  const ex = closureProgram();
  for (const [i, seed] of caseSeeds(rand, cases)) {
    const caseRand = new Random(seed);
    report.tried++;
    const where = `case ${i}`;
    const vms = Array.from(
      { length: caseRand.between(2, 3) },
      () =>
        new VirtualMachine(ex, undefined, {
          ...caseRand.pick(FORMS),
          maxCallDepth: caseRand.pick([1000, 1000, 50, 7]),
          maxMemoryBytes: caseRand.pick([1 << 20, 1 << 12]),
          fuel: 100_000,
          timeoutMs: 500,
        }),
    );
    const maker = vms[0];
    const captured = caseRand.int(1000);
    const t0 = performance.now();
    try {
      const kind = caseRand.pick(["spin", "echo", "rec"] as const);
      const made = kind === "echo"
        ? maker.invoke<Closure>("make_echo", captured)
        : maker.invoke<Closure>(kind === "spin" ? "make_spin" : "make_rec");
      const closure = await made;
      const disposed = caseRand.chance(0.15);
      if (disposed) maker.dispose();
      const caller = caseRand.chance(0.5) ? maker : caseRand.pick(vms.slice(1));
      const limits = {
        fuel: caseRand.pick([undefined, 10, 1000]),
        timeoutMs: caseRand.pick([undefined, 0, 20]),
        signal: caseRand.chance(0.1) ? AbortSignal.abort("stop") : undefined,
      };
      const limited = caller.with(limits);
      const call = caseRand.pick([
        () => limited.invoke_closure(closure, ...(kind === "rec" ? [closure, 0] : [])),
        () => limited.invoke(kind === "rec" ? "call_rec" : "call0", closure),
      ]);
      const outcome = await settle(call(), HANG_MS);
      const ms = performance.now() - t0;
      const foreign = caller !== maker || disposed;
      if (outcome === "hang" || ms > HANG_MS) {
        recordBug(report, "hangs", `${where}: ${kind}, ${ms.toFixed(0)} ms`);
      } else if ("error" in outcome) {
        if (outcome.error instanceof VMError) report.rejected++;
        else {recordBug(
            report,
            "otherExceptions",
            `${where}: ${String(outcome.error).slice(0, 200)}`,
          );}
      } else {
        report.loaded++;
        if (foreign) {
          recordBug(report, "wrong", `${where}: a ${kind} closure ran outside its VM`);
        } else if (kind !== "echo" || outcome.value !== captured) {
          recordBug(report, "wrong", `${where}: ${kind} returned ${String(outcome.value)}`);
        }
      }
      closure.dispose();
    } catch (e) {
      recordBug(report, "otherExceptions", `${where}: ${String(e).slice(0, 200)}`);
    }
    for (const vm of vms) {
      const live = vm.memory_stats().liveBytes;
      if (live !== 0) recordBug(report, "leaks", `${where}: ${live} bytes left in a VM`);
      vm.dispose();
    }
  }
  return report;
}

/**
 * Fuzz family "hostile": packed functions that misbehave in every way a
 * JavaScript function can, called from small random programs in a random
 * dispatch form, under a fuel budget, a timeout and an abort signal:
 *
 * - they throw odd values: a revoked Proxy, an Error whose `message` getter
 *   throws, an object whose `toString` throws, a Proxy whose prototype trap
 *   throws, `null`, `undefined`, symbols;
 * - they return odd values: a revoked Proxy, a tensor already freed,
 *   thenables that resolve later (to numbers or fresh tensors), reject with
 *   odd values, throw from `then` or from a `then` getter, settle twice, or
 *   never settle, and Promises that never settle or resolve to any of these;
 * - they re-enter the VM (another invocation, from inside a call) and abort
 *   the call's own signal.
 *
 * A call must end with a result or a `VMError` (a "rejection"); anything else
 * is an "other exception". Once every Promise the case started has settled,
 * the VM must hold no memory and the host no more than before ("leaks"); a
 * case over `HANG_MS` is a hang: a Promise that never settles must not keep
 * a call waiting past its timeout.
 *
 * @module
 */

import {
  cpu,
  ExecBuilder,
  type Executable,
  NDArray,
  registerFunc,
  tensor,
  VirtualMachine,
  VMError,
} from "../../mod.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";
import { disposeResult } from "./values.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 2000;
/** Per call. */
const FUEL = 500, TIMEOUT_MS = 20, MEMORY_BYTES = 1 << 20;

/** What the hostile functions act on in the running case. */
const context: {
  vm: VirtualMachine | null;
  controller: AbortController;
  rand: Random;
  /** Work the hostile functions started that has not settled yet. */
  outstanding: Set<Promise<unknown>>;
  /** Invocations `reenter` started in this case. */
  reentries: number;
} = {
  vm: null,
  controller: new AbortController(),
  rand: new Random(1),
  outstanding: new Set(),
  reentries: 0,
};

function revoked(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

/** A value thrown or returned by the "odd" functions. */
function oddValue(): unknown {
  switch (context.rand.int(8)) {
    case 0:
      return revoked();
    case 1: {
      const e = new Error("x");
      Object.defineProperty(e, "message", {
        get() {
          throw new Error("message getter");
        },
      });
      return e;
    }
    case 2:
      return {
        toString() {
          throw new Error("toString");
        },
      };
    case 3:
      return new Proxy({}, {
        getPrototypeOf() {
          throw new Error("getPrototypeOf trap");
        },
        get() {
          throw new Error("get trap");
        },
      });
    case 4:
      return Symbol("odd");
    case 5:
      return context.rand.pick([null, undefined, 0, "", NaN]);
    case 6:
      return new RangeError("Maximum call stack size exceeded");
    default:
      return Object.create(null);
  }
}

/** Runs `work` after `ms`, counted as outstanding until it has run. */
function later<T>(ms: number, work: () => T): Promise<T> {
  const p = new Promise<T>((resolve, reject) =>
    setTimeout(() => {
      try {
        resolve(work());
      } catch (e) {
        reject(e);
      }
    }, ms)
  );
  const tracked = p.finally(() => context.outstanding.delete(tracked));
  tracked.catch(() => {});
  context.outstanding.add(tracked);
  return p;
}

/** A fresh tensor in the running VM's memory (a floating result, as a kernel makes). */
function freshTensor(): NDArray {
  const t = NDArray.empty([4], "float32", cpu());
  (t.cpuView() as Float32Array).fill(1);
  return t;
}

/** The hostile packed functions, by name. */
const HOSTILE: Record<string, (...args: unknown[]) => unknown> = {
  "fuzz.hostile.throw_odd": () => {
    throw oddValue();
  },
  "fuzz.hostile.return_odd": () => oddValue(),
  "fuzz.hostile.reject_odd": () => Promise.reject(oddValue()),
  "fuzz.hostile.return_freed": () => {
    const t = freshTensor();
    t.kill();
    return t;
  },
  "fuzz.hostile.thenable_value": (x) => ({
    then(resolve: (v: unknown) => void) {
      later(context.rand.int(3), () => resolve(x));
    },
  }),
  "fuzz.hostile.thenable_tensor": () => {
    const t = freshTensor(); // made now, in the VM's memory, handed over later
    return {
      then(resolve: (v: unknown) => void) {
        later(context.rand.int(3), () => resolve(t));
      },
    };
  },
  "fuzz.hostile.thenable_reject": () => ({
    then(_: unknown, reject: (e: unknown) => void) {
      later(0, () => reject(oddValue()));
    },
  }),
  "fuzz.hostile.thenable_getter": () => ({
    get then() {
      throw oddValue();
    },
  }),
  "fuzz.hostile.thenable_throws": () => ({
    then() {
      throw oddValue();
    },
  }),
  "fuzz.hostile.thenable_twice": (x) => ({
    then(resolve: (v: unknown) => void, reject: (e: unknown) => void) {
      resolve(x);
      reject(oddValue());
      resolve(revoked());
    },
  }),
  "fuzz.hostile.thenable_never": () => ({ then() {} }),
  "fuzz.hostile.promise_never": () => new Promise(() => {}),
  "fuzz.hostile.promise_odd": () => later(context.rand.int(3), () => oddValue()),
  "fuzz.hostile.promise_tensor": () => {
    const t = freshTensor();
    return later(context.rand.int(3), () => t);
  },
  "fuzz.hostile.promise_freed": () => {
    const t = freshTensor();
    return later(1, () => {
      t.kill();
      return t;
    });
  },
  "fuzz.hostile.reenter": (x) => {
    const vm = context.vm;
    // A few per case: each is a new invocation, which may re-enter again (host code that
    // starts calls without end is the host's own loop, not the VM's).
    if (vm === null || context.reentries++ >= 4) return null;
    const p = vm.invoke("leaf", x);
    const tracked = p.then(disposeResult, () => {}).finally(() =>
      context.outstanding.delete(tracked)
    );
    context.outstanding.add(tracked);
    return context.rand.chance(0.5) ? p : 1;
  },
  "fuzz.hostile.abort": (x) => {
    context.controller.abort(oddValue());
    return x;
  },
  "fuzz.hostile.slow": (x) => later(context.rand.int(4), () => x),
  "fuzz.hostile.lt": (a, b) => (a as number) < (b as number),
  "fuzz.hostile.inc": (a) => (a as number) + 1,
};

let registered = false;
function registerHostile(): void {
  if (registered) return;
  registered = true;
  for (const [name, fn] of Object.entries(HOSTILE)) registerFunc(name, fn, { override: true });
}

/** Hostile functions a program calls; the never-settling ones rarely (each costs a timeout). */
function pickHostile(rand: Random): string {
  if (rand.chance(0.03)) {
    return rand.pick(["fuzz.hostile.promise_never", "fuzz.hostile.thenable_never"]);
  }
  return rand.pick(
    Object.keys(HOSTILE).filter((n) =>
      !n.endsWith("_never") && !n.endsWith(".lt") && !n.endsWith(".inc")
    ),
  );
}

/**
 * `main(x)` and `leaf(x)`: calls to hostile functions mixed with tensor ops,
 * tuples and copies, sometimes inside a loop that only fuel ends.
 */
function hostileProgram(rand: Random): Executable {
  const ib = new ExecBuilder();
  const body = (length: number, loop: boolean) => {
    let next = 1;
    const live = [0];
    if (loop) ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(next++) });
    const counter = next - 1;
    const top = loop ? 1 : 0;
    for (let k = 0; k < length; k++) {
      const a = ib.r(rand.pick(live)), b = ib.r(rand.pick(live));
      const dst = next++;
      switch (rand.int(5)) {
        case 0:
        case 1:
          ib.emit_call(pickHostile(rand), [a], { dst: ib.r(dst) });
          break;
        case 2:
          ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(dst) });
          break;
        case 3:
          ib.emit_call("vm.builtin.make_tuple", [a, b], { dst: ib.r(dst) });
          break;
        default:
          ib.emit_call("vm.builtin.copy", [a], { dst: ib.r(dst) });
      }
      live.push(dst);
    }
    if (loop) {
      // counter += 1; if counter < 1000 go back to the top (fuel ends it first, or not).
      ib.emit_call("fuzz.hostile.inc", [ib.r(counter)], { dst: ib.r(counter) });
      ib.emit_call("fuzz.hostile.lt", [ib.r(counter), ib.imm(1000)], { dst: ib.r(next) });
      ib.emit_if(ib.r(next), 2);
      ib.emit_goto(top - (top + length + 3));
    }
    ib.emit_ret(ib.r(live[live.length - 1]));
  };
  ib.function("main", { num_inputs: 1 }, () => body(rand.between(1, 6), rand.chance(0.2)));
  ib.function("leaf", { num_inputs: 1 }, () => body(rand.between(1, 3), false));
  return ib.get({ liveness: rand.chance(0.8) });
}

const FORMS = [{}, { dispatch: "generic" }, { mode: "compiled" }] as const;

/** Runs `cases` hostile cases from `rand`'s sequence. */
export async function hostileFamily(rand: Random, cases: number): Promise<FamilyReport> {
  registerHostile();
  const report = emptyReport("hostile");
  // A rejection nobody handles is a Promise the VM dropped: an "other exception".
  let current = "";
  const onUnhandled = (event: PromiseRejectionEvent) => {
    event.preventDefault();
    recordBug(
      report,
      "otherExceptions",
      `${current}: unhandled rejection: ${describeRaw(event.reason)}`,
    );
  };
  globalThis.addEventListener("unhandledrejection", onUnhandled);
  try {
    await runCases(rand, cases, report, (where) => current = where);
  } finally {
    // Let rejections of the last case surface before the listener goes.
    await new Promise((resolve) => setTimeout(resolve, 10));
    globalThis.removeEventListener("unhandledrejection", onUnhandled);
  }
  return report;
}

async function runCases(
  rand: Random,
  cases: number,
  report: FamilyReport,
  setCase: (where: string) => void,
): Promise<void> {
  const host = defaultAllocator(cpu());
  for (const [i, seed] of caseSeeds(rand, cases)) {
    const r = new Random(seed);
    report.tried++;
    const where = `case ${i}`;
    setCase(where);
    const t0 = performance.now();
    const ex = hostileProgram(r);
    const form = r.pick(FORMS);
    context.rand = r;
    context.controller = new AbortController();
    context.reentries = 0;
    const vm = new VirtualMachine(ex, cpu(), {
      ...form,
      maxMemoryBytes: MEMORY_BYTES,
      timeoutMs: TIMEOUT_MS, // calls that re-enter get a timeout too
    });
    context.vm = vm;
    const hostBefore = host.stats().liveBytes;
    const x = tensor([1, 2, 3, 4]);
    const limits = { fuel: FUEL, timeoutMs: TIMEOUT_MS, signal: context.controller.signal };
    // Not awaited directly: a VM that handed back a thenable would make the await adopt it.
    const call = vm.with(limits).invoke("main", x);
    const outcome = await settle(call, HANG_MS);
    if (outcome === "hang") {
      recordBug(report, "hangs", `${where} (${JSON.stringify(form)}): the call never settled`);
    } else if ("value" in outcome) {
      disposeResult(outcome.value);
      report.loaded++;
    } else if (isVMError(outcome.error)) {
      report.rejected++;
    } else {
      recordBug(
        report,
        "otherExceptions",
        `${where} (${JSON.stringify(form)}): ${describeRaw(outcome.error)}`,
      );
    }
    // What the hostile functions started settles within a few milliseconds.
    while (context.outstanding.size > 0) {
      if (await settle(Promise.allSettled([...context.outstanding]), HANG_MS) === "hang") {
        recordBug(report, "hangs", `${where}: work it started never settled`);
        context.outstanding.clear();
      }
    }
    context.vm = null;
    const live = vm.memory_stats().liveBytes;
    vm.dispose();
    ex.dispose();
    x.dispose();
    const hostLeft = host.stats().liveBytes - hostBefore;
    if (live !== 0 || hostLeft > 0) {
      recordBug(
        report,
        "leaks",
        `${where} (${JSON.stringify(form)}): ${live} bytes held by the VM, ${hostLeft} outside`,
      );
    }
    const elapsed = performance.now() - t0;
    if (elapsed > HANG_MS) recordBug(report, "hangs", `${where}: ${elapsed.toFixed(0)} ms`);
  }
}

/** `e instanceof VMError`, false for a value whose prototype cannot be read (a revoked Proxy). */
function isVMError(e: unknown): boolean {
  try {
    return e instanceof VMError;
  } catch {
    return false;
  }
}

/** A raw error, described without trusting it. */
function describeRaw(e: unknown): string {
  try {
    return String(e).slice(0, 200);
  } catch {
    return "an error that cannot be shown";
  }
}

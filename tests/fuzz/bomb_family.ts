/**
 * Fuzz family "bombs": programs crafted to exhaust something, each with
 * random sizes, in a random dispatch form, under a fuel budget, a timeout
 * and a memory limit:
 *
 * - registers: recursion through functions of up to 20,000 registers
 *   (legitimately used), against `maxStackSlots`;
 * - ranges: function tables whose entries claim any start, end, argument
 *   count or register file (the verifier must reject them at once);
 * - sparse: one instruction naming a register as high as 2^24 - 1, in a
 *   function of up to 2000 blocks (the VM renumbers it: construction stays
 *   linear in the file);
 * - branching: K `If`s over K live registers, K up to 4000 (construction
 *   must stay linear: the loader family's budget);
 * - recursion: endless self and mutual recursion, and exponential recursion;
 * - loops: endless loops of `Goto` and `If`;
 * - allocation: one request past the limit, a broadcast from small inputs,
 *   and a loop that keeps every tensor it makes;
 * - tuples: chains of up to a million nested tuples, dropped or returned;
 * - constants: a constant claiming more bytes than the file holds, and a
 *   real one of up to 8 MB.
 *
 * A case must end with a result, a `LoadError` or a `VMError`; anything else
 * is an "other exception". It must take less than `HANG_MS` (construction:
 * the loader family's budget, else "over budget"), and leave the VM holding
 * no memory and the host what it held before ("leaks").
 *
 * @module
 */

import {
  cpu,
  ExecBuilder,
  Executable,
  type FunctionInfo,
  LoadError,
  registerFunc,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../../mod.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { saveProgram } from "../../program/serialize.ts";
import { branchingProgram } from "../../bench/construction_bench.ts";
import { constructionBudgetMs } from "./loader_family.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";
import { disposeResult } from "./values.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 5000;

registerFunc("fuzz.bomb.lt", (a: number, b: number) => a < b, { override: true });
registerFunc("fuzz.bomb.inc", (a: number) => a + 1, { override: true });
registerFunc("fuzz.bomb.sub", (a: number, b: number) => a - b, { override: true });
registerFunc("fuzz.bomb.add", (a: number, b: number) => a + b, { override: true });

/** A crafted case: bytes or an executable, what to call, and the VM's options. */
interface Bomb {
  kind: string;
  /** Saved bytes to load, or an executable built directly. */
  program: Uint8Array | Executable;
  /** The function to call and its arguments (none: only load and construct). */
  call?: { name: string; args: () => unknown[] };
  options: VirtualMachineOptions;
  /** The call's fuel (default 100,000). */
  fuel?: number;
}

/** `down(n)`: recursion n deep through a function holding `extra` more registers. */
function registersBomb(rand: Random): Bomb {
  const extra = rand.chance(0.02) ? 20_000 : rand.pick([0, 10, 100, 1000, 3000]);
  const ib = new ExecBuilder();
  ib.function("down", { num_inputs: 1 }, () => {
    ib.emit_call("fuzz.bomb.lt", [ib.r(0), ib.imm(1)], { dst: ib.r(1) });
    ib.emit_if(ib.r(1), 2);
    ib.emit_ret(ib.r(0));
    for (let k = 0; k < extra; k++) {
      ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(3 + k) });
    }
    ib.emit_call("fuzz.bomb.sub", [ib.r(0), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_call("down", [ib.r(2)], { dst: ib.r(3 + extra) });
    for (let k = 0; k < extra; k++) ib.emit_call("vm.builtin.copy", [ib.r(3 + k)]);
    ib.emit_ret(ib.r(3 + extra));
  });
  const depth = rand.pick([10, 100, 900, 5000]);
  return {
    kind: "registers",
    program: ib.get(),
    call: { name: "down", args: () => [depth] },
    options: {
      maxStackSlots: rand.pick([undefined, 1e5, 1e6]),
      maxCallDepth: rand.pick([undefined, 10_000]),
    },
  };
}

/** A function table whose entries claim anything. */
function rangesBomb(rand: Random): Bomb {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  const wild = [0, 1, 2, 3, 5, 2 ** 16, 2 ** 24, 2 ** 31, 2 ** 32 - 1];
  const functions: FunctionInfo[] = ex.functions.map((f) => ({ ...f }));
  for (let k = rand.between(1, 3); k > 0; k--) {
    const f = rand.pick(functions);
    const field = rand.pick(["start", "end", "numArgs", "registerFileSize"] as const);
    (f as unknown as Record<string, unknown>)[field] = rand.pick(wild);
  }
  return {
    kind: "ranges",
    program: saveProgram({ ...ex, functions }),
    call: { name: "main", args: () => [1] },
    options: {},
  };
}

/** A function of up to 2000 blocks that names one register as high as 2^24 - 1. */
function sparseBomb(rand: Random): Bomb {
  const blocks = rand.pick([1, 10, 300, 2000]);
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    for (let i = 0; i < blocks; i++) ib.emit_if(ib.r(0), 1);
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const built = ib.get();
  const high = rand.pick([2 ** 24 - 1, 2 ** 20, 65_536, 2]);
  const code = Float64Array.from(built.instrData);
  code[code.length - 6] = high; // the copy's destination
  code[code.length - 1] = high; // the register returned
  const functions = built.functions.map((f) =>
    f.kind === "vm" ? { ...f, registerFileSize: rand.chance(0.9) ? high + 1 : high + 2 } : f
  );
  return {
    kind: "sparse",
    program: saveProgram({ ...built, functions, instrData: code }),
    call: { name: "main", args: () => [rand.pick([0, 1])] },
    options: {},
  };
}

/** K `If`s over K live registers. */
function branchingBomb(rand: Random): Bomb {
  const k = rand.chance(0.02) ? 4000 : rand.pick([10, 100, 500, 1000, 2000]);
  return {
    kind: "branching",
    program: branchingProgram(k),
    call: { name: "branches", args: () => [rand.pick([1, 0, -1])] },
    options: {},
  };
}

/** Endless self or mutual recursion, or an exponential one. */
function recursionBomb(rand: Random): Bomb {
  const ib = new ExecBuilder();
  const shape = rand.int(3);
  if (shape === 0) {
    ib.function("f", { num_inputs: 1 }, () => {
      ib.emit_call("f", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
  } else if (shape === 1) {
    ib.declare_function("g", "vm");
    ib.function("f", { num_inputs: 1 }, () => {
      ib.emit_call("g", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    ib.function("g", { num_inputs: 1 }, () => {
      ib.emit_call("f", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
  } else {
    // fib(n): 2^n calls.
    ib.function("f", { num_inputs: 1 }, () => {
      ib.emit_call("fuzz.bomb.lt", [ib.r(0), ib.imm(2)], { dst: ib.r(1) });
      ib.emit_if(ib.r(1), 2);
      ib.emit_ret(ib.r(0));
      ib.emit_call("fuzz.bomb.sub", [ib.r(0), ib.imm(1)], { dst: ib.r(2) });
      ib.emit_call("f", [ib.r(2)], { dst: ib.r(3) });
      ib.emit_call("fuzz.bomb.sub", [ib.r(0), ib.imm(2)], { dst: ib.r(4) });
      ib.emit_call("f", [ib.r(4)], { dst: ib.r(5) });
      ib.emit_call("fuzz.bomb.add", [ib.r(3), ib.r(5)], { dst: ib.r(6) });
      ib.emit_ret(ib.r(6));
    });
  }
  return {
    kind: "recursion",
    program: ib.get(),
    call: { name: "f", args: () => [rand.pick([10, 25, 40])] },
    options: {},
  };
}

/** Endless loops of `Goto` and `If`. */
function loopBomb(rand: Random): Bomb {
  const ib = new ExecBuilder();
  ib.function("spin", { num_inputs: 1 }, () => {
    if (rand.chance(0.5)) {
      ib.emit_goto(1);
      ib.emit_goto(-1);
    } else {
      ib.emit_call("fuzz.bomb.inc", [ib.r(0)], { dst: ib.r(0) });
      ib.emit_call("fuzz.bomb.lt", [ib.imm(0), ib.r(0)], { dst: ib.r(1) });
      ib.emit_if(ib.r(1), -2);
    }
    ib.emit_ret(ib.r(0));
  });
  return { kind: "loops", program: ib.get(), call: { name: "spin", args: () => [1] }, options: {} };
}

/** Requests past the memory limit: one big one, a broadcast, or a hoard built in a loop. */
function allocationBomb(rand: Random): Bomb {
  const ib = new ExecBuilder();
  const shape = rand.int(3);
  let args: () => unknown[];
  if (shape === 0) {
    ib.function("alloc", { num_inputs: 1 }, () => {
      ib.emit_call("vm.builtin.alloc_shape_heap", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const size = rand.pick([2 ** 30 - 1, 2 ** 21, 2 ** 40, 1000]);
    args = () => [size];
  } else if (shape === 1) {
    ib.function("alloc", { num_inputs: 2 }, () => {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    const n = rand.pick([1000, 4096, 24576]);
    args = () => [
      tensor(new Float32Array(n), { shape: [n, 1] }),
      tensor(new Float32Array(n), { shape: [1, n] }),
    ];
  } else {
    // hoard = (hoard, x + x) forever: every tensor stays reachable.
    ib.function("alloc", { num_inputs: 1 }, () => {
      ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(1) });
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(2) }); // 1
      ib.emit_call("vm.builtin.make_tuple", [ib.r(1), ib.r(2)], { dst: ib.r(1) });
      ib.emit_goto(-2);
      ib.emit_ret(ib.r(1));
    });
    const n = rand.pick([16, 1024, 65536]);
    args = () => [tensor(new Float32Array(n))];
  }
  return {
    kind: "allocation",
    program: ib.get(),
    call: { name: "alloc", args },
    options: { maxMemoryBytes: rand.pick([1 << 16, 1 << 20, 1 << 24]) },
  };
}

/** A chain of nested tuples, dropped or returned. */
function tupleBomb(rand: Random): Bomb {
  const ib = new ExecBuilder();
  ib.function("nest", { num_inputs: 3 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(3) });
    ib.emit_call("fuzz.bomb.lt", [ib.r(3), ib.r(0)], { dst: ib.r(4) });
    ib.emit_if(ib.r(4), 4);
    ib.emit_call("vm.builtin.make_tuple", [ib.r(1)], { dst: ib.r(1) });
    ib.emit_call("fuzz.bomb.inc", [ib.r(3)], { dst: ib.r(3) });
    ib.emit_goto(-4);
    ib.emit_if(ib.r(2), 2);
    ib.emit_ret(ib.r(1));
    ib.emit_ret(ib.r(3));
  });
  const n = rand.chance(0.02) ? 1_000_000 : rand.pick([10, 999, 1001, 20_000, 100_000]);
  const keep = rand.pick([0, 1]);
  return {
    kind: "tuples",
    program: ib.get(),
    call: { name: "nest", args: () => [n, tensor([1, 2]), keep] },
    options: { maxCallDepth: 10 },
    fuel: 1e7,
  };
}

/** `shape_of` a constant of `elements` float32s, saved; built once per size (the builder holds it). */
const constantPrograms = new Map<number, Uint8Array>();
function constantProgram(elements: number): Uint8Array {
  let bytes = constantPrograms.get(elements);
  if (bytes === undefined) {
    const ib = new ExecBuilder();
    using t = tensor(new Float32Array(elements));
    ib.function("main", { num_inputs: 0 }, () => {
      ib.emit_call("vm.builtin.shape_of", [t], { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    });
    using ex = ib.get();
    bytes = ex.save();
    constantPrograms.set(elements, bytes);
  }
  return bytes;
}

/** A constant that claims more than the file holds, or a real one of up to 8 MB. */
function constantBomb(rand: Random): Bomb {
  const elements = rand.chance(0.1) ? 2 ** 21 : 12345;
  const bytes = constantProgram(elements).slice();
  if (rand.chance(0.7)) {
    // Find the dimension (an f64) and claim far more, or claim another byte length.
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let at = 0; at + 12 <= bytes.length; at++) {
      if (view.getFloat64(at, true) !== elements) continue;
      if (rand.chance(0.5)) {
        view.setFloat64(at, rand.pick([2 ** 40, 2 ** 52, elements * 1024]), true);
      } else view.setUint32(at + 8, rand.pick([0xffffffff, 0x7fffffff, elements * 8]), true);
      break;
    }
  }
  return {
    kind: "constants",
    program: bytes,
    call: { name: "main", args: () => [] },
    options: { maxMemoryBytes: 1 << 16 },
  };
}

const BOMBS = [
  registersBomb,
  sparseBomb,
  rangesBomb,
  branchingBomb,
  recursionBomb,
  loopBomb,
  allocationBomb,
  tupleBomb,
  constantBomb,
];

const FORMS = [{}, { dispatch: "generic" }, { mode: "compiled" }] as const;

const timeByKind: Record<string, number> = {};

/** Runs `cases` bombs from `rand`'s sequence. */
export async function bombFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("bombs");
  const host = defaultAllocator(cpu());
  for (const [i, seed] of caseSeeds(rand, cases)) {
    const r = new Random(seed);
    report.tried++;
    const t0 = performance.now();
    const bomb = r.pick(BOMBS)(r);
    const hostBefore = host.stats().liveBytes; // after the bomb: a builder may hold its constants
    const form = r.pick(FORMS);
    const where = `case ${i} (${bomb.kind}, ${JSON.stringify(form)})`;
    const other = (stage: string, e: unknown) =>
      recordBug(report, "otherExceptions", `${where} ${stage}: ${String(e).slice(0, 200)}`);
    let ex: Executable | undefined;
    try {
      ex = bomb.program instanceof Uint8Array ? Executable.load(bomb.program) : bomb.program;
    } catch (e) {
      if (e instanceof LoadError) report.rejected++;
      else other("load", e);
    }
    let vm: VirtualMachine | undefined;
    if (ex !== undefined) {
      const t1 = performance.now();
      try {
        vm = new VirtualMachine(ex, cpu(), { ...form, ...bomb.options });
      } catch (e) {
        if (e instanceof VMError) report.rejected++;
        else other("construct", e);
      }
      let ms = performance.now() - t1;
      if (vm !== undefined && ms > constructionBudgetMs(ex.instructionCount)) {
        // A garbage-collection pause of the whole test process can land in one construction
        // (seen under `deno task test`: a case that takes 3 ms alone took 200-460 ms there);
        // a construction that is really slow is slow again, so time a second one.
        const t2 = performance.now();
        new VirtualMachine(ex, cpu(), { ...form, ...bomb.options }).dispose();
        ms = Math.min(ms, performance.now() - t2);
      }
      if (ms > constructionBudgetMs(ex.instructionCount)) {
        recordBug(report, "overBudget", `${where}: ${ms.toFixed(0)} ms for ${ex.instructionCount}`);
      }
    }
    if (vm !== undefined && bomb.call !== undefined) {
      const args = bomb.call.args();
      const limits = { fuel: bomb.fuel ?? 100_000, timeoutMs: 2000 };
      const call = vm.with(limits).invoke(bomb.call.name, ...args);
      const outcome = await settle(call, HANG_MS);
      if (outcome === "hang") recordBug(report, "hangs", `${where}: the call never settled`);
      else if ("value" in outcome) {
        report.loaded++;
        disposeResult(outcome.value);
      } else if (outcome.error instanceof VMError) report.rejected++;
      else other("run", outcome.error);
      disposeResult(args);
      const live = vm.memory_stats().liveBytes;
      if (live !== 0) recordBug(report, "leaks", `${where}: the VM holds ${live} bytes`);
    }
    vm?.dispose();
    if (bomb.program instanceof Uint8Array) ex?.dispose(); // a built one is the bomb's, reused
    const hostLeft = host.stats().liveBytes - hostBefore;
    if (hostLeft > 0) {
      recordBug(report, "leaks", `${where}: ${hostLeft} bytes left outside the VM`);
    }
    const elapsed = performance.now() - t0;
    if (elapsed > HANG_MS) recordBug(report, "hangs", `${where}: ${elapsed.toFixed(0)} ms`);
    if (Deno.env.get("FUZZ_TIMES")) timeByKind[bomb.kind] = (timeByKind[bomb.kind] ?? 0) + elapsed;
  }
  if (Deno.env.get("FUZZ_TIMES")) console.error(timeByKind);
  return report;
}

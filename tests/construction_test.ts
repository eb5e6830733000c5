import { assert, assertEquals } from "@std/assert";
import { cpu, ExecBuilder, registerFunc, VirtualMachine } from "../mod.ts";
import { computeReleases } from "../program/liveness.ts";
import { loadReport, type VirtualMachineOptions } from "../vm/virtual_machine.ts";
import { branchingInstructions, branchingProgram } from "../bench/construction_bench.ts";

registerFunc("test.build.f", (...args: unknown[]) => args.length, { override: true });

Deno.test("liveness of the branching program: each exit releases once, on entry", () => {
  const k = 40;
  const ex = branchingProgram(k);
  const { after, onEntry } = computeReleases(ex, ex.functions[0]);
  const exit = branchingInstructions(k) - 1;
  assertEquals(onEntry[exit], Array.from({ length: k }, (_, i) => 1 + i), "the exit releases all");
  assertEquals(onEntry[2 * k], [0], "the adds release the input");
  assertEquals(onEntry.filter((l) => l !== null).length, 2, "no other block releases on entry");
  assertEquals(after[k], null, "the first If's register stays live for the adds");
});

const FORMS: Record<string, VirtualMachineOptions> = {
  specialized: { execution: "specialized" },
  compiled: { execution: "compiled" },
};

/**
 * Characters of generated JavaScript allowed per code word. The statements
 * emitted per instruction are bounded by its size, and releases on block
 * entry are passed as data (specialized dispatch) or written once per block,
 * within a bound per word (compiled mode), so the source is linear in the
 * bytecode: 20 to 50 characters per word on these programs.
 */
const SOURCE_CHARS_PER_WORD = 150;

Deno.test("generated source stays within a constant factor of the bytecode on the branching program", async () => {
  // Before, the exit's K releases were written out on each of the K jump edges:
  // K = 300 made 8.0 MB of source, 1,800 characters per code word.
  for (const k of [50, 300]) {
    const ex = branchingProgram(k);
    for (const [form, options] of Object.entries(FORMS)) {
      const vm = new VirtualMachine(ex, cpu(), options);
      // Compiled mode writes the loop of a function it could not compile on its first call.
      assertEquals(await vm.invoke("branches", 1), k * (k + 1) / 2);
      const [report] = loadReport(vm);
      assert(report.runsAs !== "generic", `${form}, K=${k}: runs as ${report.runsAs}`);
      assert(
        report.sourceLength <= SOURCE_CHARS_PER_WORD * report.words,
        `${form}, K=${k}: ${report.sourceLength} characters for ${report.words} words`,
      );
    }
  }
});

Deno.test("a function whose exits release more than it can write out is not compiled; its source stays linear", async () => {
  // K registers live across K Ifs, each jumping to its own exit, which ends all K lives
  // and then calls once: K² releases on the entries of K blocks, for about 20K words of code.
  const k = 100;
  const ib = new ExecBuilder();
  ib.function("exits", { num_inputs: 1 }, () => {
    for (let i = 0; i < k; i++) ib.emit_call("test.build.f", [ib.r(0)], { dst: ib.r(1 + i) });
    for (let i = 0; i < k; i++) ib.emit_if(ib.r(1 + i), k - i + 1 + 2 * i); // to exit i
    const all = Array.from({ length: k }, (_, i) => ib.r(1 + i));
    ib.emit_call("test.build.f", all, { dst: ib.r(k + 1) });
    ib.emit_ret(ib.r(k + 1));
    for (let i = 0; i < k; i++) {
      ib.emit_call("test.build.f", [ib.r(0)], { dst: ib.r(k + 1) }); // exit i
      ib.emit_ret(ib.r(k + 1));
    }
  });
  const ex = ib.get();
  const releases = computeReleases(ex, ex.functions[0]).onEntry.reduce(
    (n, list) => n + (list?.length ?? 0),
    0,
  );
  assertEquals(releases, k * k + 1);
  for (const [form, options] of Object.entries(FORMS)) {
    const vm = new VirtualMachine(ex, cpu(), options);
    assertEquals(await vm.invoke("exits", 7), k, `${form}: all Ifs fall through`);
    const [report] = loadReport(vm);
    assertEquals(report.runsAs, "specialized", form);
    assert(report.sourceLength <= SOURCE_CHARS_PER_WORD * report.words, form);
  }
});

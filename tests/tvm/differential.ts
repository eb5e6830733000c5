/**
 * The differential check against TVM: each description is built by TVM's
 * ExecBuilder (in one Python process for the batch) and by relaxvm's, and
 * the two must agree on the executable's bytes (TVM's format), `as_text()`,
 * `as_python()`, `stats()` and, for programs that call only builtins both
 * have, the results of running them. relaxvm must also load TVM's bytes and
 * write them back unchanged.
 *
 * @module
 */

import { Executable, VirtualMachine } from "../../mod.ts";
import {
  buildWithRelaxvm,
  inputOf,
  type ProgramDesc,
  sameValue,
  tagged,
  toHex,
  type TvmOutput,
  type Value,
} from "./description.ts";
import { buildWithTvm } from "./tvm_python.ts";

/** What the differential run found; every count is of programs. */
export interface Figures {
  /** The TVM release compared against. */
  tvm: string;
  tried: number;
  /** Built by both builders. */
  built: number;
  bytes: number;
  text: number;
  python: number;
  /** Programs whose stats TVM can print (not a Float constant), and of those, identical. */
  statsComparable: number;
  stats: number;
  /** TVM's bytes loaded by relaxvm and saved back unchanged. */
  roundTrip: number;
  /** The bytes relaxvm wrote, loaded by TVM. */
  loadedByTvm: number;
  /** Run programs whose relaxvm-written file TVM ran to the results of its own. */
  ranByTvm: number;
  /** Programs run in both VMs, and of those, identical results for every run. */
  runs: number;
  results: number;
  /** The first few differences, for the failure message. */
  mismatches: string[];
}

/** Runs one program's `runs` in relaxvm's VM (on TVM's bytes, loaded), tagged as TVM tags them. */
export async function runInRelaxvm(ex: Executable, runs: [string, Value[]][]): Promise<Value[]> {
  using vm = new VirtualMachine(ex);
  const out: Value[] = [];
  for (const [func, inputs] of runs) {
    try {
      out.push(tagged(await vm.invoke(func, ...inputs.map(inputOf))));
    } catch (e) {
      out.push(["error", (e as Error).message]);
    }
  }
  return out;
}

/** Compares relaxvm with TVM's output for each program. */
export async function compare(
  programs: ProgramDesc[],
  tvm: TvmOutput[],
  version: string,
): Promise<Figures> {
  const f: Figures = {
    tvm: version,
    tried: programs.length,
    built: 0,
    bytes: 0,
    text: 0,
    python: 0,
    statsComparable: 0,
    stats: 0,
    roundTrip: 0,
    loadedByTvm: 0,
    ranByTvm: 0,
    runs: 0,
    results: 0,
    mismatches: [],
  };
  const note = (p: ProgramDesc, what: string) => {
    if (f.mismatches.length < 10) f.mismatches.push(`${p.name}: ${what}`);
  };
  for (const [i, p] of programs.entries()) {
    const t = tvm[i];
    let ours: Executable;
    try {
      ours = buildWithRelaxvm(p);
    } catch (e) {
      note(
        p,
        `relaxvm cannot build it: ${(e as Error).message}${
          t.build_error ? ` (nor TVM: ${t.build_error})` : ""
        }`,
      );
      continue;
    }
    try {
      if (t.build_error !== undefined) {
        note(p, `TVM cannot build it: ${t.build_error}`);
        continue;
      }
      f.built++;
      const bytes = ours.save({ format: "tvm" });
      if (toHex(bytes) === t.bytes) f.bytes++;
      else note(p, "bytes differ");
      if (ours.as_text() === t.as_text) f.text++;
      else note(p, `as_text differs:\n${ours.as_text()}\nTVM:\n${t.as_text}`);
      if (ours.as_python() === t.as_python) f.python++;
      else note(p, `as_python differs:\n${ours.as_python()}\nTVM:\n${t.as_python}`);
      if (t.stats !== undefined) {
        f.statsComparable++;
        if (ours.stats() === t.stats) f.stats++;
        else note(p, `stats differ:\n${ours.stats()}\nTVM:\n${t.stats}`);
      }
      if (t.load_error !== undefined) note(p, `TVM cannot load its own bytes: ${t.load_error}`);
      if (t.relaxvm_loaded === true) f.loadedByTvm++;
      else note(p, `TVM cannot load relaxvm's bytes: ${t.relaxvm_load_error}`);
      if (p.runs !== undefined && t.relaxvm_results !== undefined) {
        if (JSON.stringify(t.relaxvm_results) === JSON.stringify(t.results)) f.ranByTvm++;
        else note(p, `TVM runs relaxvm's file to other results`);
      }
      let loaded: Executable | undefined;
      try {
        loaded = Executable.load(Uint8Array.from(t.bytes!.match(/../g)!, (h) => parseInt(h, 16)));
        if (toHex(loaded.save({ format: "tvm" })) === t.bytes) f.roundTrip++;
        else note(p, "TVM -> relaxvm -> TVM changes the bytes");
        if (p.runs !== undefined && t.results !== undefined) {
          f.runs++;
          const results = await runInRelaxvm(loaded, p.runs);
          if (results.every((r, k) => sameValue(t.results![k], r))) f.results++;
          else {note(
              p,
              `results differ: ${JSON.stringify(results)} TVM: ${JSON.stringify(t.results)}`,
            );}
        }
      } catch (e) {
        note(p, `relaxvm cannot load TVM's bytes: ${(e as Error).message}`);
      } finally {
        loaded?.dispose();
      }
    } finally {
      ours.dispose();
    }
  }
  return f;
}

/**
 * Builds `programs` with relaxvm (its TVM-format bytes go along, for TVM to
 * load and run too) and with TVM, and compares.
 */
export async function differential(programs: ProgramDesc[]): Promise<Figures> {
  const withBytes = programs.map((p) => {
    try {
      using ex = buildWithRelaxvm(p);
      return { ...p, relaxvm_bytes: toHex(ex.save({ format: "tvm" })) };
    } catch {
      return p; // compare() reports it
    }
  });
  const batch = await buildWithTvm(withBytes);
  return compare(programs, batch.programs, batch.tvm);
}

/** The figures as a table, each count as a share of the programs it is out of. */
export function formatFigures(f: Figures): string {
  const pct = (n: number, of: number) => of === 0 ? "n/a" : `${(100 * n / of).toFixed(2)}%`;
  const row = (what: string, n: number, of: number) =>
    `  ${what.padEnd(40)} ${String(n).padStart(6)} / ${String(of).padEnd(6)} ${pct(n, of)}`;
  return [
    `Differential against TVM ${f.tvm}: ${f.tried} programs tried`,
    row("built by both", f.built, f.tried),
    row("identical bytes (TVM format)", f.bytes, f.built),
    row("identical as_text()", f.text, f.built),
    row("identical as_python()", f.python, f.built),
    row("identical stats() (TVM prints)", f.stats, f.statsComparable),
    row("TVM -> relaxvm -> TVM identical", f.roundTrip, f.built),
    row("relaxvm's file loaded by TVM", f.loadedByTvm, f.built),
    row("relaxvm's file run by TVM, same results", f.ranByTvm, f.runs),
    row("identical results (run programs)", f.results, f.runs),
    `  (stats: TVM throws on a Float constant in ${f.built - f.statsComparable} programs)`,
  ].join("\n");
}

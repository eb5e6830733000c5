/**
 * GPT-small's memory, the VM's count beside what it leaves out: the VM's
 * peak (`memory_stats()`: the tensors in its allocators, that is the weights
 * its tensor cache loaded, the KV caches, activations), on the CPU the
 * WebAssembly kernels' resident copies of the sealed weights
 * (kernels/cpu/wasm/resident.ts), and what the tensor-cache load costs the
 * process (the resident set's growth and high-water mark over
 * `loadTensorCache` from files). Each device runs in a fresh process, with
 * no TF.js beside it; the weights are written to a temporary directory
 * first, by this process:
 *
 * ```sh
 * deno run -A bench/gpt_memory.ts
 * ```
 *
 * The resident-set figures include the process's own noise (code compiled
 * on first use, garbage not yet collected); the VM peak and the resident
 * copies are exact counts.
 *
 * @module
 */

import { cpu, loadTensorCache, TensorCache, webgpu } from "../mod.ts";
import { SMALL } from "../models/gpt/config.ts";
import { buildGPT } from "../models/gpt/program.ts";
import { argmax, GPTSession } from "../models/gpt/session.ts";
import { encodeWeights, makeWeights, paramCount } from "../models/gpt/weights.ts";
import { writeFiles } from "../builtins/tensor_cache/cache_files.ts";
import { cpuResidentStats } from "../devices/cpu_device.ts";
import { residentRegion } from "../kernels/cpu/wasm/resident.ts";
import { RESIDENT_BASE } from "../kernels/cpu/wasm/runtime.ts";

const MiB = (b: number) => (b / 2 ** 20).toFixed(1);

/** The process's resident set and its high-water mark, in bytes (Linux). */
function residentSet(): { rss: number; hwm: number } {
  const status = Deno.readTextFileSync("/proc/self/status");
  const field = (k: string) => Number(status.match(new RegExp(`${k}:\\s+(\\d+)`))?.[1]) * 1024;
  return { rss: field("VmRSS"), hwm: field("VmHWM") };
}

/**
 * In a fresh process: the tensor-cache load's own cost in process memory
 * (the resident set's growth and high-water mark over `loadTensorCache`),
 * then a GPT session's exact counts: the VM's peak and, on the CPU, the
 * kernels' resident weight copies after a prefill and 16 decode steps.
 */
async function child(name: "cpu" | "webgpu", dir: string): Promise<void> {
  const c = SMALL;
  const device = name === "cpu" ? cpu() : await webgpu();
  const before = residentSet();
  let resetHwm = true;
  try {
    Deno.writeTextFileSync("/proc/self/clear_refs", "5");
  } catch {
    resetHwm = false;
  }
  const start = residentSet();
  const cache = new TensorCache();
  await loadTensorCache(dir, { cache, device });
  const loaded = residentSet();
  cache.clear();

  const s = await GPTSession.create(c, { device, executable: buildGPT(c), weights: dir });
  let token = argmax(await s.prefill(Array.from({ length: 16 }, (_, i) => (i * 7919) % c.vocab)));
  for (let i = 0; i < 16; i++) token = argmax(await s.decode(token));
  const weightBytes = paramCount(c) * 4;
  const modelBytes = weightBytes + 2 * c.layers * c.context * c.dModel * 4;
  const stats = s.vm.memory_stats(device);
  const peak = stats.peakBytes;
  // The CPU kernels' weight copies (kernels/cpu/wasm/resident.ts), outside the VM's peak.
  const resident = stats.residentBytes ?? 0;
  const session = residentSet();
  console.log(
    `gpt memory ${name}: VM peak ${MiB(peak)} MiB (${
      (peak / modelBytes).toFixed(3)
    }× weights + KV ${MiB(modelBytes)} MiB)${
      name === "cpu"
        ? `, + the kernels' resident weight copies ${MiB(resident)} MiB = ${
          MiB(peak + resident)
        } MiB (${((peak + resident) / modelBytes).toFixed(3)}×)`
        : ""
    }; loading the ${MiB(weightBytes)} MiB of weights from files: process +${
      MiB(loaded.rss - before.rss)
    } MiB, high-water +${
      resetHwm ? MiB(loaded.hwm - start.rss) : "?"
    } MiB; after the session's prefill and 16 decode steps: process +${
      MiB(session.rss - before.rss)
    } MiB, high-water +${resetHwm ? MiB(session.hwm - start.rss) : "?"} MiB`,
  );
  s.dispose();
  if (name !== "cpu") return;
  // Load, run and dispose the model again: the copies are given back with the weights and their
  // ranges reused, so the process does not grow per cycle (before, it did until 1.5 GiB).
  const afterFirst = cpuResidentStats().residentBytes;
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
  gc();
  const settled = residentSet(), usedBefore = residentRegion().top;
  const perCycle: string[] = [];
  for (let cycle = 0; cycle < 6; cycle++) {
    const again = await GPTSession.create(c, { device, executable: buildGPT(c), weights: dir });
    let t = argmax(await again.prefill(Array.from({ length: 16 }, (_, i) => (i * 31) % c.vocab)));
    for (let i = 0; i < 4; i++) t = argmax(await again.decode(t));
    again.dispose(); // the session's VM too: its tensor cache holds the weights
    gc();
    perCycle.push(MiB(residentSet().rss - settled.rss));
  }
  console.log(
    `gpt memory cpu, 6 more load/run/dispose cycles: resident copies after each dispose ${
      MiB(afterFirst)
    } → ${MiB(cpuResidentStats().residentBytes)} MiB (peak ${
      MiB(cpuResidentStats().residentPeakBytes)
    }); region used ${MiB(usedBefore - RESIDENT_BASE)} → ${
      MiB(residentRegion().top - RESIDENT_BASE)
    } MiB; process after each cycle (gc()) +${perCycle.join(", +")} MiB`,
  );
}

const at = Deno.args.indexOf("--child");
if (at >= 0) {
  const dir = Deno.args[at + 2];
  if (dir === undefined) throw new Error("--child <cpu|webgpu> <weights directory>");
  await child(Deno.args[at + 1] as "cpu" | "webgpu", dir);
} else {
  // The weights are made here, so no child holds the garbage of making them.
  const dir = await Deno.makeTempDir();
  await writeFiles(dir, await encodeWeights(SMALL, makeWeights(SMALL, 1)));
  for (const name of ["cpu", "webgpu"]) {
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--v8-flags=--expose-gc",
        new URL(import.meta.url).pathname,
        "--child",
        name,
        dir,
      ],
    }).output();
    const out = new TextDecoder().decode(stdout).trim();
    if (code !== 0) throw new Error(`${name}: ${new TextDecoder().decode(stderr)}`);
    console.log(out.split("\n").filter((l) => l.startsWith("gpt memory")).join("\n"));
  }
  await Deno.remove(dir, { recursive: true });
}

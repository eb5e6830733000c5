/**
 * GPT-small's memory, the VM's count beside the process's: what
 * `memory_stats()` sees (the tensors in the VM's allocators: the weights its
 * tensor cache loaded, the KV caches, activations) and what it does not (on
 * the CPU, the WebAssembly kernels' resident copies of the sealed weights,
 * kernels/cpu/wasm/resident.ts; everywhere, the process around the VM).
 * Each device runs in a fresh process, with no TF.js beside it:
 *
 * ```sh
 * deno run -A bench/gpt_memory.ts
 * ```
 *
 * The weights are written to a temporary directory first; for each device,
 * the executable is built; then the process's resident set (`VmRSS`) is read,
 * its high-water mark reset (`/proc/self/clear_refs`, Linux), the session
 * created (the program loads the cache from the directory) and 16 tokens
 * decoded. Printed: the VM's peak, the process's growth over the load and
 * over the whole run, its high-water mark, and the resident copies' bytes.
 * The process figures include one-time costs (the kernels' code and
 * WebAssembly memory, worker threads, the JIT), so they are an upper bound
 * of what the model costs, not a second measure of the VM.
 *
 * @module
 */

import { cpu, webgpu } from "../mod.ts";
import { SMALL } from "../models/gpt/config.ts";
import { buildGPT } from "../models/gpt/program.ts";
import { argmax, GPTSession } from "../models/gpt/session.ts";
import { encodeWeights, makeWeights, paramCount } from "../models/gpt/weights.ts";
import { writeFiles } from "../builtins/tensor_cache/cache_files.ts";

const MiB = (b: number) => (b / 2 ** 20).toFixed(1);

/** The process's resident set and its high-water mark, in bytes (Linux). */
function residentSet(): { rss: number; hwm: number } {
  const status = Deno.readTextFileSync("/proc/self/status");
  const field = (k: string) => Number(status.match(new RegExp(`${k}:\\s+(\\d+)`))?.[1]) * 1024;
  return { rss: field("VmRSS"), hwm: field("VmHWM") };
}

/**
 * Bytes of the CPU kernels' resident weight copies: read from their
 * process-wide state (kernels/cpu/wasm/resident.ts keeps it under this key;
 * a report only, nothing here depends on it).
 */
function residentCopyBytes(): number | null {
  const state = (globalThis as unknown as Record<symbol, { next: number } | undefined>)[
    Symbol.for("relaxvm.cpuResident.v1")
  ];
  return state === undefined ? null : state.next - 512 * 2 ** 20;
}

async function child(name: "cpu" | "webgpu", dir: string): Promise<void> {
  const c = SMALL;
  const device = name === "cpu" ? cpu() : await webgpu();
  {
    const executable = buildGPT(c);
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    const before = residentSet();
    let resetHwm = true;
    try {
      Deno.writeTextFileSync("/proc/self/clear_refs", "5");
    } catch {
      resetHwm = false;
    }
    const start = residentSet();
    const s = await GPTSession.create(c, { device, executable, weights: dir });
    const loaded = residentSet();
    let token = argmax(await s.prefill(Array.from({ length: 16 }, (_, i) => (i * 7919) % c.vocab)));
    for (let i = 0; i < 16; i++) token = argmax(await s.decode(token));
    const after = residentSet();
    const weightBytes = paramCount(c) * 4;
    const modelBytes = weightBytes + 2 * c.layers * c.context * c.dModel * 4;
    const peak = s.vm.memory_stats(device).peakBytes;
    const resident = residentCopyBytes();
    console.log(
      `gpt process memory ${name}: VM peak ${MiB(peak)} MiB (${
        (peak / modelBytes).toFixed(3)
      }× weights + KV caches ${MiB(modelBytes)} MiB); process +${
        MiB(loaded.rss - before.rss)
      } MiB over the load, +${MiB(after.rss - before.rss)} MiB after 16 decode steps, high-water ${
        resetHwm ? `+${MiB(after.hwm - start.rss)} MiB` : "unavailable"
      }; ${
        name === "cpu" && resident !== null
          ? `the kernels' resident weight copies ${MiB(resident)} MiB (not in the VM's count)`
          : "no resident copies"
      }`,
    );
    s.dispose();
  }
}

const at = Deno.args.indexOf("--child");
if (at >= 0) {
  await child(Deno.args[at + 1] as "cpu" | "webgpu", Deno.args[at + 2]);
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
      ],
    }).output();
    const out = new TextDecoder().decode(stdout).trim();
    if (code !== 0) throw new Error(`${name}: ${new TextDecoder().decode(stderr)}`);
    console.log(out.split("\n").filter((l) => l.startsWith("gpt process memory")).join("\n"));
  }
  await Deno.remove(dir, { recursive: true });
}

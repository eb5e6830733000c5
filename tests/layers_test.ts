/**
 * The layer check can fail: each kind of broken rule is planted in a copy of
 * the library, and `layerViolations` must name it. Without this, a check that
 * walked too few files (as the first one did: only files reachable from the
 * entry points) would pass forever.
 */
import { assert, assertEquals } from "@std/assert";
import { ALLOWED_IMPORTS, layerViolations } from "./check_layers.ts";

const ROOT = new URL("../", import.meta.url);
/** What a copy of the library needs: every layer's folder, the entry points, the config. */
const COPIED = [
  ...Object.keys(ALLOWED_IMPORTS).filter((layer) => layer !== "entry"),
  "mod.ts",
  "runtime.ts",
  "testing.ts",
  "models.ts",
  "deno.json",
];

async function copyTree(from: URL, to: URL): Promise<void> {
  const info = await Deno.stat(from);
  if (info.isFile) {
    await Deno.copyFile(from, to);
    return;
  }
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    const suffix = entry.isDirectory ? "/" : "";
    await copyTree(new URL(entry.name + suffix, from), new URL(entry.name + suffix, to));
  }
}

/** A copy of the library in a temporary directory, changed by `plant`, checked. */
async function violationsAfter(
  plant: (root: URL) => Promise<void>,
): Promise<string[]> {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-layers-test-" });
  const root = new URL(`file://${dir}/`);
  try {
    for (const name of COPIED) {
      const isDir = (await Deno.stat(new URL(name, ROOT))).isDirectory;
      const suffix = isDir ? "/" : "";
      await copyTree(new URL(name + suffix, ROOT), new URL(name + suffix, root));
    }
    await plant(root);
    return await layerViolations(root);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("layers: the real library breaks no rule", async () => {
  assertEquals(await layerViolations(ROOT), []);
});

Deno.test("layers: an orphan file that imports upward is found", async () => {
  const found = await violationsAfter((root) =>
    Deno.writeTextFile(
      new URL("ground/orphan.ts", root),
      'import { VirtualMachine } from "../vm/virtual_machine.ts";\nexport const vm = VirtualMachine;\n',
    )
  );
  assertEquals(found, [
    "ground/orphan.ts (ground) imports vm/virtual_machine.ts (vm): not allowed",
  ]);
});

Deno.test("layers: the ONNX importer may not reach the VM, nor the layers below import it", async () => {
  // It emits programs with the builder and uses the builtins' shape codes and fetching;
  // running them is the caller's business.
  const found = await violationsAfter(async (root) => {
    await Deno.writeTextFile(
      new URL("onnx/runs.ts", root),
      'import { VirtualMachine } from "../vm/virtual_machine.ts";\nexport const vm = VirtualMachine;\n',
    );
    await Deno.writeTextFile(
      new URL("ground/imports_onnx.ts", root),
      'import { WireReader } from "../onnx/wire_reader.ts";\nexport const r = WireReader;\n',
    );
  });
  assertEquals(found, [
    "ground/imports_onnx.ts (ground) imports onnx/wire_reader.ts (onnx): not allowed",
    "onnx/runs.ts (onnx) imports vm/virtual_machine.ts (vm): not allowed",
  ]);
});

Deno.test("layers: an import cycle is found", async () => {
  const found = await violationsAfter(async (root) => {
    await Deno.writeTextFile(
      new URL("ground/cycle_a.ts", root),
      'import { b } from "./cycle_b.ts";\nexport const a = () => b;\n',
    );
    await Deno.writeTextFile(
      new URL("ground/cycle_b.ts", root),
      'import { a } from "./cycle_a.ts";\nexport const b = () => a;\n',
    );
  });
  assertEquals(found, ["import cycle: ground/cycle_a.ts → ground/cycle_b.ts"]);
});

Deno.test("layers: Deno.* outside cli/ and server/ is found; in comments and strings it is not", async () => {
  const found = await violationsAfter(async (root) => {
    // The HTTP server is the other wing that may use Deno.* (Deno.serve, signals).
    await Deno.writeTextFile(
      new URL("server/reads_env.ts", root),
      "export const port = () => Deno.env.get('PORT');\n",
    );
    await Deno.writeTextFile(
      new URL("devices/reads_env.ts", root),
      "export const home = () => Deno.env.get('HOME');\n",
    );
    await Deno.writeTextFile(
      new URL("devices/mentions_deno.ts", root),
      '/** Not `Deno.env`. */\nexport const key = "Deno.customInspect"; // Deno.exit\n',
    );
  });
  assertEquals(found, [
    "devices/reads_env.ts uses Deno.*; only cli/ and server/ may (the library runs in browsers)",
  ]);
});

Deno.test("layers: the engine importing the server (upward) is found", async () => {
  const found = await violationsAfter(async (root) => {
    await Deno.mkdir(new URL("server/", root), { recursive: true });
    await Deno.writeTextFile(new URL("server/limit.ts", root), "export const limit = 1;\n");
    await Deno.writeTextFile(
      new URL("engine/up.ts", root),
      'import { limit } from "../server/limit.ts";\nexport const l = limit;\n',
    );
  });
  assert(
    found.length === 1 &&
      found[0].startsWith("engine/up.ts (engine) imports server/limit.ts (server)"),
    `${found}`,
  );
});

Deno.test("layers: reading instruction words outside program/ is found", async () => {
  const found = await violationsAfter((root) =>
    Deno.writeTextFile(
      new URL("vm/peek.ts", root),
      "export const peek = (e: { instrData: number[] }) => e.instrData[0];\n",
    )
  );
  assert(
    found.length === 1 && found[0].startsWith("vm/peek.ts reads instruction words"),
    `${found}`,
  );
});

Deno.test("layers: an import into the paged KV cache's room from outside it is found", async () => {
  const found = await violationsAfter((root) =>
    Deno.writeTextFile(
      new URL("builtins/operators/peek.ts", root),
      'import { PageTable } from "../kv_state/page_table.ts";\nexport const t = PageTable;\n',
    )
  );
  assertEquals(found, [
    "builtins/operators/peek.ts imports builtins/kv_state/page_table.ts, inside the room builtins/kv_state/: only builtins/install.ts may",
  ]);
});

Deno.test("layers: the devices–kernels seam is installed in one place, and devices has no other callback slot", async () => {
  // The five hook slots this replaced (setSealEndHook, setOptionalMemoryRelease,
  // setCpuKernelDescriber, setCpuResidentStats, onCpuResidentSettingChange) were each a way
  // up from devices/ the import graph did not show; a sixth must be found.
  const found = await violationsAfter(async (root) => {
    await Deno.writeTextFile(
      new URL("kernels/cpu/sneak.ts", root),
      'import { installCpuKernelHost } from "../../devices/cpu_kernel_host.ts";\nexport const i = installCpuKernelHost;\n',
    );
    const storage = new URL("devices/storage.ts", root);
    await Deno.writeTextFile(
      storage,
      (await Deno.readTextFile(storage)) +
        "\n// export function setInComment(): void {}\nexport function setFooHook(_f: () => void): void {}\n",
    );
  });
  assertEquals(found, [
    "devices/storage.ts exports setFooHook, a slot for a callback from above; declare what the devices layer needs in a seam (SEAMS) instead",
    "kernels/cpu/sneak.ts imports devices/cpu_kernel_host.ts, a seam: only kernels/install.ts may install it",
  ]);
});

Deno.test("layers: the page table importing anything is found (it is pure)", async () => {
  const found = await violationsAfter(async (root) => {
    const file = new URL("builtins/kv_state/page_table.ts", root);
    await Deno.writeTextFile(
      file,
      'import { elementBytes } from "../../ground/dtype.ts";\nexport const e = elementBytes;\n' +
        await Deno.readTextFile(file),
    );
  });
  assertEquals(found, [
    "builtins/kv_state/page_table.ts is pure and imports ground/dtype.ts: it may import only []",
  ]);
});

Deno.test("layers: models/ is a layer that uses the public API only, and no Deno.*", async () => {
  const found = await violationsAfter(async (root) => {
    await Deno.writeTextFile(
      new URL("models/minilm/reaches_in.ts", root),
      'import { VirtualMachine } from "../../vm/virtual_machine.ts";\nexport const vm = VirtualMachine;\n',
    );
    await Deno.writeTextFile(
      new URL("models/gpt/reads_file.ts", root),
      'import { cpu } from "../../mod.ts";\nexport const f = () => [cpu(), Deno.readFile("x")];\n',
    );
  });
  assertEquals(found, [
    "models/gpt/reads_file.ts uses Deno.*; only cli/ and server/ may (the library runs in browsers)",
    "models/minilm/reaches_in.ts (models) imports vm/virtual_machine.ts (vm): not allowed",
  ]);
});

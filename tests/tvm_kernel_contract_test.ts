/**
 * Issue 28: a TVM kernel that disagrees with relaxvm's launcher (its
 * launch tags, workgroup size, uniform layout, builtins or buffer element
 * types) is refused when the package loads, naming the kernel and the
 * construct, instead of running to a silent wrong answer. The breaks are
 * `_tvm_contract_breaks.ts`; the unbroken packages load and match TVM on
 * the GPU (`webgpu/tvm_package_suite.ts`).
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { parseTVMPackageManifest, TVMPackageError } from "../mod.ts";
import { attentionManifest, BREAKS } from "./_tvm_contract_breaks.ts";
import { PACKAGES_DIR } from "./_tvm_packages.ts";

Deno.test("TVM kernel contract: every committed package keeps it", async () => {
  for (const name of ["mlp", "encoder", "attention4d", "cumsum"]) {
    const text = await Deno.readTextFile(new URL(`${name}/package.json`, PACKAGES_DIR));
    const m = parseTVMPackageManifest(text, `${name}/package.json`);
    assert(m.kernels.size > 0);
  }
});

for (const b of BREAKS) {
  Deno.test(`TVM kernel contract: refused at load: ${b.name}`, async () => {
    const m = await attentionManifest();
    b.apply(m);
    const e = assertThrows(
      () => parseTVMPackageManifest(JSON.stringify(m), "package.json"),
      TVMPackageError,
    );
    assertEquals(e.field, b.field, e.message);
    assert(e.message.includes(b.reason), `${e.message}\ndoes not say: ${b.reason}`);
    if (e.field.startsWith("kernels")) assert(e.message.includes("kernel matmul1_kernel"));
  });
}

Deno.test("TVM kernel contract: an f32 literal past float32's range is refused at load, as Chromium does", async () => {
  // The encoder's softmax kernel starts its maximum at float32's lowest value; the exporter writes
  // it as the hexadecimal float (tools/tvm/wgsl_literals.py), which parses everywhere.
  const text = await Deno.readTextFile(new URL("encoder/package.json", PACKAGES_DIR));
  assert(text.includes("-0x1.fffffep+127f"));
  parseTVMPackageManifest(text, "package.json");
  // Its shortest decimal, 3.4028235e+38, is past the largest float32: Deno's WGSL compiler rounds
  // it down, Chromium's refuses the shader, so a package carrying it would load in one only.
  const broken = text.replace("-0x1.fffffep+127f", "-3.4028235e+38f");
  const e = assertThrows(
    () => parseTVMPackageManifest(broken, "package.json"),
    TVMPackageError,
  );
  assert(e.field.startsWith('kernels["softmax_kernel'), e.field);
  assert(e.message.includes("3.4028235e+38f is past float32's largest value"), e.message);
  // A literal at the edge that is within range still loads.
  parseTVMPackageManifest(text.replace("-0x1.fffffep+127f", "-3.4028234e+38f"), "package.json");
});

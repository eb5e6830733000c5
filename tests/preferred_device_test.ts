/**
 * `preferredDevice()` picks WebGPU only on a hardware adapter: a software one (llvmpipe,
 * SwiftShader, WARP) runs shaders on the CPU, slower than the CPU kernels (issue 32). The model
 * sessions take it as their default device.
 */

import { assert, assertEquals } from "@std/assert";
import { isSoftwareAdapter, preferredDevice } from "../mod.ts";
import { GPTSession, TINY } from "../models.ts";

Deno.test("isSoftwareAdapter: the software rasterizers by flag or by name, hardware not", () => {
  const info = (vendor: string, architecture: string, description = "") => ({
    vendor,
    architecture,
    description,
  });
  for (
    const soft of [
      info("65541", "", "llvmpipe (LLVM 15.0.6, 256 bits)"), // Mesa, as Deno reports it
      info("mesa", "", "lavapipe"),
      info("google", "swiftshader", ""), // Chromium's
      info("microsoft", "", "Microsoft Basic Render Driver"), // WARP
      { ...info("nvidia", "hopper"), isFallbackAdapter: true },
    ]
  ) assert(isSoftwareAdapter(soft), JSON.stringify(soft));
  for (
    const hard of [
      info("nvidia", "hopper", "NVIDIA H100 80GB HBM3"),
      info("amd", "rdna-3", ""),
      info("apple", "metal-3", "Apple M2"),
      info("intel", "gen-12lp", "Intel(R) Xe Graphics"),
      { ...info("nvidia", "ada"), isFallbackAdapter: false },
    ]
  ) assert(!isSoftwareAdapter(hard), JSON.stringify(hard));
});

Deno.test("preferredDevice: the CPU on a software adapter or none, WebGPU on hardware", async () => {
  const adapter = await navigator.gpu?.requestAdapter({ powerPreference: "high-performance" });
  const { device, reason } = await preferredDevice();
  if (adapter == null) {
    assertEquals([device.kind, reason], ["cpu", "no WebGPU adapter was found"]);
  } else if (isSoftwareAdapter(adapter.info)) {
    assertEquals(device.kind, "cpu");
    assert(reason.includes(adapter.info.description) && reason.includes("software"), reason);
  } else {
    assertEquals(device.kind, "webgpu");
    assert(reason.includes("hardware"), reason);
  }
});

Deno.test("GPTSession runs on preferredDevice() unless given a device", async () => {
  const session = await GPTSession.create(TINY);
  try {
    assertEquals(session.device, (await preferredDevice()).device);
  } finally {
    session.dispose();
  }
});

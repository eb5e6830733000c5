/**
 * Every WebGPU test: the suites in `tests/webgpu/`, run in a child process
 * (see `webgpu/in_child_process.ts` for why), and the WebGPU example.
 * Ignored without an adapter, failing instead when `RELAXVM_REQUIRE_WEBGPU=1`.
 *
 * @module
 */

import { assertLine, runExample } from "./_run_example.ts";
import { registerWebGPUSuites } from "./webgpu/in_child_process.ts";

const { ignore } = await registerWebGPUSuites();

Deno.test({
  name: "examples/mlp_webgpu.ts runs the MLP on both devices and they agree",
  ignore,
  fn: async () => {
    const out = await runExample("mlp_webgpu");
    assertLine(out, "cpu and webgpu agree within 1e-5: yes");
  },
});

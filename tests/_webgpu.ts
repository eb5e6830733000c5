/**
 * The WebGPU device for tests, acquired once when this module loads (outside
 * any test, so Deno's op sanitizer does not count the device's pending
 * `lost` promise against the first test that happens to touch it).
 *
 * Without an adapter the GPU tests are ignored, unless
 * `RELAXVM_REQUIRE_WEBGPU=1`, in which case they run and fail with the error
 * `webgpu()` gave, so a CI machine that should have a GPU cannot pass
 * silently.
 *
 * @module
 */

import { webgpu, type WebGPUDevice } from "../vm/webgpu_device.ts";

function envFlag(name: string): boolean {
  try {
    return Deno.env.get(name) === "1";
  } catch {
    // No --allow-env: treat as unset.
    return false;
  }
}

/** True when `RELAXVM_REQUIRE_WEBGPU=1`: missing WebGPU fails the GPU tests. */
export const REQUIRE_WEBGPU: boolean = envFlag("RELAXVM_REQUIRE_WEBGPU");

let acquired: WebGPUDevice | null = null;
let failure: unknown = null;
try {
  acquired = await webgpu();
} catch (e) {
  failure = e;
}

/** Use as `Deno.test({ ignore: IGNORE_GPU_TESTS, ... })`. */
export const IGNORE_GPU_TESTS: boolean = acquired === null && !REQUIRE_WEBGPU;

/** The shared test GPU; throws why there is none (only reached when required). */
export function getTestGPU(): Promise<WebGPUDevice> {
  if (acquired !== null) return Promise.resolve(acquired);
  return Promise.reject(
    new Error("RELAXVM_REQUIRE_WEBGPU=1 but no WebGPU device could be acquired", {
      cause: failure,
    }),
  );
}

/** Registers a test that receives the GPU, ignored (or failing when required) without one. */
export function gpuTest(name: string, fn: (gpu: WebGPUDevice) => Promise<void> | void): void {
  Deno.test({ name, ignore: IGNORE_GPU_TESTS, fn: async () => await fn(await getTestGPU()) });
}

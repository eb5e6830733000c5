/**
 * The WebGPU tests' registry. Suites in this folder call {@link gpuTest};
 * nothing here runs under `deno test` itself: `run_suites.ts` runs the
 * registered tests in a child `deno run` process, and `webgpu_test.ts`
 * reports each result as its own `Deno.test` (see `in_child_process.ts`
 * for why the GPU is kept out of the test runner's threads).
 *
 * @module
 */

import { webgpu, type WebGPUDevice } from "../../devices/webgpu/webgpu_device.ts";

/** A registered GPU test. */
export interface GpuTest {
  name: string;
  fn: (gpu: WebGPUDevice) => Promise<void> | void;
  /** Not run, and reported as ignored (e.g. model weights that are not downloaded). */
  ignore?: boolean;
}

/** Every test the imported suites registered, in registration order. */
export const registeredGpuTests: GpuTest[] = [];

/**
 * Registers a test that receives the shared test GPU; `options.ignore`
 * leaves it out of the run and reports it as ignored.
 */
export function gpuTest(name: string, fn: GpuTest["fn"], options: { ignore?: boolean } = {}): void {
  if (registeredGpuTests.some((t) => t.name === name)) {
    throw new Error(`gpuTest(): a test named ${JSON.stringify(name)} is already registered`);
  }
  registeredGpuTests.push({ name, fn, ignore: options.ignore ?? false });
}

let acquisition: Promise<WebGPUDevice> | undefined;

/**
 * The shared test GPU, acquired on first use. Rejects with the reason when
 * there is none; the parent decides whether that fails or ignores the tests
 * (`RELAXVM_REQUIRE_WEBGPU`).
 */
export function getTestGPU(): Promise<WebGPUDevice> {
  acquisition ??= webgpu();
  return acquisition;
}

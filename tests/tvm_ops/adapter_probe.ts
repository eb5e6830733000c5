/**
 * Probes the WebGPU adapter for the arithmetic bug the operator suite met:
 * on Deno's wgpu over Mesa llvmpipe, WGSL's `%` on i32 computes an unsigned
 * remainder (-4 % 5 = 2, where WGSL says -4). TVM's floor_divide and
 * floor_mod kernels are built on `%`, so their results are wrong there
 * while their WGSL is right; `expectations.ts` lists them as a known bug of
 * the adapter only when this probe finds it.
 *
 * @module
 */

import type { WebGPUDevice } from "../../devices/webgpu/webgpu_device.ts";

const WGSL = `
@group(0) @binding(0) var<storage, read_write> out : array<i32>;
@group(0) @binding(1) var<storage, read> a : array<i32>;
@compute @workgroup_size(1) fn main() {
  out[0] = a[0] % a[1];
  out[1] = a[2] % a[3];
}`;

/** `[-4 % 5, -1 % -4]` as the adapter computes them (WGSL: `[-4, -1]`). */
export async function i32Remainders(device: WebGPUDevice): Promise<number[]> {
  const gpu = device.gpu;
  const module = gpu.createShaderModule({ code: WGSL });
  const pipeline = gpu.createComputePipeline({
    layout: "auto",
    compute: { module, entryPoint: "main" },
  });
  const out = gpu.createBuffer({
    size: 8,
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC,
  });
  const input = gpu.createBuffer({
    size: 16,
    usage: GPUBufferUsage.STORAGE,
    mappedAtCreation: true,
  });
  new Int32Array(input.getMappedRange()).set([-4, 5, -1, -4]);
  input.unmap();
  const read = gpu.createBuffer({
    size: 8,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  try {
    const group = gpu.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer: out } }, {
        binding: 1,
        resource: { buffer: input },
      }],
    });
    const encoder = gpu.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(1);
    pass.end();
    encoder.copyBufferToBuffer(out, 0, read, 0, 8);
    gpu.queue.submit([encoder.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    return [...new Int32Array(read.getMappedRange().slice(0))];
  } finally {
    out.destroy();
    input.destroy();
    read.destroy();
  }
}

/** Whether the adapter computes i32 `%` as an unsigned remainder (the bug above). */
export async function unsignedI32Remainder(device: WebGPUDevice): Promise<boolean> {
  const [a, b] = await i32Remainders(device);
  return a === 2 && b === 3;
}

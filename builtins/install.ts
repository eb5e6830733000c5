/**
 * Installs the builtin library: importing this module registers every
 * `vm.builtin.*` and `vm.op.*` packed function and the CPU kernels. The
 * WebGPU kernels are installed by vm/webgpu_device.ts when a WebGPU device
 * is acquired.
 *
 * @module
 */

import "./value_builtins.ts";
import "./shape_heap.ts";
import "./memory.ts";
import "./operators.ts";
import "../kernels/cpu/backend.ts";

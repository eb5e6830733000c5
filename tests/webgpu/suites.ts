// Every WebGPU suite. Imported by the child runner (to run them) and by the
// parent (to know their names); registering a test never touches the GPU.
import "./device.ts";
import "./kernels.ts";
import "./memory.ts";
import "./operators.ts";
import "./vm.ts";

// The memory checks of memory_test.ts, on WebGPU.
import { checkBaseline, checkLiveness } from "../_memory_checks.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest(
  "liveness: the chain computes the same result with a fraction of the peak memory (WebGPU)",
  (gpu) => checkLiveness(gpu),
);
gpuTest(
  "memory: live bytes and GPU buffers return to baseline after every invocation (WebGPU)",
  (gpu) => checkBaseline(gpu),
);

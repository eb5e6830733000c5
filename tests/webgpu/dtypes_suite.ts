// The int64, float16 and bfloat16 checks of tests/_dtype_checks.ts on WebGPU, where
// WGSL has none of these types: storage, copies, to_device and cast work bit by bit;
// int64 arithmetic is a clear error.
import {
  checkCasts,
  checkCastsMatchCpu,
  checkCopies,
  checkHalfArithmetic,
  checkHalfValues,
  checkInt64Arithmetic,
  checkInt64Values,
} from "../_dtype_checks.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest("int64 tensors on WebGPU hold every value exactly", (gpu) => checkInt64Values(gpu));
gpuTest(
  "float16 and bfloat16 tensors on WebGPU: rounded in, exact out",
  (gpu) => checkHalfValues(gpu),
);
gpuTest(
  "cast on WebGPU to and from int64, float16 and bfloat16: the reference values",
  (gpu) => checkCasts(gpu),
);
gpuTest(
  "cast on WebGPU matches the CPU bit for bit for every pair of dtypes",
  (gpu) => checkCastsMatchCpu(gpu),
);
gpuTest(
  "int64, float16 and bfloat16 tensors move to WebGPU and transpose there",
  (gpu) => checkCopies(gpu),
);
gpuTest(
  "int64 arithmetic on WebGPU is an error naming the op and the dtype",
  (gpu) => checkInt64Arithmetic(gpu),
);
gpuTest(
  "float16 arithmetic on WebGPU: cast first; says whether shader-f16 is offered",
  (gpu) => checkHalfArithmetic(gpu),
);

// Every WebGPU suite. Imported by the child runner (to run them) and by the
// parent (to know their names); registering a test never touches the GPU.
import "./builtins_suite.ts";
import "./comparison_suite.ts";
import "./conv2d_suite.ts";
import "./device_suite.ts";
import "./dtypes_suite.ts";
import "./gpt_suite.ts";
import "./gpt_paged_suite.ts";
import "./inputs_suite.ts";
import "./kv_state_suite.ts";
import "./kernels_suite.ts";
import "./kernel_cost_suite.ts";
import "./lande_suite.ts";
import "./memory_suite.ts";
import "./minilm_suite.ts";
import "./onnx_gpt_suite.ts";
import "./onnx_nodes_suite.ts";
import "./onnx_ocr_suite.ts";
import "./ops_suite.ts";
import "./profile_suite.ts";
import "./vm_suite.ts";
import "./tvm_package_suite.ts";
import "./tvm_plan_steps_suite.ts";
import "./tvm_llama_suite.ts";
import "./tensor_cache_suite.ts";

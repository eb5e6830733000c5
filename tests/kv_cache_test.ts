// The KV cache builtins on the CPU; tests/webgpu/builtins_suite.ts runs the same checks on WebGPU.
import { cpu } from "../mod.ts";
import {
  checkCreateAppendView,
  checkErrors,
  checkGrowthPopClear,
  checkInVM,
  checkWindowOverride,
  checkWindowSinks,
} from "./_kv_cache_checks.ts";

Deno.test("TVM test_attention_kv_cache: create, append, view", () => checkCreateAppendView(cpu()));
Deno.test("KV cache: growth by doubling, popn, update, clear, aliasing views", () =>
  checkGrowthPopClear(cpu()));
Deno.test("TVM test_attention_kv_cache_window_override", () => checkWindowOverride(cpu()));
Deno.test("TVM test_attention_kv_cache_window_override_with_sinks", () => checkWindowSinks(cpu()));
Deno.test("KV cache: every error names the builtin and what did not fit", () => checkErrors(cpu()));
Deno.test("KV cache in a VM: counted in memory_stats, freed by dispose", () => checkInVM(cpu()));

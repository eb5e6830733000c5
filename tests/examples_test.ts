/**
 * Runs every program in `examples/` as `deno run` would for a newcomer (no
 * permissions) and checks the lines that carry its result. Needs
 * `--allow-read --allow-run` (to find and start `deno`).
 */

import { assertStringIncludes } from "@std/assert";
import { assertLine, runExample } from "./_run_example.ts";

Deno.test("examples/func0_func1.ts adds and multiplies two tensors", async () => {
  const out = await runExample("func0_func1");
  assertLine(out, "@func0:");
  assertLine(out, "  call  vm.op.add        in: %0, %1       dst: %2");
  assertLine(out, "func1(a, b) = a * b = [10, 40, 90, 160]");
  assertLine(out, "func0(a, b) = a + b = [11, 22, 33, 44]");
});

Deno.test("examples/dynamic_shapes.ts loads (32, 16) from the heap and derives (1, n, m)", async () => {
  const out = await runExample("dynamic_shapes");
  assertStringIncludes(out, "call  vm.builtin.store_shape in: %1, %0, i0, i1");
  assertLine(out, "main() = (32, 16)  (the shape of the constant tensor)");
  assertLine(out, "derived_shape(tensor of shape (2, 3)) = (1, 3, 2)");
  assertStringIncludes(out, "match_shape: expected 2 dimensions, got shape [3]");
});

Deno.test("examples/if_goto.ts sums with a loop and picks a branch", async () => {
  const out = await runExample("if_goto");
  assertLine(out, "  If    %3, 4");
  assertLine(out, "  goto  -4");
  assertLine(out, "sum_to(0) = 0");
  assertLine(out, "sum_to(10) = 55");
  assertLine(out, "sum_to(100) = 5050");
  assertLine(out, "pick(1, [1, 5, 3], [4, 2, 6]) = [4, 5, 6]  (maximum)");
  assertLine(out, "pick(0, [1, 5, 3], [4, 2, 6]) = [1, 2, 3]  (minimum)");
});

Deno.test("examples/closures.ts calls a closure from TypeScript and inside the VM", async () => {
  const out = await runExample("closures");
  assertStringIncludes(out, "in: f[scale], %0");
  assertLine(out, "make_scaler([10]) returned Closure(scale)");
  assertLine(out, "vm.invoke_closure(closure, [1, 2, 3]) = [10, 20, 30]");
  assertLine(out, "apply_twice(closure, [1, 2, 3]) = [100, 200, 300]");
});

Deno.test("examples/tour.ts shows every stage and recovers from a VMError", async () => {
  const out = await runExample("tour");
  for (
    const heading of [
      "== 1. Build ==",
      "== 2. stats() ==",
      "== 3. as_text() ==",
      "== 4. as_text({ releases: true }) ==",
      "== 5. as_typescript() ==",
      "== 6. save() and Executable.load() ==",
      "== 7. Run on the CPU ==",
      "== 8. Errors ==",
      "== 9. memory_stats() ==",
    ]
  ) assertLine(out, heading);
  assertLine(out, "Relax VM executable statistics:");
  assertStringIncludes(out, "# then release %0, %1");
  assertLine(out, "export const ex = ib.get();");
  assertLine(out, "Loaded back and saved again: identical bytes.");
  assertLine(out, "mean_or_sum(a, b, [1])  = [2, 3, 4]");
  assertLine(out, "mean_or_sum(a, b, [0])  = [4, 6, 8]");
  assertStringIncludes(out, "Caught VMError: ");
  assertLine(out, "  function:    add");
  assertLine(out, "  pc:          0");
  assertLine(out, "  packed func: vm.op.add");
  assertLine(out, "The same VM still works afterwards: add(a, b) = [4, 6, 8]");
  assertStringIncludes(out, "peakBytes: ");
});

import { assertEquals } from "@std/assert";

Deno.test("lifetime: tensors and closures dropped without dispose() are released when collected", async () => {
  const script = new URL("./fixtures/dropped_results.ts", import.meta.url);
  const { stdout, success } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--v8-flags=--expose-gc", script.pathname],
  }).output();
  const out = new TextDecoder().decode(stdout).trim().split("\n");
  assertEquals(success, true);
  assertEquals(out, [
    "tensors before 1600",
    "tensors after 0",
    "closures before 1600",
    "closures after 0",
  ]);
});

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

Deno.test("lifetime: tensors made outside a VM and dropped without dispose() are released when collected", async () => {
  const script = new URL("./fixtures/dropped_direct_results.ts", import.meta.url);
  const { stdout, success } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--v8-flags=--expose-gc", script.pathname],
  }).output();
  const out = new TextDecoder().decode(stdout).trim().split("\n");
  assertEquals(success, true);
  // The naive default allocator rounds 12 bytes up to 12 (a multiple of 4).
  assertEquals(out, ["direct before 1200", "direct after 0"]);
});

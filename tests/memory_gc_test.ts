import { assertEquals } from "@std/assert";

Deno.test("lifetime: tensors dropped without dispose() are released when collected", async () => {
  const script = new URL("./fixtures/dropped_results.ts", import.meta.url);
  const { stdout, success } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--v8-flags=--expose-gc", script.pathname],
  }).output();
  const out = new TextDecoder().decode(stdout).trim().split("\n");
  assertEquals(success, true);
  assertEquals(out, ["before 1600", "after 0"]);
});

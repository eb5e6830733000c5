import { assert, assertEquals, assertStringIncludes } from "@std/assert";

async function runWithoutAdapter(require: boolean) {
  const fixture = new URL("./fixtures/no_adapter.ts", import.meta.url).pathname;
  const env: Record<string, string> = {
    NO_COLOR: "1",
    RELAXVM_REQUIRE_WEBGPU: require ? "1" : "0",
  };
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-env", "--allow-read", "--allow-run", fixture],
    env,
  }).output();
  return { code, out: new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr) };
}

Deno.test("without an adapter, GPU tests fail when RELAXVM_REQUIRE_WEBGPU=1", async () => {
  const { code, out } = await runWithoutAdapter(true);
  assert(code !== 0, out);
  assertStringIncludes(out, "RELAXVM_REQUIRE_WEBGPU=1 but no WebGPU device could be acquired");
  assertStringIncludes(out, "navigator.gpu is not defined");
});

Deno.test("without an adapter, GPU tests are ignored otherwise", async () => {
  const { code, out } = await runWithoutAdapter(false);
  assertEquals(code, 0, out);
  assertStringIncludes(out, "0 passed");
  assert(/[1-9]\d* ignored/.test(out), out);
});

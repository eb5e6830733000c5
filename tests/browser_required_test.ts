/**
 * tests/browser_test.ts on a machine without Chromium (simulated with
 * `RELAXVM_CHROMIUM` naming a missing file): ignored with a message saying
 * how to get a browser, or failing when `RELAXVM_REQUIRE_BROWSER=1`.
 *
 * @module
 */

import { assert, assertEquals, assertStringIncludes } from "@std/assert";

async function runWithoutChromium(require: boolean) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-read", "--allow-run", "--allow-env", "tests/browser_test.ts"],
    cwd: new URL("../", import.meta.url),
    env: {
      NO_COLOR: "1",
      RELAXVM_CHROMIUM: "/nonexistent/chromium",
      RELAXVM_REQUIRE_BROWSER: require ? "1" : "0",
    },
  }).output();
  return { code, out: new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr) };
}

Deno.test("without Chromium, the browser test fails when RELAXVM_REQUIRE_BROWSER=1", async () => {
  const { code, out } = await runWithoutChromium(true);
  assert(code !== 0, out);
  assertStringIncludes(out, "RELAXVM_REQUIRE_BROWSER=1 but no Chromium was found");
  assertStringIncludes(out, "apt-get install -y --no-install-recommends chromium");
});

Deno.test("without Chromium, the browser test is ignored otherwise, saying why", async () => {
  const { code, out } = await runWithoutChromium(false);
  assertEquals(code, 0, out);
  assertStringIncludes(out, "no Chromium found, the browser test is ignored");
  assertStringIncludes(out, "0 passed | 0 failed | 1 ignored");
});

/**
 * The playground end to end in headless Chromium (tests/browser/e2e.ts, run
 * as a child `deno run -A` process: playwright-core needs every permission
 * under Deno). Each check the child reports is a step of this test.
 *
 * Without Chromium the test is ignored, with a message saying how to get
 * one, unless `RELAXVM_REQUIRE_BROWSER=1` (CI sets it): then it fails.
 * `RELAXVM_CHROMIUM` picks the executable.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import {
  browserRequired,
  type E2EEvent,
  findChromium,
  INSTALL_HINT,
  PROTOCOL_PREFIX,
} from "./browser/protocol.ts";

/** The child may not take longer than this (it takes a few seconds). */
const CHILD_TIMEOUT_MS = 120_000;

const chromium = findChromium();
const required = browserRequired();
if (chromium === null && !required) {
  console.warn(
    `tests/browser_test.ts: no Chromium found, the browser test is ignored: ${INSTALL_HINT} ` +
      "(RELAXVM_REQUIRE_BROWSER=1 makes this a failure)",
  );
}

Deno.test({
  name: "the playground builds and runs programs in headless Chromium (CPU, WebGPU, strict CSP)",
  ignore: chromium === null && !required,
  async fn(t) {
    if (chromium === null) {
      throw new Error(`RELAXVM_REQUIRE_BROWSER=1 but no Chromium was found: ${INSTALL_HINT}`);
    }
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--lock=deno.lock", "-A", "tests/browser/e2e.ts", "--chromium", chromium],
      cwd: new URL("../", import.meta.url), // where deno.json maps the imports
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(CHILD_TIMEOUT_MS),
    }).output();
    const output = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    const events: E2EEvent[] = [];
    const own: string[] = [];
    for (const line of output.split("\n")) {
      if (line.startsWith(PROTOCOL_PREFIX)) {
        events.push(JSON.parse(line.slice(PROTOCOL_PREFIX.length)));
      } else if (line.trim() !== "") own.push(line);
    }
    const childSummary = () =>
      `the browser child process exited with code ${code}` +
      (own.length > 0 ? `; its output:\n${own.join("\n")}` : "");

    const plan = events.find((e): e is Extract<E2EEvent, { kind: "plan" }> => e.kind === "plan");
    if (plan === undefined) throw new Error(`no plan reported: ${childSummary()}`);
    const results = new Map<string, string | null>();
    for (const e of events) if (e.kind === "check") results.set(e.name, e.error);
    for (const name of plan.checks) {
      await t.step(name, () => {
        const error = results.get(name);
        if (error === undefined) throw new Error(`not reported: ${childSummary()}`);
        if (error !== null) {
          // The child's stack, with its message, stands for this step's.
          const e = new Error(error.split("\n")[0].replace(/^\w*Error: /, ""));
          e.stack = error;
          throw e;
        }
      });
    }
    assert(events.some((e) => e.kind === "done"), `the child did not finish: ${childSummary()}`);
    const allPassed = plan.checks.every((name) => results.get(name) === null);
    if (allPassed) assertEquals(code, 0, childSummary());
  },
});

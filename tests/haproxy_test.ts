/**
 * Two `relaxvm serve` replicas behind HAProxy (tools/haproxy/relaxvm.cfg) on loopback:
 * one replica is drained (SIGTERM) mid-load and no request is lost. Needs Debian's
 * haproxy (`apt-get install -y haproxy`): ignored without it, unless
 * `RELAXVM_REQUIRE_HAPROXY=1` (CI sets it and installs the package).
 */
import { assertEquals, assertMatch } from "@std/assert";
import { runClient, startServer } from "./_serve_process.ts";

const ROOT = new URL("../", import.meta.url);

function haproxyPresent(): boolean {
  try {
    return new Deno.Command("haproxy", { args: ["-v"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

const required = Deno.env.get("RELAXVM_REQUIRE_HAPROXY") === "1";
const present = haproxyPresent();
if (!present && !required) {
  console.warn(
    "haproxy is not installed: tests/haproxy_test.ts is ignored (apt-get install -y haproxy)",
  );
}

Deno.test({
  name: "haproxy: a replica drained mid-load loses no request; the other serves on",
  ignore: !present && !required,
  async fn() {
    const a = await startServer(["--model", "gpt-tiny"]);
    const b = await startServer(["--model", "gpt-tiny"]);
    // A port for HAProxy: the test runner cannot listen to find a free one, so try a few.
    let proxy: Deno.ChildProcess | null = null, port = 0;
    try {
      for (let attempt = 0; attempt < 5 && proxy === null; attempt++) {
        port = 20000 + Math.floor(Math.random() * 30000);
        const child = new Deno.Command("haproxy", {
          args: ["-db", "-f", "tools/haproxy/relaxvm.cfg"],
          cwd: ROOT,
          env: {
            LISTEN: `127.0.0.1:${port}`,
            REPLICA_A: `127.0.0.1:${a.port}`,
            REPLICA_B: `127.0.0.1:${b.port}`,
          },
          stdout: "null",
          stderr: "piped",
        }).spawn();
        const early = await Promise.race([
          child.status,
          new Promise<null>((r) => setTimeout(() => r(null), 500)),
        ]);
        if (early === null) proxy = child;
        else await child.stderr.cancel();
      }
      if (proxy === null) throw new Error("haproxy did not start on any of 5 ports");
      const r = await runClient("balanced", [
        `http://127.0.0.1:${port}`,
        String(a.pid),
        "8",
        "120",
      ]);
      assertEquals(r.outcomes, { ok: 120 }, JSON.stringify(r));
      const statusA = await a.child.status;
      assertEquals(statusA.code, 0);
      assertMatch(await a.stderr, /drained, stopped/);
    } finally {
      if (proxy !== null) {
        proxy.kill("SIGTERM");
        await proxy.status;
        await proxy.stderr.cancel().catch(() => {});
      }
      await a.stop();
      await b.stop();
    }
  },
});

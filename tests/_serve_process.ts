/**
 * `relaxvm serve` as a child process on 127.0.0.1 and a free port, for the server's
 * tests (the test runner has no network permission: the clients run as children too,
 * `tests/_serve_client.ts`).
 *
 * @module
 */

const ROOT = new URL("../", import.meta.url);

/** A running server. */
export interface ServerProcess {
  /** `http://127.0.0.1:<port>`. */
  base: string;
  port: number;
  pid: number;
  child: Deno.ChildProcess;
  /** Everything it wrote on stderr, once it has exited. */
  stderr: Promise<string>;
  /** SIGTERM, then its exit status. */
  stop(): Promise<Deno.CommandStatus>;
}

/** Starts `relaxvm serve --port 0 <args>` and waits for its "listening" line. */
export async function startServer(args: readonly string[]): Promise<ServerProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--lock=deno.lock",
      "--allow-read",
      "--allow-net=127.0.0.1",
      "--allow-env=INIT_CWD",
      "--unstable-no-legacy-abort",
      "cli/main.ts",
      "serve",
      "--port",
      "0",
      ...args,
    ],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the server exited before listening: ${await stderr}`);
    text += value;
    const m = /listening on (http:\/\/127\.0\.0\.1:(\d+))/.exec(text);
    if (m !== null) {
      // Keep draining stdout so the child never blocks on a full pipe.
      (async () => {
        while (!(await reader.read()).done);
      })();
      return {
        base: m[1],
        port: Number(m[2]),
        pid: child.pid,
        child,
        stderr,
        async stop() {
          try {
            child.kill("SIGTERM");
          } catch {
            // Exited already.
          }
          return await child.status;
        },
      };
    }
  }
}

/** Runs `tests/_serve_client.ts <scenario> <args>` and parses the JSON it prints. */
export async function runClient(
  scenario: string,
  args: readonly string[],
): Promise<Record<string, unknown>> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--lock=deno.lock",
      "--allow-net=127.0.0.1",
      "--allow-env",
      "--allow-read",
      "--allow-run",
      "tests/_serve_client.ts",
      scenario,
      ...args,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(stdout);
  if (code !== 0) {
    throw new Error(`client ${scenario} failed (${code}): ${new TextDecoder().decode(stderr)}`);
  }
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

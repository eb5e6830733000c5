/**
 * `serve(options)`: loads the models and answers OpenAI's API with `Deno.serve` on
 * 127.0.0.1 (by default) until SIGTERM or SIGINT, which drain it: `/health` answers 503
 * at once (a load balancer stops sending), running requests finish within the drain
 * deadline, then the listener closes.
 *
 * @module
 */

import { ServerApp } from "./app.ts";
import type { ServerLimits } from "./limits.ts";
import { loadModels, type ModelOptions } from "./models.ts";

/** Options of `serve`. */
export interface ServeOptions extends ModelOptions {
  /** The address to listen on; default 127.0.0.1 (loopback only). */
  hostname?: string;
  /** The port; 0 picks a free one. Default 8000. */
  port?: number;
  /** The server's limits. */
  limits?: Partial<ServerLimits>;
  /** Called with the address once listening (default: a line on stdout). */
  onListen?: (address: { hostname: string; port: number }, app: ServerApp) => void;
}

/** Serves until a SIGTERM or SIGINT has drained the server. */
export async function serve(options: ServeOptions): Promise<void> {
  const app = new ServerApp(await loadModels(options), options.limits);
  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 8000,
    onListen: (address) => {
      if (options.onListen) options.onListen(address, app);
      else {
        console.log(
          `relaxvm serve: listening on http://${address.hostname}:${address.port} (${
            options.models.join(", ")
          })`,
        );
      }
    },
  }, (request) => app.handle(request));
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      console.error(`relaxvm serve: draining ${app.active} requests`);
      await app.drain();
      await server.shutdown();
      console.error("relaxvm serve: drained, stopped");
    })();
  };
  const signals = ["SIGTERM", "SIGINT"] as const;
  for (const s of signals) Deno.addSignalListener(s, stop);
  try {
    await server.finished;
  } finally {
    for (const s of signals) Deno.removeSignalListener(s, stop);
  }
}

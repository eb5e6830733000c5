/**
 * Load on `relaxvm serve` over loopback: a server child process (`gpt-small` by
 * default), then 1, 4, 16 and 64 concurrent clients, each streaming completions one
 * after another (a 16-character prompt, 32 tokens, temperature 0.7). Per level: p50 and
 * p99 time to first token, p50 and p99 inter-token latency (between two streamed
 * pieces of one request), aggregate tokens/s over the level's wall time, errors (any
 * request without a 200 and its `[DONE]`). Then a short request's inter-token latency
 * alone and beside long prompts, and `/health`'s latency during those prefills. Bounded:
 * each level runs `max(8, 2 × clients)` requests or 60 s, whichever ends first.
 *
 * ```sh
 * deno run --lock=deno.lock -A bench/serve_load.ts                # the table
 * deno run --lock=deno.lock -A bench/serve_load.ts --model gpt-tiny
 * deno run --lock=deno.lock -A bench/serve_load.ts --soak 600     # 16 clients for 600 s
 * ```
 *
 * `--soak S` runs 16 clients for S seconds instead and samples the server's resident
 * memory (VmRSS) every 30 s: it should stay flat, with no request lost.
 *
 * @module
 */

import { startServer } from "../tests/_serve_process.ts";

const arg = (name: string, fallback: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : fallback;
};
const MODEL = arg("--model", "gpt-small");
const SOAK = Number(arg("--soak", "0"));
const TOKENS = 32;

interface Outcome {
  ok: boolean;
  ttft: number;
  gaps: number[];
  tokens: number;
}

/** One streamed completion; its first-token time, gaps between pieces and token count. */
async function stream(base: string, prompt: string, maxTokens = TOKENS): Promise<Outcome> {
  const t0 = performance.now();
  const out: Outcome = { ok: false, ttft: NaN, gaps: [], tokens: 0 };
  try {
    const r = await fetch(`${base}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({
        prompt,
        max_tokens: maxTokens,
        temperature: 0.7,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    if (r.status !== 200) {
      await r.body?.cancel();
      return out;
    }
    let buffer = "", last = NaN;
    for await (const piece of r.body!.pipeThrough(new TextDecoderStream())) {
      buffer += piece;
      let at;
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        const data = buffer.slice(6, at);
        buffer = buffer.slice(at + 2);
        if (data === "[DONE]") {
          out.ok = true;
          continue;
        }
        const chunk = JSON.parse(data);
        if (chunk.error) return out;
        if (chunk.usage) out.tokens = chunk.usage.completion_tokens;
        if (chunk.choices?.[0]?.text) {
          const now = performance.now();
          if (Number.isNaN(last)) out.ttft = now - t0;
          else out.gaps.push(now - last);
          last = now;
        }
      }
    }
  } catch {
    out.ok = false;
  }
  return out;
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** `clients` clients, `requests` requests in all (or until `seconds`). */
async function level(base: string, clients: number, requests: number, seconds: number) {
  const outcomes: Outcome[] = [];
  let started = 0;
  const t0 = performance.now(), end = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    while (started < requests && performance.now() < end) {
      started++;
      outcomes.push(await stream(base, `client ${c} says hi`.padEnd(16, ".")));
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  return { outcomes, wall };
}

function rss(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

const server = await startServer([
  "--model",
  MODEL,
  "--max-queue",
  "128",
  ...(Deno.args.includes("--prefill-chunk") ? ["--prefill-chunk", arg("--prefill-chunk", "")] : []),
]);
const base = server.base;
try {
  await level(base, 4, 8, 30); // warm-up
  if (SOAK > 0) {
    const samples: [number, number][] = [[0, rss(server.pid)]];
    const t0 = performance.now();
    const timer = setInterval(() => {
      samples.push([Math.round((performance.now() - t0) / 1000), rss(server.pid)]);
    }, 30_000);
    const { outcomes, wall } = await level(base, 16, Infinity, SOAK);
    clearInterval(timer);
    samples.push([Math.round(wall), rss(server.pid)]);
    const tokens = outcomes.reduce((n, o) => n + o.tokens, 0);
    console.log(JSON.stringify({
      seconds: Math.round(wall),
      requests: outcomes.length,
      lost: outcomes.filter((o) => !o.ok).length,
      tokensPerSecond: Math.round(tokens / wall),
      ttftP50: pct(outcomes.map((o) => o.ttft), 50),
      ttftP99: pct(outcomes.map((o) => o.ttft), 99),
      rssMiB: samples.map(([t, m]) => `${t}s ${m.toFixed(1)}`),
    }));
  } else {
    console.log(`relaxvm serve --model ${MODEL}: 16-char prompts, ${TOKENS} tokens per request`);
    console.log(
      "| clients | requests | p50 TTFT ms | p99 TTFT ms | p50 ITL ms | p99 ITL ms | tokens/s | errors |",
    );
    console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (const clients of [1, 4, 16, 64]) {
      const { outcomes, wall } = await level(base, clients, Math.max(8, 2 * clients), 60);
      const ok = outcomes.filter((o) => o.ok);
      const ttft = ok.map((o) => o.ttft), gaps = ok.flatMap((o) => o.gaps);
      const tokens = ok.reduce((n, o) => n + o.tokens, 0);
      const f = (x: number) => x.toFixed(1);
      console.log(
        `| ${clients} | ${outcomes.length} | ${f(pct(ttft, 50))} | ${f(pct(ttft, 99))} | ${
          f(pct(gaps, 50))
        } | ${f(pct(gaps, 99))} | ${f(tokens / wall)} | ${outcomes.length - ok.length} |`,
      );
    }
    // A short request beside long prompts: the event loop keeps serving during prefills.
    const alone = await stream(base, "short request...", 64);
    // Nearly a whole context: one prefill of the whole prompt (the prefill chunk is 256).
    const context = MODEL === "gpt-tiny" ? 128 : 256;
    const longPrompt = "long ".repeat(60).slice(0, context - 2);
    let longOk = 0;
    let running = true;
    const healthMs: number[] = [];
    const longs = Array.from({ length: 2 }, async () => {
      while (running) if ((await stream(base, longPrompt, 1)).ok) longOk++;
    });
    const health = (async () => {
      while (running) {
        const t = performance.now();
        await (await fetch(`${base}/health`)).body?.cancel();
        healthMs.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 200));
    const beside = await stream(base, "short request...", 64);
    running = false;
    await Promise.all([...longs, health]);
    const f = (x: number) => x.toFixed(1);
    console.log(
      `short request's inter-token latency, p50 / p99 ms: alone ${f(pct(alone.gaps, 50))} / ${
        f(pct(alone.gaps, 99))
      }; beside two clients sending ${longPrompt.length}-token prompts back to back (${longOk} of them) ${
        f(pct(beside.gaps, 50))
      } / ${f(pct(beside.gaps, 99))}; /health p50 / max ms ${f(pct(healthMs, 50))} / ${
        f(Math.max(...healthMs))
      }`,
    );
  }
} finally {
  await server.stop();
}

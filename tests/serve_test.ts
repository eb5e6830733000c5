/**
 * `relaxvm serve` on loopback, driven by clients nobody here wrote: the official
 * `openai` npm package and `curl`; then hostile requests, a client that leaves, a
 * full queue and a SIGTERM drain. The server and the Deno clients are child
 * processes (`_serve_process.ts`, `_serve_client.ts`): the test runner has no network.
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import { ignoreWithoutWeights } from "./_minilm_checks.ts";
import { runClient, type ServerProcess, startServer } from "./_serve_process.ts";

const withMiniLM = !ignoreWithoutWeights();

async function withServer(args: string[], fn: (s: ServerProcess) => Promise<void>) {
  const server = await startServer(args);
  try {
    await fn(server);
  } finally {
    const status = await server.stop();
    assertEquals(status.code, 0, await server.stderr);
  }
}

async function curl(args: string[]): Promise<{ code: number; out: string }> {
  const { code, stdout } = await new Deno.Command("curl", {
    args: ["-sS", "--max-time", "60", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code, out: new TextDecoder().decode(stdout) };
}

Deno.test("serve: the openai npm client and curl get OpenAI's shapes; streamed text equals whole", async () => {
  await withServer(
    ["--model", "gpt-tiny", ...(withMiniLM ? ["--model", "minilm"] : [])],
    async (s) => {
      const r = await runClient("openai", [s.base, ...(withMiniLM ? ["--embeddings"] : [])]);
      assert((r.whole as string).length > 0);
      assertEquals(r.streamed, r.whole, "the same seed, streamed or not, the same text");
      assertEquals(r.wholeFinish, "length");
      assertEquals(r.finish, "length");
      assertEquals(r.role, "assistant");
      assertEquals(r.usage, r.wholeUsage);
      assertEquals((r.wholeUsage as { completion_tokens: number }).completion_tokens, 24);
      assertEquals(r.completionStreamed, r.completion);
      // n = 2: two choices; logit_bias +100 on "A" (id 65) makes every token an A.
      assertEquals(r.two, [{ index: 0, content: "AAAAAA" }, { index: 1, content: "AAAAAA" }]);
      assertEquals(r.badRequest, {
        status: 400,
        class: "BadRequestError",
        error: {
          message: "chat.completions.create: temperature must be a finite number ≥ 0, got -1",
          type: "invalid_request_error",
          param: "temperature",
          code: "invalid_value",
        },
      });
      assertEquals(r.unknownModel, 404);
      assertEquals(
        r.models,
        withMiniLM ? ["relaxvm-gpt-tiny", "all-MiniLM-L6-v2"] : ["relaxvm-gpt-tiny"],
      );
      if (withMiniLM) {
        const e = r.embeddings as {
          count: number;
          dims: number;
          vectors: number[][];
          float: number[];
          usage: { prompt_tokens: number };
        };
        assertEquals([e.count, e.dims], [3, 384]);
        // The client asks for base64 by default and decodes it: the floats agree with JSON's.
        const diff = Math.max(...e.float.map((x, i) => Math.abs(x - e.vectors[1][i])));
        assert(diff < 1e-5, `base64 and float vectors differ by ${diff}`);
        const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i], 0);
        assert(dot(e.vectors[0], e.vectors[1]) > dot(e.vectors[0], e.vectors[2]));
        assert(e.usage.prompt_tokens > 6);
      }

      // curl: whole, streamed (SSE ends with [DONE]), an error, health, metrics.
      const body = { prompt: "Hello", max_tokens: 8, temperature: 0 };
      const whole = await curl([`${s.base}/v1/completions`, "-d", JSON.stringify(body)]);
      const text = JSON.parse(whole.out).choices[0].text;
      const sse = await curl([
        "-N",
        `${s.base}/v1/completions`,
        "-d",
        JSON.stringify({ ...body, stream: true }),
      ]);
      const events = sse.out.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) =>
        e.slice(6)
      );
      assertEquals(events.at(-1), "[DONE]");
      assertEquals(events.slice(0, -1).map((e) => JSON.parse(e).choices[0].text).join(""), text);
      const bad = await curl(["-w", "%{http_code}", `${s.base}/v1/completions`, "-d", "{"]);
      assertMatch(bad.out, /"type":"invalid_request_error".*"code":"invalid_json".*400$/);
      assertEquals((await curl([`${s.base}/health`])).out, '{"status":"ok"}');
      const metrics = (await curl([`${s.base}/metrics`])).out;
      assertMatch(
        metrics,
        /relaxvm_requests_total\{endpoint="\/v1\/completions",status="200"\} [1-9]/,
      );
      assertMatch(metrics, /relaxvm_requests_total\{endpoint="\/v1\/completions",status="400"\} 1/);
      assertMatch(metrics, /relaxvm_time_to_first_token_seconds_count [1-9]/);
      assertMatch(metrics, /relaxvm_inter_token_latency_seconds_count [1-9]/);
      assertMatch(metrics, /relaxvm_kv_free_pages 33\n/);
    },
  );
});

Deno.test("serve: hostile requests are refused cleanly and the server keeps serving", async () => {
  await withServer(["--max-queue", "2", "--max-body-bytes", "65536"], async (s) => {
    const r = await runClient("hostile", [s.base]) as Record<string, {
      status: number;
      json: { error: { param: string | null; code: string | null; type: string } };
    }>;
    const refusal = (name: string, status: number, param: string | null, code: string | null) => {
      assertEquals(r[name].status, status, `${name}: ${JSON.stringify(r[name])}`);
      assertEquals([r[name].json.error.param, r[name].json.error.code], [param, code], name);
    };
    refusal("malformed", 400, null, "invalid_json");
    refusal("notObject", 400, null, "invalid_json");
    refusal("huge", 413, null, "body_too_large");
    refusal("hugeChunked", 413, null, "body_too_large");
    refusal("wrongType", 400, "max_tokens", "invalid_type");
    refusal("wrongMessages", 400, "messages", null);
    refusal("unknownField", 400, "tools", "unknown_parameter");
    refusal("control", 400, "prompt", "invalid_text");
    refusal("loneSurrogate", 400, "prompt", "invalid_text");
    refusal("tooManyTokens", 400, "max_tokens", "invalid_value");
    refusal("badTemperature", 400, "temperature", "invalid_value");
    refusal("longPrompt", 400, "prompt", "invalid_value");
    refusal("notFound", 404, null, "unknown_url");
    refusal("wrongMethod", 405, null, "method_not_allowed");
    assertEquals(r.tiny, { 200: 1000, 400: 1000 } as unknown);
    const garbage = String(r.garbage as unknown);
    assert(garbage.startsWith("HTTP/1.1 4") || garbage === "closed", garbage);
    const burst = r.burst as unknown as {
      ok: number;
      limited: number;
      other: string[];
      retryAfter: string;
      limitedBody: { error: { type: string; code: string } };
    };
    assertEquals(burst.ok + burst.limited, 24, JSON.stringify(burst));
    assert(burst.limited > 0 && burst.ok > 0, JSON.stringify(burst));
    assertEquals(burst.retryAfter, "1");
    assertEquals(burst.limitedBody.error.type, "rate_limit_error");
    assertEquals(burst.limitedBody.error.code, "queue_full");
    assertEquals(r.after.status, 200);
  });
});

Deno.test("serve: a client that disconnects cancels its request and frees its pages", async () => {
  await withServer([], async (s) => {
    const r = await runClient("disconnect", [s.base]);
    assertEquals(r.runningBefore, 1);
    assertEquals([r.running, r.free], [0, r.total]);
    assert((r.tokens as number) < 200, `the request ran on: ${r.tokens} tokens`);
  });
});

Deno.test("serve: SIGTERM drains: not ready at once, new work refused, running streams finish", async () => {
  const s = await startServer(["--model", "gpt-small"]);
  const r = await runClient("drain", [s.base, String(s.pid), "6"]);
  const status = await s.child.status;
  const stderr = await s.stderr;
  assertEquals(status.code, 0, stderr);
  assertMatch(stderr, /draining 6 requests[\s\S]*drained, stopped/);
  assertEquals(r.health, 503);
  assert(r.late === 503 || r.late === -1, `a late request got ${r.late}`);
  // Every stream ran to its max_tokens: none was cut by the shutdown.
  assertEquals(
    (r.results as { status: number; finish: string }[]).map((x) => [x.status, x.finish]),
    Array.from({ length: 6 }, () => [200, "length"]),
  );
});

Deno.test("serve: sockets are served while the engine steps (a forward of 10 ms at a time)", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net=127.0.0.1", "tests/_engine_io_child.ts"],
    cwd: new URL("../", import.meta.url),
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  const { steps } = JSON.parse(new TextDecoder().decode(stdout));
  // Before: about 30 forwards (300 ms) passed before the connection was accepted.
  assert(steps <= 5, `the connection waited ${steps} forwards`);
});

Deno.test("serve: past the drain deadline, running streams end with a 503 error event", async () => {
  const s = await startServer(["--model", "gpt-small", "--drain-ms", "200"]);
  const r = await runClient("drain", [s.base, String(s.pid), "6"]);
  assertEquals((await s.child.status).code, 0, await s.stderr);
  const results = r.results as { finish?: string; error?: { code: string; type: string } }[];
  const cut = results.filter((x) => x.error !== undefined);
  assert(cut.length > 0, JSON.stringify(results));
  for (const x of cut) {
    assertEquals([x.error!.type, x.error!.code], ["server_error", "server_shutting_down"]);
  }
  for (const x of results.filter((x) => x.error === undefined)) assertEquals(x.finish, "length");
});

Deno.test("serve: a request past the time limit gets a 504 and its pages back", async () => {
  await withServer(["--model", "gpt-small", "--timeout-ms", "300"], async (s) => {
    const slow = await curl([
      "-w",
      "%{http_code}",
      `${s.base}/v1/completions`,
      "-d",
      JSON.stringify({ prompt: "slow", max_tokens: 250 }),
    ]);
    assertMatch(slow.out, /"code":"timeout".*504$/);
    const metrics = (await curl([`${s.base}/metrics`])).out;
    assertMatch(metrics, /relaxvm_running_sequences 0\n/);
    const total = /relaxvm_kv_total_pages (\d+)/.exec(metrics)![1];
    assertMatch(metrics, new RegExp(`relaxvm_kv_free_pages ${total}\\n`));
  });
});

/** `relaxvm serve <args>` as a child; its exit code and stderr's lines. */
async function refusal(args: string[]): Promise<{ code: number; lines: string[] }> {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-env=INIT_CWD", "cli/main.ts", "serve", ...args],
    cwd: new URL("../", import.meta.url),
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code, lines: new TextDecoder().decode(stderr).trim().split("\n") };
}

Deno.test("serve: a missing package, an unknown model or tokenizer is refused with one clear line", async () => {
  for (
    const [args, message] of [
      [
        ["--model", "tvm:testdata/nope"],
        /^relaxvm: Error: no TVM package at \/.*\/testdata\/nope: it has no package\.json$/,
      ],
      [["--model", "tvm:"], /tvm: needs a package directory/],
      [
        ["--model", "nope"],
        /unknown model 'nope'; choose from gpt-tiny, gpt-small, gpt-text, minilm or tvm:<dir>/,
      ],
      [["--tokenizer", "words"], /--tokenizer must be ids or bytes, got 'words'/],
    ] as const
  ) {
    const { code, lines } = await refusal([...args]);
    assertEquals(code, 1);
    assertEquals(lines.length, 1, lines.join("\n"));
    assertMatch(lines[0], message);
  }
});

function requireWebGPU(): boolean {
  try {
    return Deno.env.get("RELAXVM_REQUIRE_WEBGPU") === "1";
  } catch {
    return false; // no --allow-env: treat as unset
  }
}

Deno.test("serve: a TVM package (tvm:<dir>) on WebGPU: the openai client, streamed text equals whole", async () => {
  const model = "tvm:testdata/tvm_webgpu/llama";
  let s: ServerProcess;
  try {
    s = await startServer(["--model", model]);
  } catch (e) {
    // Without an adapter the server says so in one line; ignored unless WebGPU is required.
    if (!/needs WebGPU/.test((e as Error).message) || requireWebGPU()) throw e;
    console.log(`ignored: ${(e as Error).message}`);
    return;
  }
  try {
    const r = await runClient("tvm", [s.base, model]);
    // --tokenizer ids (the default): the reply is ids of the package's 64, separated by spaces.
    assertMatch(r.whole as string, /^\d+( \d+){11}$/);
    for (const id of (r.whole as string).split(" ")) assert(Number(id) < 64, r.whole as string);
    assertEquals(r.streamed, r.whole, "the same seed, streamed or not, the same text");
    assertEquals(r.chunks, 12, "a chunk a token");
    assertEquals([r.wholeFinish, r.finish], ["length", "length"]);
    assert(r.other !== r.whole, "another seed, another text");
    // The prompt "1 2 3" and "4 5", joined by a space: 5 ids.
    assertEquals(r.usage, { prompt_tokens: 5, completion_tokens: 12, total_tokens: 17 });
    assertEquals(r.model, "llama");
    assertEquals(r.notAnId, {
      status: 400,
      param: "prompt",
      message: "the prompt's \"two\" is not a token id below 64 (this server's tokenizer is ids: " +
        "a prompt is token ids separated by spaces)",
    });
    assertEquals(r.models, ["llama"]);
  } finally {
    const status = await s.stop();
    assertEquals(status.code, 0, await s.stderr);
  }
  // A byte tokenizer needs 256 ids; a package without MLC's functions is no language model.
  for (
    const [args, message] of [
      [
        ["--model", model, "--tokenizer", "bytes"],
        /--tokenizer bytes needs a vocabulary of 256 ids \(one a byte\); .*llama has 64: serve it with --tokenizer ids/,
      ],
      [
        ["--model", "tvm:testdata/tvm_webgpu/mlp"],
        /the package has no embed, batch_prefill, batch_decode, create_paged_kv_cache/,
      ],
    ] as const
  ) {
    const { code, lines } = await refusal([...args]);
    assertEquals(code, 1);
    assertEquals(lines.length, 1, lines.join("\n"));
    assertMatch(lines[0], message);
  }
});

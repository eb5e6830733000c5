/**
 * The server's metrics in Prometheus' text format (`GET /metrics`): requests by endpoint
 * and status, the engine's queue, running sequences and free pages, tokens generated and
 * per second, and histograms of time to first token and inter-token latency.
 *
 * @module
 */

/** Upper bounds of the latency histograms' buckets, in seconds. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** A Prometheus histogram: cumulative buckets, a sum and a count. */
export class Histogram {
  readonly #counts = new Array<number>(BUCKETS.length).fill(0);
  #sum = 0;
  #count = 0;

  /** Records one observation, in seconds. */
  observe(seconds: number): void {
    this.#sum += seconds;
    this.#count++;
    for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]) this.#counts[i]++;
  }

  /** Observations so far. */
  get count(): number {
    return this.#count;
  }

  /** The exposition lines of the histogram `name`. */
  lines(name: string): string[] {
    const out = BUCKETS.map((b, i) => `${name}_bucket{le="${b}"} ${this.#counts[i]}`);
    out.push(`${name}_bucket{le="+Inf"} ${this.#count}`);
    out.push(`${name}_sum ${this.#sum}`, `${name}_count ${this.#count}`);
    return out;
  }
}

/** What the engine reports at a scrape. */
export interface EngineGauges {
  waiting: number;
  running: number;
  freePages: number;
  totalPages: number;
  generatedTokens: number;
}

/** The server's counters and histograms. */
export class Metrics {
  /** Time from a request's arrival to its first token. */
  readonly timeToFirstToken: Histogram = new Histogram();
  /** Time between two tokens of one choice. */
  readonly interTokenLatency: Histogram = new Histogram();
  readonly #requests = new Map<string, number>();
  /** (time in ms, tokens generated) samples of the last 10 s, for tokens/s. */
  readonly #samples: [number, number][] = [];

  /** Counts a request answered on `endpoint` with `status`. */
  request(endpoint: string, status: number): void {
    const key = `endpoint="${endpoint}",status="${status}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
  }

  /** Requests answered on `endpoint` with `status` so far. */
  requests(endpoint: string, status: number): number {
    return this.#requests.get(`endpoint="${endpoint}",status="${status}"`) ?? 0;
  }

  /** Tokens per second over the last 10 s, given the generated count now. */
  tokensPerSecond(generated: number, now = performance.now()): number {
    this.#samples.push([now, generated]);
    while (this.#samples.length > 1 && now - this.#samples[0][0] > 10_000) this.#samples.shift();
    const [t0, g0] = this.#samples[0];
    return now > t0 ? (generated - g0) / ((now - t0) / 1000) : 0;
  }

  /** The exposition text. */
  text(engine: EngineGauges | null, queuedEmbeddings: number, draining: boolean): string {
    const lines: string[] = [
      "# HELP relaxvm_requests_total HTTP requests answered, by endpoint and status.",
      "# TYPE relaxvm_requests_total counter",
      ...[...this.#requests].map(([labels, n]) => `relaxvm_requests_total{${labels}} ${n}`),
      "# HELP relaxvm_draining 1 while the server drains (SIGTERM): not ready.",
      "# TYPE relaxvm_draining gauge",
      `relaxvm_draining ${draining ? 1 : 0}`,
      "# HELP relaxvm_embedding_queue_depth Embedding requests waiting or running.",
      "# TYPE relaxvm_embedding_queue_depth gauge",
      `relaxvm_embedding_queue_depth ${queuedEmbeddings}`,
    ];
    if (engine !== null) {
      const gauge = (name: string, help: string, value: number, type = "gauge") =>
        lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${value}`);
      gauge("relaxvm_queue_depth", "Generation requests waiting for the engine.", engine.waiting);
      gauge("relaxvm_running_sequences", "Sequences in the engine's batch.", engine.running);
      gauge("relaxvm_kv_free_pages", "Free pages of the KV cache.", engine.freePages);
      gauge("relaxvm_kv_total_pages", "Pages of the KV cache.", engine.totalPages);
      gauge(
        "relaxvm_generated_tokens_total",
        "Tokens generated.",
        engine.generatedTokens,
        "counter",
      );
      gauge(
        "relaxvm_tokens_per_second",
        "Tokens generated per second over the last 10 s.",
        Math.round(this.tokensPerSecond(engine.generatedTokens) * 100) / 100,
      );
    }
    lines.push(
      "# HELP relaxvm_time_to_first_token_seconds Time from a request's arrival to its first token.",
      "# TYPE relaxvm_time_to_first_token_seconds histogram",
      ...this.timeToFirstToken.lines("relaxvm_time_to_first_token_seconds"),
      "# HELP relaxvm_inter_token_latency_seconds Time between two streamed pieces of a choice.",
      "# TYPE relaxvm_inter_token_latency_seconds histogram",
      ...this.interTokenLatency.lines("relaxvm_inter_token_latency_seconds"),
    );
    return lines.join("\n") + "\n";
  }
}

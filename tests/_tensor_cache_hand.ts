/**
 * A tensor cache laid out by hand (the tvmjs layout, not relaxvm's writer),
 * the bytes each tensor must hold, and ways to serve it to a program: for
 * the streamed-load tests on the CPU (tests/tensor_cache_streaming_test.ts)
 * and WebGPU (tests/webgpu/tensor_cache_suite.ts).
 */

import { ExecBuilder, Executable, type TensorCacheLoader } from "../mod.ts";
import { LOAD_CHUNK_BYTES } from "../builtins/tensor_cache/cache_shard_reader.ts";

/** Deterministic bytes (xorshift32). */
export function bytesOf(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

export interface Spec {
  name: string;
  dtype: string;
  shape: number[];
  format: "raw" | "f32-to-bf16";
  /** Bytes left free before the record (records may start at any offset). */
  gap: number;
}

/**
 * A one-shard cache laid out by hand: `index` (JSON text), `shard` (bytes),
 * and for each record the bytes its tensor must hold (bfloat16 widened:
 * the two bytes become the high half of a little-endian float32).
 */
export function handCache(specs: Spec[], tail = 0) {
  const width: Record<string, number> = { uint8: 1, int32: 4, float32: 4 };
  const parts: Uint8Array[] = [];
  const records: Record<string, unknown>[] = [];
  const expected = new Map<string, Uint8Array>();
  let at = 0;
  specs.forEach((s, i) => {
    const count = s.shape.reduce((a, b) => a * b, 1);
    const bf16 = s.format === "f32-to-bf16";
    const nbytes = count * (bf16 ? 2 : width[s.dtype]);
    const gap = bytesOf(s.gap, 99 + i);
    const raw = bytesOf(nbytes, 7 + i);
    // Finite values only for bfloat16 (exponent below all ones), so the widened bits are exact.
    if (bf16) { for (let k = 1; k < nbytes; k += 2) raw[k] &= 0xbf; }
    parts.push(gap, raw);
    at += s.gap;
    records.push({ ...s, gap: undefined, nbytes, byteOffset: at });
    at += nbytes;
    if (!bf16) expected.set(s.name, raw);
    else {
      const wide = new Uint8Array(2 * nbytes);
      for (let k = 0; k < count; k++) wide.set([0, 0, raw[2 * k], raw[2 * k + 1]], 4 * k);
      expected.set(s.name, wide);
    }
  });
  parts.push(bytesOf(tail, 5));
  const shard = new Uint8Array(at + tail);
  let o = 0;
  for (const p of parts) {
    shard.set(p, o);
    o += p.length;
  }
  const index = JSON.stringify({
    metadata: {},
    records: [{ dataPath: "shard_0.bin", format: "raw-shard", nbytes: shard.length, records }],
  });
  const tensorBytes = specs.reduce(
    (n, s) => n + Math.max(4, Math.ceil(expected.get(s.name)!.length / 4) * 4),
    0,
  );
  return { index, shard, expected, tensorBytes };
}

/** Records larger than a piece, at odd offsets, one bfloat16, a scalar, an empty one, a tail. */
export const BIG: Spec[] = [
  { name: "w_0", dtype: "uint8", shape: [3 * LOAD_CHUNK_BYTES + 3], format: "raw", gap: 0 },
  { name: "w_1", dtype: "float32", shape: [LOAD_CHUNK_BYTES / 4 + 1], format: "raw", gap: 5 },
  { name: "w_2", dtype: "float32", shape: [700_001], format: "f32-to-bf16", gap: 1 },
  { name: "w_3", dtype: "int32", shape: [], format: "raw", gap: 3 },
  { name: "w_4", dtype: "float32", shape: [0, 3], format: "raw", gap: 0 },
];

/** `main()`: loads `location`, returns `param_array_from_cache("w", -1)`. */
export function loaderProgram(location: string): Executable {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.tensor_cache.load", [location, ib.imm(1), ib.imm(0)]);
    ib.emit_call("vm.builtin.param_array_from_cache", ["w", ib.imm(-1)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  return Executable.load(ib.get().save());
}

export const LOCATION = "mem:/model/tensor-cache.json";

/** A loader serving `index` and a shard body made by `shard()` under `mem:/model/`. */
export function serve(index: string, shard: () => Uint8Array | Response): TensorCacheLoader {
  return (url) => {
    if (url.href === LOCATION) return new TextEncoder().encode(index);
    if (url.href === "mem:/model/shard_0.bin") return shard();
    return null;
  };
}

/** A Response streaming `bytes` in chunks of the sizes `sizes` gives, in turn. */
export function streamed(
  bytes: Uint8Array,
  sizes: number[],
  onPull: (sent: number) => void = () => {},
): Response {
  let at = 0, k = 0;
  return new Response(
    new ReadableStream({
      pull(c) {
        if (at >= bytes.length) return c.close();
        const n = sizes[k++ % sizes.length];
        onPull(at);
        c.enqueue(bytes.slice(at, at + n));
        at += n;
      },
    }),
  );
}

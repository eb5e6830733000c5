/**
 * The CPU kernels read their inputs through `readView()`: reading a sealed weight leaves it
 * sealed, so the CPU kernels' copy of it (kernels/cpu/wasm/resident.ts) stays usable. A
 * kernel that took `cpuView()` of an input would end the seal on every call (a copy made,
 * then given back, then made again), silently: only `linear` and `take` read through
 * `readView()` before.
 */
import { assert, assertEquals } from "@std/assert";
import { cpuBackend } from "../kernels/cpu/backend.ts";
import { KERNEL_NAMES, type OpBackend } from "../kernels/kernel_backend.ts";
import { NDArray } from "../devices/ndarray.ts";
import { tensor } from "../devices/tensor.ts";

const K = cpuBackend as OpBackend;

/** A sealed float32 tensor of `shape` with values 1, 2, 3, … (scaled small). */
function sealed(shape: number[]): NDArray {
  const n = shape.reduce((a, b) => a * b, 1);
  return tensor(Float32Array.from({ length: n }, (_, i) => (i + 1) / n), { shape }).seal();
}

/** Each kernel, run on sealed inputs into an output it is given. */
const CASES: Record<string, () => { inputs: NDArray[]; out: NDArray }> = {
  unary: () => {
    const x = sealed([4, 8]), out = NDArray.empty([4, 8], "float32");
    K.unary("exp", x, out);
    return { inputs: [x], out };
  },
  binary: () => {
    const a = sealed([4, 8]), b = sealed([8]), out = NDArray.empty([4, 8], "float32");
    K.binary("add", a, b, out);
    return { inputs: [a, b], out };
  },
  compare: () => {
    const a = sealed([4, 8]), b = sealed([4, 8]), out = NDArray.empty([4, 8], "bool");
    K.compare("less", a, b, out);
    return { inputs: [a, b], out };
  },
  where: () => {
    const c = tensor(new Uint8Array([1, 0, 1, 0]), { shape: [4], dtype: "bool" }).seal();
    const x = sealed([4]), y = sealed([4]), out = NDArray.empty([4], "float32");
    K.where(c, x, y, out);
    return { inputs: [c, x, y], out };
  },
  matmul: () => {
    const a = sealed([3, 16]), b = sealed([16, 5]), out = NDArray.empty([3, 5], "float32");
    K.matmul(a, b, out);
    return { inputs: [a, b], out };
  },
  linear: () => {
    const x = sealed([2, 16]), w = sealed([5, 16]), bias = sealed([5]);
    const out = NDArray.empty([2, 5], "float32");
    K.linear(x, w, bias, out);
    return { inputs: [x, w, bias], out };
  },
  reduce: () => {
    const x = sealed([4, 8]), out = NDArray.empty([4], "float32");
    K.reduce("sum", x, [1], out);
    return { inputs: [x], out };
  },
  softmax: () => {
    const x = sealed([4, 8]), out = NDArray.empty([4, 8], "float32");
    K.softmax(x, out);
    return { inputs: [x], out };
  },
  layerNorm: () => {
    const x = sealed([4, 8]), g = sealed([8]), b = sealed([8]);
    const out = NDArray.empty([4, 8], "float32");
    K.layerNorm(x, g, b, 1e-5, out);
    return { inputs: [x, g, b], out };
  },
  transpose: () => {
    const x = sealed([4, 8]), out = NDArray.empty([8, 4], "float32");
    K.transpose(x, [1, 0], out);
    return { inputs: [x], out };
  },
  cast: () => {
    const x = sealed([4, 8]), out = NDArray.empty([4, 8], "float32");
    K.cast(x, out); // the same dtype: a copy of the bits
    const y = sealed([4, 8]), out2 = NDArray.empty([4, 8], "int32");
    K.cast(y, out2);
    out2.dispose();
    return { inputs: [x, y], out };
  },
  take: () => {
    const x = sealed([6, 4]), i = tensor(new Int32Array([5, 0, 2]), { shape: [3] }).seal();
    const out = NDArray.empty([3, 4], "float32");
    K.take(x, i, 0, "fast", out);
    return { inputs: [x, i], out };
  },
  stridedSlice: () => {
    const x = sealed([4, 8]), out = NDArray.empty([2, 4], "float32");
    K.stridedSlice(x, [1, 0], [2, 2], out);
    return { inputs: [x], out };
  },
  concat: () => {
    const a = sealed([2, 8]), b = sealed([3, 8]), out = NDArray.empty([5, 8], "float32");
    K.concat([a, b], 0, out);
    return { inputs: [a, b], out };
  },
  argmax: () => {
    const x = sealed([4, 8]), out = NDArray.empty([4], "int32");
    K.argmax(x, 4, 8, 1, out);
    return { inputs: [x], out };
  },
  sampleTopP: () => {
    const logits = sealed([2, 8]), u = sealed([2]), out = NDArray.empty([2], "int32");
    K.sampleTopP(logits, u, 1, 0.9, out);
    return { inputs: [logits, u], out };
  },
  causalMask: () => {
    const x = sealed([1, 1, 4, 4]), out = NDArray.empty([1, 1, 4, 4], "float32");
    K.causalMask(x, 0, out);
    return { inputs: [x], out };
  },
  conv2d: () => {
    const x = sealed([1, 4, 5, 5]), w = sealed([6, 2, 3, 3]), bias = sealed([6]);
    const out = NDArray.empty([1, 6, 3, 3], "float32");
    const geometry = {
      strides: [2, 2],
      padBegin: [1, 1],
      dilations: [1, 1],
      inputDilations: [1, 1],
      groups: 2,
    };
    K.conv2d(x, w, bias, geometry, out);
    return { inputs: [x, w, bias], out };
  },
  attention: () => {
    const q = sealed([1, 2, 3, 4]), k = sealed([1, 2, 3, 4]), v = sealed([1, 2, 3, 4]);
    const out = NDArray.empty([1, 2, 3, 4], "float32");
    K.attention(q, k, v, 0.5, 0, out, "BHSD");
    return { inputs: [q, k, v], out };
  },
};

Deno.test("every CPU kernel but paged attention leaves its sealed inputs sealed", () => {
  // A new op's kernel is checked too: every op has a case here but paged attention, which
  // writes this step's keys and values into its pages (a write, which must end a seal).
  assertEquals(
    [...Object.keys(CASES), "pagedAttention"].sort(),
    [...KERNEL_NAMES].sort(),
  );
  const unsealed: string[] = [];
  for (const [name, run] of Object.entries(CASES)) {
    const { inputs, out } = run();
    inputs.forEach((t, i) => {
      if (!t.sealed) unsealed.push(`${name} input ${i}`);
    });
    for (const t of inputs) t.dispose();
    out.dispose();
  }
  assertEquals(unsealed, []);
});

Deno.test("a CPU kernel's input is readable as before: results do not depend on the seal", () => {
  const a = sealed([3, 16]), b = sealed([16, 5]);
  const out = NDArray.empty([3, 5], "float32"), plain = NDArray.empty([3, 5], "float32");
  const a2 = tensor(a.dataSync() as Float32Array, { shape: [3, 16] });
  const b2 = tensor(b.dataSync() as Float32Array, { shape: [16, 5] });
  K.matmul(a, b, out);
  K.matmul(a2, b2, plain);
  assertEquals(out.dataSync(), plain.dataSync());
  assert(a.sealed && b.sealed);
  for (const t of [a, b, a2, b2, out, plain]) t.dispose();
});

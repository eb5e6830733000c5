/**
 * The WebAssembly emitter (kernels/cpu/wasm/emitter.ts) at the instruction
 * level: LEB128 and instruction encodings against the examples and tables
 * of the WebAssembly specification, a whole module byte for byte, and what
 * the emitted code computes when run; then the two matrix kernels of
 * gemm_module.ts called directly on packed operands and compared with a
 * plain loop, and the fallback to TypeScript when WebAssembly is refused.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import {
  FunctionCode,
  ModuleBuilder,
  Op,
  SimdOp,
  ValType,
  writeI32,
  writeU32,
} from "../kernels/cpu/wasm/emitter.ts";
import { DOT_ROWS, gemmModuleBytes, MR, NR } from "../kernels/cpu/wasm/gemm_module.ts";
import { packPanels } from "../kernels/cpu/wasm/resident.ts";
import {
  cpuKernelInfo,
  forgetCpuKernels,
  type GemmExports,
  setCpuKernelMode,
} from "../kernels/cpu/wasm/runtime.ts";
import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";

installBuiltins();

const u32 = (v: number) => {
  const out: number[] = [];
  writeU32(out, v);
  return out;
};
const i32 = (v: number) => {
  const out: number[] = [];
  writeI32(out, v);
  return out;
};

Deno.test("LEB128 encodings match the specification's examples", () => {
  assertEquals(u32(0), [0x00]);
  assertEquals(u32(127), [0x7f]);
  assertEquals(u32(128), [0x80, 0x01]);
  assertEquals(u32(624485), [0xe5, 0x8e, 0x26]);
  assertEquals(u32(0xffffffff), [0xff, 0xff, 0xff, 0xff, 0x0f]);
  assertEquals(i32(63), [0x3f]);
  assertEquals(i32(64), [0xc0, 0x00]);
  assertEquals(i32(-64), [0x40]);
  assertEquals(i32(-65), [0xbf, 0x7f]);
  assertEquals(i32(-123456), [0xc0, 0xbb, 0x78]);
  assertEquals(i32(0xffffffff), [0x7f]); // wraps to -1
  assertThrows(() => u32(-1), RangeError, "u32");
  assertThrows(() => i32(2 ** 32), RangeError, "i32");
});

Deno.test("instructions encode as the specification's opcode tables say", () => {
  const f = new FunctionCode(2);
  f.get(1).i32(-1).op(Op.i32Add).set(0);
  assertEquals(f.bytes, [0x20, 0x01, 0x41, 0x7f, 0x6a, 0x21, 0x00]);
  const g = new FunctionCode(0);
  g.simd(SimdOp.f32x4Add).simd(SimdOp.f32x4RelaxedMadd).simdMem(SimdOp.v128Load32Splat, 2, 4);
  g.simdLane(SimdOp.f32x4ExtractLane, 3).mem(Op.f32Store, 2, 200);
  assertEquals(g.bytes, [
    ...[0xfd, 0xe4, 0x01], // f32x4.add = 0xfd 228
    ...[0xfd, 0x85, 0x02], // f32x4.relaxed_madd = 0xfd 0x105
    ...[0xfd, 0x09, 0x02, 0x04], // v128.load32_splat align=2 offset=4
    ...[0xfd, 0x1f, 0x03], // f32x4.extract_lane 3
    ...[0x38, 0x02, 0xc8, 0x01], // f32.store align=2 offset=200
  ]);
  const h = new FunctionCode(0);
  h.f32(1.5);
  assertEquals(h.bytes, [0x43, 0x00, 0x00, 0xc0, 0x3f]);
  assertThrows(() => h.end(), Error, "without an open block");
  h.block();
  assertThrows(() => h.encode(), Error, "left open");
});

Deno.test("a module encodes byte for byte: types, memory import, functions, exports, code", () => {
  const empty = new ModuleBuilder(null);
  empty.function("f", []);
  assertEquals([...empty.encode()], [
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...[0x01, 0x04, 0x01, 0x60, 0x00, 0x00], // type section: () -> ()
    ...[0x03, 0x02, 0x01, 0x00], // function section: type 0
    ...[0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00], // export "f" = func 0
    ...[0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b], // code: no locals, end
  ]);
  const withMemory = new ModuleBuilder({ module: "e", name: "m", minPages: 1, maxPages: 2 });
  withMemory.function("g", [ValType.i32], [ValType.i32]).get(0);
  const bytes = [...withMemory.encode()];
  // After the header and the type section (i32) -> (i32): the import section, one import
  // "e" "m" of a memory with min and max.
  assertEquals(bytes.slice(16, 27), [
    0x02,
    0x09,
    0x01,
    0x01,
    0x65,
    0x01,
    0x6d,
    0x02,
    0x01,
    0x01,
    0x02,
  ]);
  assert(WebAssembly.validate(new Uint8Array(bytes)));
  assertThrows(
    () => new ModuleBuilder({ module: "e", name: "m", minPages: 1, shared: true }).encode(),
    Error,
    "maxPages",
  );
});

Deno.test("emitted code runs: locals, loops, memory and SIMD lanes", () => {
  const m = new ModuleBuilder({ module: "env", name: "memory", minPages: 1 });
  // sum(n) = 0 + 3 + 6 + ... below n, with forLoop.
  const sum = m.function("sum", [ValType.i32], [ValType.i32]);
  const i = sum.local(ValType.i32), s = sum.local(ValType.i32);
  sum.forLoop(i, 0, 0, 3, () => sum.get(s).get(i).op(Op.i32Add).set(s));
  sum.get(s);
  // axpy4(p): mem[p..p+4] = mem[p..p+4] * 2.5 + (1, 2, 3, 4), then lane 2 as f32.
  const axpy = m.function("axpy4", [ValType.i32], [ValType.f32]);
  const v = axpy.local(ValType.v128);
  axpy.get(0).get(0).simdMem(SimdOp.v128Load, 4).f32(2.5).simd(SimdOp.f32x4Splat)
    .simd(SimdOp.f32x4Mul).f32x4Const([1, 2, 3, 4]).simd(SimdOp.f32x4Add).tee(v)
    .simdMem(SimdOp.v128Store, 4);
  axpy.get(v).simdLane(SimdOp.f32x4ExtractLane, 2);
  const memory = new WebAssembly.Memory({ initial: 1 });
  const ex = new WebAssembly.Instance(new WebAssembly.Module(m.encode()), { env: { memory } })
    .exports as { sum(n: number): number; axpy4(p: number): number };
  assertEquals(ex.sum(10), 0 + 3 + 6 + 9);
  assertEquals(ex.sum(0), 0);
  const f = new Float32Array(memory.buffer);
  f.set([1, -2, 4, 0.5], 4);
  assertEquals(ex.axpy4(16), 13);
  assertEquals([...f.subarray(4, 8)], [3.5, -3, 13, 5.25]);
});

Deno.test("the row kernels' instructions encode as the opcode tables say and compute", () => {
  const f = new FunctionCode(0);
  f.op(Op.f32Div).op(Op.f32Sqrt).op(Op.f32Max).op(Op.f32ConvertI32S);
  f.op(Op.f64Add).op(Op.f64Div).op(Op.f32DemoteF64).op(Op.f64ConvertI32S).op(Op.f64PromoteF32);
  f.simd(SimdOp.i32x4GtS).simdLane(SimdOp.f64x2ExtractLane, 1);
  f.simdMem(SimdOp.v128Load64Zero, 0, 8).simd(SimdOp.f64x2PromoteLowF32x4).simd(SimdOp.f64x2Add);
  f.i32x4Const([0, 1, -1, 2]);
  assertEquals(f.bytes, [
    ...[0x95, 0x91, 0x97, 0xb2], // f32.div, f32.sqrt, f32.max, f32.convert_i32_s
    ...[0xa0, 0xa3, 0xb6, 0xb7, 0xbb], // f64.add, f64.div, f32.demote_f64, f64.convert_i32_s, f64.promote_f32
    ...[0xfd, 0x3b, 0xfd, 0x21, 0x01], // i32x4.gt_s, f64x2.extract_lane 1
    ...[0xfd, 0x5d, 0x00, 0x08], // v128.load64_zero align=0 offset=8
    ...[0xfd, 0x5f, 0xfd, 0xf0, 0x01], // f64x2.promote_low_f32x4, f64x2.add = 0xfd 240
    ...[0xfd, 0x0c, 0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0], // v128.const i32x4
  ]);
  const m = new ModuleBuilder({ module: "env", name: "memory", minPages: 1 });
  // scalar(n, x) = max(sqrt(f32(n)) / x, 0.25)
  m.function("scalar", [ValType.i32, ValType.f32], [ValType.f32])
    .get(0).op(Op.f32ConvertI32S).op(Op.f32Sqrt).get(1).op(Op.f32Div).f32(0.25).op(Op.f32Max);
  // pairs(p, n) = f32((mem f32 [p, p+4) promoted pairwise and added, plus the next pair) / n)
  const pairs = m.function("pairs", [ValType.i32, ValType.i32], [ValType.f32]);
  const acc = pairs.local(ValType.v128);
  pairs.get(0).simdMem(SimdOp.v128Load64Zero, 0).simd(SimdOp.f64x2PromoteLowF32x4);
  pairs.get(0).simdMem(SimdOp.v128Load64Zero, 0, 8).simd(SimdOp.f64x2PromoteLowF32x4);
  pairs.simd(SimdOp.f64x2Add).set(acc);
  pairs.get(acc).simdLane(SimdOp.f64x2ExtractLane, 0).get(acc).simdLane(SimdOp.f64x2ExtractLane, 1);
  pairs.op(Op.f64Add).get(1).op(Op.f64ConvertI32S).op(Op.f64Div).op(Op.f32DemoteF64);
  // mask(k) = how many lanes of (k > [0, 1, 2, 3]) are set, read back from memory at 64
  const mask = m.function("mask", [ValType.i32]);
  mask.i32(64).get(0).simd(SimdOp.i32x4Splat).i32x4Const([0, 1, 2, 3]).simd(SimdOp.i32x4GtS);
  mask.simdMem(SimdOp.v128Store, 0);
  // promote(x) = f32(f64(x) + f64(x))
  m.function("promote", [ValType.f32], [ValType.f32])
    .get(0).op(Op.f64PromoteF32).get(0).op(Op.f64PromoteF32).op(Op.f64Add).op(Op.f32DemoteF64);
  const memory = new WebAssembly.Memory({ initial: 1 });
  const ex = new WebAssembly.Instance(new WebAssembly.Module(m.encode()), { env: { memory } })
    .exports as {
      scalar(n: number, x: number): number;
      pairs(p: number, n: number): number;
      mask(k: number): void;
      promote(x: number): number;
    };
  assertEquals(ex.scalar(16, 2), 2);
  assertEquals(ex.scalar(16, 100), 0.25);
  assertEquals(ex.scalar(-1, 1), NaN);
  // 2^24 + 1 + 1 is exact in float64, not float32: the sum is float64's.
  new Float32Array(memory.buffer).set([2 ** 24, 1, 1, 2], 0);
  assertEquals(ex.pairs(0, 1), 2 ** 24 + 4);
  assertEquals(ex.pairs(0, 4), Math.fround((2 ** 24 + 4) / 4));
  for (const k of [0, 1, 3, 4]) {
    ex.mask(k);
    assertEquals(
      [...new Int32Array(memory.buffer, 64, 4)],
      [0, 1, 2, 3].map((l) => (k > l ? -1 : 0)),
    );
  }
  assertEquals(ex.promote(3.4e38), Infinity); // 6.8e38 is past float32's range
});

function random(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    out[i] = s / 2147483648 * 2 - 1;
  }
  return out;
}

for (const relaxed of [false, true]) {
  const level = relaxed ? "relaxed SIMD" : "SIMD128";
  Deno.test(`gemm_tiles, pack_panels, dot_rows and dot_panels (${level}) compute products as a plain loop does`, () => {
    const bytes = gemmModuleBytes(relaxed, { module: "env", name: "memory", minPages: 4 });
    // Deno 2.9 (V8) has relaxed SIMD: both levels must validate here.
    assert(WebAssembly.validate(bytes), `${level} does not validate`);
    const memory = new WebAssembly.Memory({ initial: 4 });
    const ex = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { memory } })
      .exports as unknown as GemmExports;
    const f = new Float32Array(memory.buffer);
    // Two tile rows, three column panels; A row-major [rows][lda] (lda > K: padded rows), B
    // panels [K][NR]. K = 3, 5 and 8: the remainder loop alone, the unrolled loop and the
    // remainder, the unrolled alone. Each product runs once whole and once in two blocks of k
    // (the second accumulating into C), as gemm.ts's K-blocking calls it.
    for (const K of [3, 5, 8, 13]) {
      for (const split of [K, 4, 1]) {
        if (split > K) continue;
        const mTiles = 2, nPanels = 3, ldc = nPanels * NR + 4, lda = K + 3;
        const ap = random(mTiles * MR * lda, K), bp = random(nPanels * K * NR, 2);
        const apOff = 0, bpOff = 1024, cpOff = 2048;
        f.set(ap, apOff);
        f.set(bp, bpOff);
        f.fill(7, cpOff, cpOff + mTiles * MR * ldc);
        for (let k0 = 0; k0 < K; k0 += split) {
          const kc = Math.min(split, K - k0);
          ex.gemm_tiles(
            (apOff + k0) * 4,
            (bpOff + k0 * NR) * 4,
            cpOff * 4,
            mTiles,
            nPanels,
            kc,
            lda,
            K,
            ldc,
            k0 > 0 ? 1 : 0,
          );
        }
        for (let r = 0; r < mTiles * MR; r++) {
          for (let c = 0; c < ldc; c++) {
            const got = f[cpOff + r * ldc + c];
            if (c >= nPanels * NR) {
              assertEquals(got, 7, `C padding column ${c} must stay untouched`);
              continue;
            }
            let want = 0;
            const p0 = Math.floor(c / NR);
            for (let k = 0; k < K; k++) {
              want += ap[r * lda + k] * bp[p0 * K * NR + k * NR + c % NR];
            }
            assert(
              Math.abs(got - want) <= 1e-5,
              `K=${K} in blocks of ${split}: C[${r}, ${c}] = ${got}, expected ${want}`,
            );
          }
        }
      }
    }
    // pack_panels: two panels of a B of 5 rows, 19 floats apart, from column 2 of the copy at
    // a byte address not a multiple of 16; past the panels stays untouched.
    {
      const K = 5, lds = 19, rawAt = 3000 + 1, packAt = 3200;
      const raw = random(K * lds, 11);
      f.set(raw, rawAt);
      f.fill(7, packAt, packAt + 2 * K * NR + 4);
      ex.pack_panels((rawAt + 2) * 4, packAt * 4, K, lds, 2);
      for (let p = 0; p < 2; p++) {
        for (let k = 0; k < K; k++) {
          for (let s = 0; s < NR; s++) {
            assertEquals(f[packAt + (p * K + k) * NR + s], raw[k * lds + 2 + p * NR + s]);
          }
        }
      }
      assertEquals([...f.subarray(packAt + 2 * K * NR, packAt + 2 * K * NR + 4)], [7, 7, 7, 7]);
    }
    // dot_rows: 8 rows of a weight [rows, Kp], Kp = 16.
    const rows = 2 * DOT_ROWS, Kp = 16;
    const x = random(Kp, 3), w = random(rows * Kp, 4);
    f.set(x, 0);
    f.set(w, 64);
    ex.dot_rows(0, 64 * 4, 4096 * 4, rows, Kp);
    for (let j = 0; j < rows; j++) {
      let want = 0;
      for (let k = 0; k < Kp; k++) want += x[k] * w[j * Kp + k];
      assert(Math.abs(f[4096 + j] - want) <= 1e-5, `out[${j}] = ${f[4096 + j]}, expected ${want}`);
    }
    // dot_panels: the same weight with 7 of its 8 rows, packed in panels (the 8th row zero),
    // at a byte address not a multiple of 16 × 4 rows, to catch an address that resets.
    const n = rows - 1, packedAt = 8192 + 4;
    f.fill(NaN, packedAt, packedAt + rows * Kp); // anything left unwritten would show
    packPanels(w, n, Kp, f, packedAt);
    // The panel layout itself, by hand: [row group][8 values of K][row in group][8]. The
    // last 8 floats are the zero row's values 8..15.
    assertEquals(f.slice(packedAt + 8, packedAt + 16), w.slice(Kp, Kp + 8));
    assertEquals(f.slice(packedAt + 40, packedAt + 48), w.slice(Kp + 8, Kp + 16));
    assertEquals([...f.slice(packedAt + 8 * Kp - 8, packedAt + 8 * Kp)], new Array(8).fill(0));
    f.fill(7, 4096, 4096 + rows);
    ex.dot_panels(0, packedAt * 4, 4096 * 4, rows, Kp);
    for (let j = 0; j < rows; j++) {
      let want = 0;
      for (let k = 0; k < Kp && j < n; k++) want += x[k] * w[j * Kp + k];
      assert(
        Math.abs(f[4096 + j] - want) <= 1e-5,
        `panels out[${j}] = ${f[4096 + j]}, expected ${want}`,
      );
    }
  });
}

Deno.test("where WebAssembly cannot be compiled, the TypeScript kernels run and it is said once", async () => {
  const realModule = WebAssembly.Module;
  const warnings: unknown[][] = [];
  const realWarn = console.warn;
  // What a page whose CSP lacks 'wasm-unsafe-eval' does to new WebAssembly.Module.
  (WebAssembly as { Module: unknown }).Module = function () {
    throw new WebAssembly.CompileError("Refused to compile or instantiate WebAssembly module");
  };
  console.warn = (...args: unknown[]) => warnings.push(args);
  forgetCpuKernels();
  setCpuKernelMode("wasm");
  try {
    const matmul = getGlobalFunc("vm.op.matmul")!;
    const av = random(6 * 5, 5), bv = random(5 * 9, 6);
    using a = tensor(av, { shape: [6, 5] });
    using b = tensor(bv, { shape: [5, 9] });
    for (let round = 0; round < 2; round++) {
      using c = matmul(a, b) as NDArray;
      const got = await c.data() as Float32Array;
      for (let i = 0; i < 6; i++) {
        for (let j = 0; j < 9; j++) {
          let want = 0;
          for (let k = 0; k < 5; k++) want += av[i * 5 + k] * bv[k * 9 + j];
          assert(Math.abs(got[i * 9 + j] - want) <= 1e-5);
        }
      }
    }
    const info = cpuKernelInfo();
    assertEquals(info.simd, null);
    assert(info.reason?.includes("Refused to compile"), info.reason ?? "no reason");
    assertEquals(warnings.length, 1);
  } finally {
    (WebAssembly as { Module: unknown }).Module = realModule;
    console.warn = realWarn;
    setCpuKernelMode("auto");
    forgetCpuKernels();
  }
  assert(cpuKernelInfo().simd !== null, "WebAssembly compiles again once allowed");
});

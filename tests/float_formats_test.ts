// 16-bit float conversions against the builtins specification's reference
// values (§7.1, §7.2) and, for float16, against the runtime's Float16Array.
import { assertEquals } from "@std/assert";
import {
  bfloat16BitsToFloat32,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToBfloat16BitsRounded,
  float32ToFloat16Bits,
} from "../ground/float_formats.ts";

const fromBits = (b: number) => new Float32Array(new Uint32Array([b]).buffer)[0];
const hex = (n: number) => `0x${n.toString(16).padStart(4, "0")}`;

Deno.test("float32 -> bfloat16, tvmjs's cache rule: reference values", () => {
  const cases: [number, number][] = [
    [1.0, 0x3f80],
    [fromBits(0x3f808000), 0x3f80], // a tie, even
    [fromBits(0x3f818000), 0x3f82], // a tie, odd
    [Math.PI, 0x4049],
    [-2.5, 0xc020],
    [0.1, 0x3dcd],
    [65504, 0x4780],
    [fromBits(0x7f7f0906), 0x7f7f],
    [fromBits(0x7f7fffff), 0x7f7f], // FLT_MAX clips to the largest bfloat16
    [Infinity, 0x7f80],
    [-Infinity, 0xff80],
    [NaN, 0x7fc0],
    [fromBits(0x000116c2), 0x0001],
    [-0, 0x8000],
  ];
  for (const [v, bits] of cases) assertEquals(hex(float32ToBfloat16Bits(v)), hex(bits), `${v}`);
  assertEquals(bfloat16BitsToFloat32(0x3f80), 1);
  assertEquals(bfloat16BitsToFloat32(0xc020), -2.5);
  assertEquals(Object.is(bfloat16BitsToFloat32(0x8000), -0), true);
});

Deno.test("float32 -> bfloat16 for casts: overflow rounds to infinity, NaN stays NaN", () => {
  assertEquals(hex(float32ToBfloat16BitsRounded(fromBits(0x7f7fffff))), "0x7f80");
  assertEquals(hex(float32ToBfloat16BitsRounded(1.0)), "0x3f80");
  assertEquals(hex(float32ToBfloat16BitsRounded(fromBits(0x3f818000))), "0x3f82");
  assertEquals(hex(float32ToBfloat16BitsRounded(fromBits(0x7fffffff))), "0x7fff");
  assertEquals(Number.isNaN(bfloat16BitsToFloat32(float32ToBfloat16BitsRounded(NaN))), true);
});

Deno.test("float32 -> float16: reference values, round to nearest even", () => {
  const cases: [number, number][] = [
    [1.0, 0x3c00],
    [65504, 0x7bff],
    [65519, 0x7bff],
    [65520, 0x7c00],
    [0.1, 0x2e66],
    [1 / 3, 0x3555],
    [5.96e-8, 0x0001],
    [2.9802322387695312e-8, 0x0000], // exactly half the smallest subnormal: ties to even
    [2.9802326e-8, 0x0001],
    [NaN, 0x7e00],
    [-Infinity, 0xfc00],
    [-0, 0x8000],
  ];
  for (const [v, bits] of cases) assertEquals(hex(float32ToFloat16Bits(v)), hex(bits), `${v}`);
});

Deno.test("float16 conversions agree with Float16Array on every half and many floats", () => {
  const F16 = (globalThis as Record<string, unknown>).Float16Array as
    | typeof Float16Array
    | undefined;
  if (F16 === undefined) return; // nothing to compare with
  const halves = new Uint16Array(65536).map((_, i) => i);
  const values = new F16(halves.buffer);
  for (let i = 0; i < 65536; i++) {
    const mine = float16BitsToFloat32(i);
    if (Number.isNaN(values[i])) assertEquals(Number.isNaN(mine), true);
    else assertEquals(Object.is(mine, values[i]), true, `bits ${hex(i)}`);
  }
  const probe = new F16(1), probeBits = new Uint16Array(probe.buffer);
  let seed = 1;
  for (let i = 0; i < 200000; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    const v = fromBits(seed); // every float32 bit pattern is fair game
    if (Number.isNaN(v)) continue;
    probe[0] = Math.fround(v);
    assertEquals(hex(float32ToFloat16Bits(v)), hex(probeBits[0]), `${v}`);
  }
});

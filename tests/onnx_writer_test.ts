/**
 * The benchmarks' hand-written protobuf encoder (bench/_onnx_writer.ts, which
 * writes the ONNX models of the onnxruntime peers) against the byte strings
 * of the protobuf encoding guide ("Protocol Buffers: Encoding"): varints,
 * negative int64, strings, nested messages, fixed32 floats; and a tensor of
 * 16 MiB, which a spread into an array would overflow the stack on.
 */

import { assertEquals } from "@std/assert";
import { Float, floatTensor, message } from "../bench/_onnx_writer.ts";

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(" ");

Deno.test("onnx writer: the encoding guide's examples", () => {
  // Test1 { a: 150 }
  assertEquals(hex(message([[1, 150]])), "08 96 01");
  // Test2 { b: "testing" }
  assertEquals(hex(message([[2, "testing"]])), "12 07 74 65 73 74 69 6e 67");
  // Test3 { c: Test1 { a: 150 } }
  assertEquals(hex(message([[3, [[1, 150]]]])), "1a 03 08 96 01");
  // int64 -2: ten bytes of two's complement.
  assertEquals(hex(message([[1, -2]])), "08 fe ff ff ff ff ff ff ff ff 01");
  // float 1.0 as fixed32 (wire type 5), little-endian IEEE 754.
  assertEquals(hex(message([[2, new Float(1)]])), "15 00 00 80 3f");
  // Repeated fields keep their order; 2^31 needs five varint bytes.
  assertEquals(hex(message([[1, 1], [1, 2 ** 31]])), "08 01 08 80 80 80 80 08");
});

Deno.test("onnx writer: a 16 MiB initializer is written whole, its length prefixed", () => {
  const n = 4 * 2 ** 20, data = new Float32Array(n);
  for (let i = 0; i < n; i += 4099) data[i] = i;
  const bytes = message(floatTensor("w", [n], data));
  // dims (08 + varint n), data_type (10 01), name (42 01 77), raw_data (4a + varint length).
  const head = [
    0x08,
    0x80,
    0x80,
    0x80,
    0x02,
    0x10,
    0x01,
    0x42,
    0x01,
    0x77,
    0x4a,
    0x80,
    0x80,
    0x80,
    0x08,
  ];
  assertEquals(Array.from(bytes.subarray(0, head.length)), head);
  assertEquals(bytes.length, head.length + 4 * n);
  const raw = new Float32Array(bytes.slice(head.length).buffer);
  assertEquals(raw, data);
});

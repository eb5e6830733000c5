import { assertEquals } from "@std/assert";
import * as relaxvm from "../mod.ts";

Deno.test("mod.ts: the shape-heap code tables are exported with TVM's numbers", () => {
  assertEquals(relaxvm.MatchShapeCode, {
    AssertEqualToImm: 0,
    StoreToHeap: 1,
    NoOp: 2,
    AssertEqualToLoad: 3,
  });
  assertEquals(relaxvm.MakeShapeCode, { UseImm: 0, LoadShape: 1 });
});

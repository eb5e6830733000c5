/**
 * The fixed set of programs whose TVM output is committed under
 * testdata/tvm/ (`deno task tvm:golden` rewrites it with the pinned TVM):
 * a few written by hand, for reading, and generated ones covering every
 * instruction form and constant kind.
 *
 * @module
 */

import { bitsOf, type ProgramDesc } from "./description.ts";
import { generatePrograms } from "./generator.ts";

/** The design document's two functions, as TVM's tests write them. */
const designDoc: ProgramDesc = {
  name: "design_doc",
  items: [
    ["function", "func0", 2, ["x", "y"], [
      ["call", "vm.builtin.make_tuple", [["r", 0], ["r", 1]], 2],
      ["ret", 2],
    ]],
    ["function", "func1", 2, null, [
      ["call", "func0", [["r", 0], ["r", 1]], 5],
      ["call", "vm.builtin.tuple_getitem", [["r", 5], ["imm", "1"]], 6],
      ["ret", 6],
    ]],
  ],
  runs: [["func1", [["int", "3"], ["float", bitsOf(0.25)]]]],
};

/** One constant of every kind TVM's pool holds, Int constants at the int64 edges. */
const everyConstant: ProgramDesc = {
  name: "every_constant",
  items: [["function", "main", 0, null, [
    ["call", "vm.builtin.make_tuple", [
      ["const", ["int", "9223372036854775807"]],
      ["const", ["int", "-9223372036854775808"]],
      ["const", ["int", "36028797018963968"]],
      ["const", ["float", bitsOf(-0)]],
      ["const", ["float", bitsOf(1 / 3)]],
      ["const", ["str", 'TVM prints "this" raw']],
      ["const", ["str", "line\nbreak"]],
      ["const", ["shape", [2, -1, 4]]],
      ["const", ["shape", []]],
      ["const", ["dtype", "float16x4"]],
      ["const", ["tensor", "int64", [2], "0100000000000080ffffffffffffffff"]],
      ["const", ["tensor", "bfloat16", [], "803f"]],
      ["const", ["tensor", "bool", [3], "010001"]],
      ["imm", "2251799813685247"],
      ["imm", "-7"],
      ["void"],
    ], 1],
    ["call", "vm.builtin.make_closure", [["f", "main"], ["vm"]], "void"],
    ["ret", 1],
  ]]],
  runs: [["main", []]],
};

/** Declared functions, closures, If and Goto. */
const controlFlow: ProgramDesc = {
  name: "closures_and_branches",
  items: [
    ["declare", "pick", "vm"],
    ["function", "main", 1, ["n"], [
      ["call", "vm.builtin.make_closure", [["f", "pick"], ["imm", "10"]], 4],
      ["if", 0, 3],
      ["call", "vm.builtin.invoke_closure", [["vm"], ["r", 4], ["imm", "1"]], 9],
      ["goto", 2],
      ["call", "pick", [["imm", "20"], ["imm", "2"]], 9],
      ["ret", 9],
    ]],
    ["function", "pick", 2, ["base", "k"], [
      ["call", "vm.builtin.make_tuple", [["r", 0], ["r", 1], ["f", "main"]], 2],
      ["call", "vm.builtin.tuple_getitem", [["r", 2], ["imm", "0"]], 3],
      ["ret", 3],
    ]],
  ],
  runs: [["main", [["int", "1"]]], ["main", [["int", "0"]]]],
};

/** The committed set. */
export function goldenPrograms(): ProgramDesc[] {
  return [designDoc, everyConstant, controlFlow, ...generatePrograms(2026, 16)];
}

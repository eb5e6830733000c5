/**
 * The playground's built-in programs. Each is here twice: as the text the
 * editor shows (evaluated with `new Function` when the page may), and as
 * the same code compiled into the bundle, which is what a page under a
 * strict Content-Security-Policy builds. tests/playground_test.ts checks
 * that both give byte-identical executables.
 *
 * @module
 */

import { ExecBuilder, type Executable, tensor } from "../../mod.ts";

/** A built-in program. */
export interface Sample {
  /** Key, used in the page's sample list. */
  readonly name: string;
  /** One line for the sample list. */
  readonly title: string;
  /** The editor text. */
  readonly source: string;
  /** The same program, compiled in. */
  build(): Executable;
  /** The function Run calls. */
  readonly function: string;
  /** The arguments field: a JSON array. */
  readonly args: string;
}

const add: Sample = {
  name: "add",
  title: "add two tensors",
  source: `// JavaScript; every export of relaxvm is in scope (ExecBuilder, tensor, shape, …).
// The page builds what the code returns, or its \`ex\`, or its \`ib\` (calling get()).
const ib = new ExecBuilder();
ib.function("main", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
`,
  build() {
    const ib = new ExecBuilder();
    ib.function("main", { num_inputs: 2 }, () => {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    return ib.get();
  },
  function: "main",
  args: "[[1, 2, 3], [10, 20, 30]]",
};

const mlp: Sample = {
  name: "mlp",
  title: "two-layer perceptron",
  source: `// softmax(gelu(x @ w1 + b1) @ w2): the weights are tensor constants of the
// executable, which a VM moves to its device when it loads.
const w1 = tensor([[0.5, -0.25, 0.125], [-0.5, 0.75, 0.25], [0.25, 0.5, -0.75], [1, -1, 0.5]]);
const b1 = tensor([0.1, -0.2, 0.3]);
const w2 = tensor([[1, -1], [0.5, 0.25], [-0.75, 1]]);
const ib = new ExecBuilder();
ib.function("mlp", { num_inputs: 1 }, () => {
  ib.emit_call("vm.op.matmul", [ib.r(0), w1], { dst: ib.r(1) });
  ib.emit_call("vm.op.add", [ib.r(1), b1], { dst: ib.r(2) });
  ib.emit_call("vm.op.gelu", [ib.r(2)], { dst: ib.r(3) });
  ib.emit_call("vm.op.matmul", [ib.r(3), w2], { dst: ib.r(4) });
  ib.emit_call("vm.op.softmax", [ib.r(4)], { dst: ib.r(5) });
  ib.emit_ret(ib.r(5));
});
`,
  build() {
    const w1 = tensor([[0.5, -0.25, 0.125], [-0.5, 0.75, 0.25], [0.25, 0.5, -0.75], [1, -1, 0.5]]);
    const b1 = tensor([0.1, -0.2, 0.3]);
    const w2 = tensor([[1, -1], [0.5, 0.25], [-0.75, 1]]);
    const ib = new ExecBuilder();
    ib.function("mlp", { num_inputs: 1 }, () => {
      ib.emit_call("vm.op.matmul", [ib.r(0), w1], { dst: ib.r(1) });
      ib.emit_call("vm.op.add", [ib.r(1), b1], { dst: ib.r(2) });
      ib.emit_call("vm.op.gelu", [ib.r(2)], { dst: ib.r(3) });
      ib.emit_call("vm.op.matmul", [ib.r(3), w2], { dst: ib.r(4) });
      ib.emit_call("vm.op.softmax", [ib.r(4)], { dst: ib.r(5) });
      ib.emit_ret(ib.r(5));
    });
    return ib.get();
  },
  function: "mlp",
  args: "[[[1, 2, 3, 4], [-1, 0.5, 0, 2]]]",
};

const branch: Sample = {
  name: "branch",
  title: "If: maximum or minimum",
  source: `// pick(cond, a, b) = cond ? maximum(a, b) : minimum(a, b). If falls through when
// its register is true and jumps (relative, in instructions) otherwise.
const ib = new ExecBuilder();
ib.function("pick", { num_inputs: 3 }, () => {
  ib.emit_call("vm.builtin.read_if_cond", [ib.r(0)], { dst: ib.r(3) }); // 0
  ib.emit_if(ib.r(3), 3); // 1: false → 4
  ib.emit_call("vm.op.maximum", [ib.r(1), ib.r(2)], { dst: ib.r(4) }); // 2
  ib.emit_ret(ib.r(4)); // 3
  ib.emit_call("vm.op.minimum", [ib.r(1), ib.r(2)], { dst: ib.r(4) }); // 4
  ib.emit_ret(ib.r(4)); // 5
});
`,
  build() {
    const ib = new ExecBuilder();
    ib.function("pick", { num_inputs: 3 }, () => {
      ib.emit_call("vm.builtin.read_if_cond", [ib.r(0)], { dst: ib.r(3) }); // 0
      ib.emit_if(ib.r(3), 3); // 1: false → 4
      ib.emit_call("vm.op.maximum", [ib.r(1), ib.r(2)], { dst: ib.r(4) }); // 2
      ib.emit_ret(ib.r(4)); // 3
      ib.emit_call("vm.op.minimum", [ib.r(1), ib.r(2)], { dst: ib.r(4) }); // 4
      ib.emit_ret(ib.r(4)); // 5
    });
    return ib.get();
  },
  function: "pick",
  args: "[[1], [1, 5, 3], [4, 2, 6]]",
};

const reductions: Sample = {
  name: "reductions",
  title: "row sums and maxima, as a tuple",
  source: `// Reductions take (x, axes, keepdims): axes a shape constant, keepdims an imm.
// make_tuple returns both results at once.
const ib = new ExecBuilder();
ib.function("row_stats", { num_inputs: 1 }, () => {
  ib.emit_call("vm.op.sum", [ib.r(0), [1], ib.imm(0)], { dst: ib.r(1) });
  ib.emit_call("vm.op.max", [ib.r(0), [1], ib.imm(0)], { dst: ib.r(2) });
  ib.emit_call("vm.builtin.make_tuple", [ib.r(1), ib.r(2)], { dst: ib.r(3) });
  ib.emit_ret(ib.r(3));
});
`,
  build() {
    const ib = new ExecBuilder();
    ib.function("row_stats", { num_inputs: 1 }, () => {
      ib.emit_call("vm.op.sum", [ib.r(0), [1], ib.imm(0)], { dst: ib.r(1) });
      ib.emit_call("vm.op.max", [ib.r(0), [1], ib.imm(0)], { dst: ib.r(2) });
      ib.emit_call("vm.builtin.make_tuple", [ib.r(1), ib.r(2)], { dst: ib.r(3) });
      ib.emit_ret(ib.r(3));
    });
    return ib.get();
  },
  function: "row_stats",
  args: "[[[1, 2, 3], [4, -5, 6]]]",
};

/** Every built-in program, in the order of the page's list. */
export const SAMPLES: readonly Sample[] = [add, mlp, branch, reductions];

/** The sample called `name`; throws a RangeError naming the known ones. */
export function sample(name: string): Sample {
  const found = SAMPLES.find((s) => s.name === name);
  if (found === undefined) {
    throw new RangeError(
      `No sample named "${name}" (have: ${SAMPLES.map((s) => s.name).join(", ")})`,
    );
  }
  return found;
}

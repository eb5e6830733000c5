/**
 * Functions the hostile-input tests and fuzz families put in the programs they
 * run: the endless loop that only a budget stops, and the 16 MB result that a
 * memory limit or a summarized print must handle.
 *
 * @module
 */

import type { ExecBuilder } from "../mod.ts";

/** Declares `name()` on `ib`: a loop that never ends (`goto +1`, `goto -1`), then a return it never reaches. */
export function addSpin(ib: ExecBuilder, name = "spin"): void {
  ib.function(name, { num_inputs: 0 }, () => {
    ib.emit_goto(1);
    ib.emit_goto(-1);
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
}

/**
 * Declares `name` on `ib`, of `numInputs` inputs it ignores, returning a new float32 tensor of
 * 2^22 elements (16 MB) from its own storage.
 */
export function addBigTensor(ib: ExecBuilder, name: string, numInputs: number): void {
  const storage = ib.r(numInputs), out = ib.r(numInputs + 1);
  ib.function(name, { num_inputs: numInputs }, () => {
    ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [1 << 22], ib.imm(0), "float32"], {
      dst: storage,
    });
    ib.emit_call("vm.builtin.alloc_tensor", [storage, ib.imm(0), [1 << 22], "float32"], {
      dst: out,
    });
    ib.emit_ret(out);
  });
}

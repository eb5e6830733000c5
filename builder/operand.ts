/**
 * Operands of the builder DSL: what `r()`, `c()`, `imm()`, `f()`,
 * `vm_state()` and `void_arg()` return. Opaque to users; two operands for the
 * same thing are deep-equal.
 *
 * @module
 */

/** What an operand refers to. */
export type OperandKind = "register" | "immediate" | "constant" | "function";

/** A register, immediate, constant-pool index or function reference. */
export class Operand {
  /** What the operand refers to. */
  readonly kind: OperandKind;
  /** Register number, immediate value, constant index or function name. */
  readonly value: number | string;

  /**
   * Use the `ExecBuilder` methods instead.
   *
   * @ignore
   */
  constructor(kind: OperandKind, value: number | string) {
    this.kind = kind;
    this.value = value;
  }
}

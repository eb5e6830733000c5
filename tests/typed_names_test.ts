/**
 * The builtins and dtypes are typed, so an editor completes them and a misspelling is a type
 * error: `Builtins` (generated from the builtins' metadata) documents every builtin in
 * `deno doc`, `emit_call` completes its names, and `dtype()` / `tensor()` take the literal
 * union of dtype spellings. The `@ts-expect-error` lines are the type tests: `deno check`
 * (`deno task check`, and `deno test` before it runs this file) fails if they type-check.
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import {
  type BuiltinName,
  type Builtins,
  dtype,
  type DTypeName,
  ExecBuilder,
  listGlobalFuncNames,
  tensor,
} from "../mod.ts";
import { BUILTIN_TABLES } from "../builtins/install.ts";

Deno.test("typed names: a misspelt dtype or builtin name does not type-check", () => {
  // @ts-expect-error "float17" is no dtype
  assertThrows(() => dtype("float17"), TypeError, 'Unsupported dtype "float17"');
  // @ts-expect-error tensors hold no uint64
  assertThrows(() => tensor([1], { dtype: "uint64" }), TypeError);
  // @ts-expect-error a builtin name with a typo
  const misspelt: BuiltinName = "vm.op.addd";
  assertEquals(misspelt, "vm.op.addd");
  const spellings: DTypeName[] = ["float32", "bfloat16", "float32x4", "int", "uint64"];
  assertEquals(spellings.map((s) => String(dtype(s))), [
    "float32",
    "bfloat16",
    "float32x4",
    "int32",
    "uint64",
  ]);
});

Deno.test("typed names: emit_call takes builtin names and any registered name", () => {
  const ib = new ExecBuilder();
  const op: BuiltinName = "vm.op.relu";
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call(op, [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("my.own.function", [ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  assertEquals(ib.get().warnings.length, 1); // my.own.function is not registered
});

Deno.test("typed names: Builtins names exactly the registered builtins, signatures included", () => {
  const registered = new Set(listGlobalFuncNames());
  const metadata = BUILTIN_TABLES.flatMap((t) => t.entries);
  const signature: Builtins["vm.op.matmul"] = "(a, b) → tensor";
  assertEquals(metadata.find((e) => e.name === "vm.op.matmul")?.meta.signature, signature);
  for (const { name } of metadata) assert(registered.has(name), name);
});

Deno.test("typed names: deno doc shows every builtin with its documentation", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", "mod.ts"],
    cwd: new URL("../", import.meta.url),
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  // deno doc 2.9's JSON: { nodes: { [module]: { symbols: [{ name, declarations: [{ def }] }] } } }
  const json = JSON.parse(new TextDecoder().decode(stdout));
  const mod = Object.values(json.nodes)[0] as {
    symbols: { name: string; declarations: { kind: string; def: unknown }[] }[];
  };
  type InterfaceDef = {
    extends?: { repr: string }[];
    properties: { name: string; jsDoc?: { doc?: string } }[];
  };
  const definition = (name: string) => {
    const symbol = mod.symbols.find((n) => n.name === name);
    if (symbol === undefined) throw new Error(`deno doc lists no ${name}`);
    return symbol.declarations[0].def as InterfaceDef;
  };
  // Builtins is written by family (ground/builtin_names/): it extends one interface per
  // family, each exported from mod.ts, and together they document every builtin once.
  const families = (definition("Builtins").extends ?? []).map((e) => definition(e.repr));
  assert(families.length > 1, "Builtins extends the family interfaces");
  const properties = families.flatMap((f) => f.properties);
  const names = BUILTIN_TABLES.flatMap((t) => t.entries.map((e) => e.name));
  assertEquals(properties.map((p) => p.name).sort(), names.sort());
  const add = properties.find((p) => p.name === "vm.op.add")!;
  assert(add.jsDoc?.doc?.includes("`vm.op.add(a, b) → tensor`"), JSON.stringify(add.jsDoc));
  assert(add.jsDoc?.doc?.includes("relax.op.add"), JSON.stringify(add.jsDoc));
});

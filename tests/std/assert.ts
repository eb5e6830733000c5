/**
 * `@std/assert` for tests, benchmarks and documentation examples.
 *
 * deno.json maps the bare specifier `@std/assert` to this file rather than to
 * `npm:deno-std@...` directly: `deno task` installs every npm package named in
 * deno.json's "imports" before it runs any task, so an npm entry there would
 * make `deno task demo` download the assertion library it never imports.
 * Through this file the package is fetched only by a program that imports it.
 *
 * @module
 */

// Named, not `export *`: the package ships JavaScript without type declarations, so TypeScript
// sees an untyped module whose `export *` re-exports nothing.
export {
  assert,
  assertAlmostEquals,
  assertArrayIncludes,
  assertEquals,
  assertExists,
  assertFalse,
  assertGreater,
  assertGreaterOrEqual,
  assertInstanceOf,
  AssertionError,
  assertIsError,
  assertLess,
  assertLessOrEqual,
  assertMatch,
  assertNotEquals,
  assertNotInstanceOf,
  assertNotMatch,
  assertNotStrictEquals,
  assertObjectMatch,
  assertRejects,
  assertStrictEquals,
  assertStringIncludes,
  assertThrows,
  equal,
  fail,
  unimplemented,
  unreachable,
} from "npm:deno-std@1.4.0/assert/mod.js";

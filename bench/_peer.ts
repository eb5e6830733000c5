/**
 * Loads a benchmark's peer (onnxruntime, jax-js, …) by its inline, versioned
 * npm specifier: only benchmarks use them, so they stay out of deno.json.
 * Through a parameter rather than a literal `import()`, so that `deno task
 * check`, which type-checks bench/, does not download them (onnxruntime-node
 * and onnxruntime-web alone are 430 MB). Their APIs are untyped here.
 *
 * @module
 */

/** The module at `specifier`, e.g. `peer("npm:onnxruntime-web@1.30.0")`. */
// deno-lint-ignore no-explicit-any
export const peer = (specifier: string): Promise<any> => import(specifier);

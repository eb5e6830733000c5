/**
 * `relaxvm import <model.onnx> -o <out.rvm>`: imports an ONNX model with
 * `importONNX`, writes the executable, and writes its initializers as a
 * tensor cache beside it (`--params`, default `<out>.params/`), which the
 * executable's `load_params` loads.
 *
 * @module
 */

import { pathToFileURL } from "node:url";
import { dumpTensorCache } from "../../builtins/tensor_cache/cache_writer.ts";
import { printable } from "../../ground/printable.ts";
import { importONNX } from "../../onnx/import_onnx.ts";
import type { CommandSpec } from "../arguments.ts";
import { callerPath, writeExecutable } from "../executable_file.ts";

/** `name: dtype[d0, d1]` for the summary. */
const describe = (v: { name: string; dtype: string; shape: readonly (number | string)[] }) =>
  `${printable(v.name)}: ${v.dtype}[${v.shape.join(", ")}]`;

/** The `import` subcommand. */
export const importCommand: CommandSpec = {
  name: "import",
  description: "convert an ONNX model into a .rvm file and a tensor cache of its weights",
  arguments: [{ name: "model", description: "the .onnx file" }],
  options: {
    output: {
      kind: "value",
      short: "o",
      valueName: "<file>",
      required: true,
      description: "where to write the executable",
    },
    params: {
      kind: "value",
      valueName: "<dir>",
      description: "where to write the weights as a tensor cache (default: <file>.params/)",
    },
    format: {
      kind: "value",
      valueName: "<format>",
      default: "relaxvm",
      choices: ["relaxvm", "tvm"],
      description: "relaxvm's format, or Apache TVM 0.27's",
    },
  },
  async run(args) {
    const output = args.value("output")!;
    const model = args.requiredArgument("model");
    // A URL, not bytes: external-data files are found beside the model.
    using imported = await importONNX(pathToFileURL(callerPath(model)));
    const ex = imported.executable;
    const size = await writeExecutable(output, ex, args.value("format") as "relaxvm" | "tvm");
    console.log(
      `Wrote ${output} (${size} bytes; functions: ${ex.function_names.map(printable).join(", ")})`,
    );
    console.log(`  inputs:  ${imported.inputs.map(describe).join(", ")}`);
    console.log(`  outputs: ${imported.outputs.map(describe).join(", ")}`);
    if (imported.params.length > 0) {
      const dir = args.value("params") ?? `${output}.params`;
      await dumpTensorCache(
        imported.paramNames.map((n, i) => [n, imported.params[i]] as const),
        callerPath(dir),
      );
      const bytes = imported.params.reduce((n, p) => n + p.nbytes, 0);
      console.log(
        `Wrote ${dir}/ (${imported.params.length} tensors, ${bytes} bytes; load_params reads it)`,
      );
    }
  },
};

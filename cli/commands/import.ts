/**
 * `relaxvm import <model.onnx> -o <out.rvm>`: imports an ONNX model with
 * `importONNX`, writes the executable, and writes its initializers as a
 * tensor cache beside it (`--params`, default `<out>.params/`), which the
 * executable's `load_params` loads. `--shape name=d0,d1,…` imports an input
 * with those dimensions (`inputShapes`: numbers fix a size, names are
 * symbols) and `--value name=v,…` binds an input to constants of its declared
 * dtype (`inputValues`), both repeatable: a streaming model such as Silero
 * VAD imports only with its chunk length and sample rate given.
 *
 * @module
 */

import { pathToFileURL } from "node:url";
import { dumpTensorCache } from "../../builtins/tensor_cache/cache_writer.ts";
import { printable } from "../../ground/printable.ts";
import { tensor } from "../../devices/tensor.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { type ImportedONNX, importONNX } from "../../onnx/import_onnx.ts";
import { decodeModel } from "../../onnx/onnx_proto.ts";
import { dtypeOf } from "../../onnx/onnx_tensor.ts";
import { UsageError } from "../failure.ts";
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
    shape: {
      kind: "value",
      valueName: "<name=d0,d1,…>",
      repeatable: true,
      description: "import input <name> with these dimensions (numbers, or names for symbols)",
    },
    value: {
      kind: "value",
      valueName: "<name=v0,v1,…>",
      repeatable: true,
      description: "bind input <name> to these values (its declared dtype; one value: a scalar)",
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
    const url = pathToFileURL(callerPath(model));
    const inputShapes = Object.fromEntries(
      args.values("shape").map((v) => {
        const [name, dims] = assignment(v, "--shape");
        return [name, dims.map((d) => /^\d+$/.test(d) ? Number(d) : d)];
      }),
    );
    const given = args.values("value");
    const inputValues = given.length === 0 ? {} : await boundValues(url, given);
    try {
      // A URL, not bytes: external-data files are found beside the model.
      using imported = await importONNX(url, { inputShapes, inputValues });
      await write(
        imported,
        output,
        args.value("format") as "relaxvm" | "tvm",
        args.value("params"),
      );
    } finally {
      for (const t of Object.values(inputValues)) t.dispose();
    }
  },
};

/** `name=a,b,…` split into the name and its comma-separated parts. */
function assignment(text: string, option: string): [string, string[]] {
  const at = text.indexOf("=");
  const parts = text.slice(at + 1).split(",").map((p) => p.trim());
  if (at <= 0 || parts.some((p) => p === "")) {
    throw new UsageError(`${option} takes <name>=<v0>,<v1>,…, not ${JSON.stringify(text)}`);
  }
  return [text.slice(0, at), parts];
}

/** The `--value` tensors, each of the dtype the model declares for its input. */
async function boundValues(url: URL, given: readonly string[]): Promise<Record<string, NDArray>> {
  const declared = new Map(
    (decodeModel(await Deno.readFile(url)).graph?.inputs ?? []).map((v) => [v.name, v.type]),
  );
  const out: Record<string, NDArray> = {};
  for (const text of given) {
    const [name, parts] = assignment(text, "--value");
    const type = declared.get(name);
    const dtype = type?.kind === "tensor" ? dtypeOf(type.elemType) : null;
    if (dtype === null) {
      throw new UsageError(
        `--value ${name}: the model has no tensor input ${JSON.stringify(name)}`,
      );
    }
    const numbers = parts.map(Number);
    if (numbers.some((n) => !Number.isFinite(n))) {
      throw new UsageError(`--value ${name}: ${JSON.stringify(parts.join(","))} are not numbers`);
    }
    const shape = numbers.length === 1 ? [] : [numbers.length];
    out[name] = dtype === "int64"
      ? tensor(BigInt64Array.from(numbers, (n) => BigInt(Math.trunc(n))), { shape })
      : tensor(numbers, { shape, dtype });
  }
  return out;
}

/** Writes the executable to `output` and its weights to `paramsDir`, and says what it wrote. */
async function write(
  imported: ImportedONNX,
  output: string,
  format: "relaxvm" | "tvm",
  paramsDir: string | undefined,
): Promise<void> {
  const ex = imported.executable;
  const size = await writeExecutable(output, ex, format);
  console.log(
    `Wrote ${output} (${size} bytes; functions: ${ex.function_names.map(printable).join(", ")})`,
  );
  console.log(`  inputs:  ${imported.inputs.map(describe).join(", ")}`);
  console.log(`  outputs: ${imported.outputs.map(describe).join(", ")}`);
  if (imported.params.length > 0) {
    const dir = paramsDir ?? `${output}.params`;
    await dumpTensorCache(
      imported.paramNames.map((n, i) => [n, imported.params[i]] as const),
      callerPath(dir),
    );
    const bytes = imported.params.reduce((n, p) => n + p.nbytes, 0);
    console.log(
      `Wrote ${dir}/ (${imported.params.length} tensors, ${bytes} bytes; load_params reads it)`,
    );
  }
}

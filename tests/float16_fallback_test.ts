// float16 without Float16Array: in a child process whose globalThis has none, float16
// tensors are Uint16Array bits converted on the way in and out, and give the same
// values and bits as with Float16Array.
import { assertEquals } from "@std/assert";

const script = `
delete globalThis.Float16Array;
const { tensor, getGlobalFunc } = await import(${
  JSON.stringify(new URL("../mod.ts", import.meta.url).href)
});
const { NATIVE_FLOAT16 } = await import(${
  JSON.stringify(new URL("../ground/dtype.ts", import.meta.url).href)
});
const h = tensor([0.1, 65520, -0, 1 / 3], { dtype: "float16" });
const stored = h.cpuView();
const cast = getGlobalFunc("vm.op.cast");
const back = cast(h, "float32");
const again = cast(back, "float16");
console.log(JSON.stringify({
  native: NATIVE_FLOAT16,
  storage: stored.constructor.name,
  bits: [...stored],
  data: [...h.dataSync()].map(String),
  dataType: h.dataSync().constructor.name,
  cast: [...back.dataSync()].map(String),
  roundTrip: [...again.cpuView()],
}));
`;

Deno.test("float16 without Float16Array: Uint16Array bits, same values and bits", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=js", script],
    cwd: new URL("../", import.meta.url),
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  const got = JSON.parse(new TextDecoder().decode(stdout));
  const values = ["0.0999755859375", "Infinity", "0", "0.333251953125"];
  assertEquals(got, {
    native: false,
    storage: "Uint16Array",
    bits: [0x2e66, 0x7c00, 0x8000, 0x3555],
    data: values,
    dataType: "Float32Array",
    cast: values,
    roundTrip: [0x2e66, 0x7c00, 0x8000, 0x3555],
  });
});

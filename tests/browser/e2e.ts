/**
 * The playground in real headless Chromium: bundles the library and the page
 * (web/bundle.ts), serves them on 127.0.0.1 (web/serve.ts), drives the page
 * with playwright-core, and checks what a user would see: a program typed in
 * the editor (CodeMirror), its dumps, its results on the CPU and on WebGPU,
 * timing and memory figures, the console pane, errors at their line, the
 * program kept across reloads and in shareable links, saving and dropping
 * `.rvm` files with argument hints, and the same page under a strict
 * Content-Security-Policy, where the VM runs its generic dispatch loop.
 *
 * Expected results come from the library itself, run here in Deno on the CPU.
 *
 * Run by tests/browser_test.ts as a child process (playwright-core needs
 * `-A` under Deno: it probes /proc/sys at import), which reads the
 * `PROTOCOL_PREFIX` lines. Alone:
 * `deno run -A tests/browser/e2e.ts [--chromium /usr/bin/chromium]`.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import { type Browser, chromium, type Page } from "npm:playwright-core@1.65.1";
import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { buildBundles } from "../../web/bundle.ts";
import { PLAYGROUND_CSP, servePlayground, STRICT_CSP } from "../../web/serve.ts";
import { SAMPLES } from "../../web/playground/samples.ts";
import {
  argumentHint,
  evaluateProgram,
  parseArguments,
  type ResultJSON,
  resultJSON,
} from "../../web/playground/program.ts";
import { cpu, Executable, VirtualMachine } from "../../mod.ts";
import { type E2EEvent, findChromium, PROTOCOL_PREFIX } from "./protocol.ts";
import { pageWith, readPages } from "../../docs/pages.ts";

// Functions passed to page.evaluate and waitForFunction run in the page; these
// declarations type the page globals they use (this file is checked without the DOM library).
declare const document: { body: { dataset: Record<string, string | undefined> } };
declare class DataTransfer {
  readonly items: { add(file: File): void };
}
declare const relaxvmPlayground: { getSource(): string; setSource(text: string): void };

/** Longest wait for one page action (a first WebGPU run compiles its shaders). */
const ACTION_TIMEOUT_MS = 20_000;

const t0 = performance.now();
function report(event: E2EEvent): void {
  console.log(PROTOCOL_PREFIX + JSON.stringify(event));
}

// ---- Expected values, computed by the library in Deno ---------------------------

/** A program typed into the editor: not one of the samples. */
const TYPED = `// typed by tests/browser/e2e.ts
const ib = new ExecBuilder();
ib.function("scale_tanh_t", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_call("vm.op.tanh", [ib.r(2)], { dst: ib.r(3) });
  ib.emit_call("vm.op.transpose", [ib.r(3)], { dst: ib.r(4) });
  ib.emit_ret(ib.r(4));
});
`;
const TYPED_ARGS = "[[[1, 2, 3], [-4, 0.5, 6]], [0.5, -0.25, 0.125]]";

/** Runs `ex`'s `fn` on the CPU in Deno with the page's argument syntax. */
async function expected(ex: Executable, fn: string, args: string): Promise<ResultJSON> {
  const vm = new VirtualMachine(ex, cpu());
  return await resultJSON(await vm.invoke(fn, ...parseArguments(args, "float32", cpu())));
}

/** Asserts two results agree: same structure, dtypes and shapes, values within `tol`. */
function assertAgrees(got: ResultJSON, want: ResultJSON, tol: number, where: string): void {
  const fail = (why: string) =>
    new Error(`${where}: ${why}\n got: ${JSON.stringify(got)}\nwant: ${JSON.stringify(want)}`);
  if ("tensor" in want) {
    if (!("tensor" in got)) throw fail("not a tensor");
    const g = got.tensor, w = want.tensor;
    if (g.dtype !== w.dtype || g.shape.join() !== w.shape.join()) throw fail("dtype or shape");
    g.values.forEach((v, i) => {
      const x = Number(v), y = Number(w.values[i]);
      if (!(Math.abs(x - y) <= tol * Math.max(1, Math.abs(y)))) throw fail(`value ${i}`);
    });
  } else if ("tuple" in want) {
    if (!("tuple" in got) || got.tuple.length !== want.tuple.length) throw fail("not the tuple");
    got.tuple.forEach((g, i) => assertAgrees(g, want.tuple[i], tol, `${where}[${i}]`));
  } else {
    assertEquals(got, want, where);
  }
}

/** The devices a result's tensors are on. */
function devicesOf(r: ResultJSON): string[] {
  if ("tensor" in r) return [r.tensor.device];
  if ("tuple" in r) return r.tuple.flatMap(devicesOf);
  return [];
}

/**
 * How many `securitypolicyviolation` events one refused `new Function` raises
 * on strict.html: one per policy, and the page has two (the server's header
 * and its own meta element, which must match). A page of its own, served
 * here with the same header and meta element, makes exactly one attempt and
 * counts the events.
 */
async function violationsPerEvalAttempt(browser: Browser): Promise<number> {
  const html = await Deno.readTextFile(new URL("../../web/strict.html", import.meta.url));
  const meta = /<meta\s+http-equiv="Content-Security-Policy"[^>]*>/.exec(html)?.[0];
  if (meta === undefined) throw new Error("web/strict.html has no CSP meta element");
  const probe = `let n = 0;
document.addEventListener("securitypolicyviolation", () => { n++; });
try { new Function("a", "b", "return a + b"); } catch { /* refused, as intended */ }
setTimeout(() => { document.body.dataset.violations = String(n); }, 300);`;
  const page = `<!doctype html><head>${meta}<script src="/probe.js"></script></head><body>`;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const js = new URL(request.url).pathname === "/probe.js";
    return new Response(js ? probe : page, {
      headers: {
        "content-type": js ? "text/javascript" : "text/html",
        "content-security-policy": STRICT_CSP,
      },
    });
  });
  const tab = await browser.newPage();
  try {
    await tab.goto(`http://127.0.0.1:${server.addr.port}/`);
    await tab.waitForFunction(() => document.body.dataset.violations !== undefined);
    return Number(await tab.evaluate(() => document.body.dataset.violations));
  } finally {
    await tab.close();
    await server.shutdown();
  }
}

// ---- Driving the page -------------------------------------------------------------

interface OpenPage {
  page: Page;
  csp: string | null;
  /** Console messages of type error, and uncaught page errors. */
  errors: string[];
}

async function open(browser: Browser, url: string): Promise<OpenPage> {
  const page = await browser.newPage();
  page.setDefaultTimeout(ACTION_TIMEOUT_MS);
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console.error: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  const response = await page.goto(url);
  if (response === null || !response.ok()) throw new Error(`GET ${url} failed`);
  // The page builds its first sample as soon as it loads.
  await page.waitForFunction(() => Number(document.body.dataset.actions) >= 1);
  return { page, csp: await response.headerValue("content-security-policy"), errors };
}

/** Does `what` (clicks, fills) and waits until the page finished the action it started. */
async function act(page: Page, what: () => Promise<unknown>): Promise<string> {
  const before = await page.evaluate(() => Number(document.body.dataset.actions));
  await what();
  await page.waitForFunction(
    (n) => Number(document.body.dataset.actions) > n && document.body.dataset.busy === "0",
    before,
  );
  const state = await page.getAttribute("#status", "data-state");
  const text = (await page.textContent("#status")) ?? "";
  if (state !== "ok") throw new Error(`the page reported: ${text}`);
  return text;
}

/** The page's last result. */
async function result(page: Page): Promise<ResultJSON> {
  const json = await page.getAttribute("#result", "data-json");
  if (json === null) throw new Error("no result shown");
  return JSON.parse(json);
}

/** Runs the selected function on `device` with `args` and returns the result. */
async function runOn(
  page: Page,
  device: "cpu" | "webgpu",
  fn: string,
  args: string,
): Promise<ResultJSON> {
  await page.selectOption("#function", fn);
  await page.selectOption("#device", device);
  await page.fill("#args", args);
  const status = await act(page, () => page.click("#run")).catch((e: Error) => {
    throw new Error(`@${fn} on ${device}: ${e.message}`);
  });
  const r = await result(page);
  const want = device === "cpu" ? "cpu(0)" : "webgpu(0)";
  for (const d of devicesOf(r)) assertEquals(d, want, `result device (${status})`);
  return r;
}

/** Runs on both devices and compares with Deno's CPU result. */
async function runBoth(page: Page, ex: Executable, fn: string, args: string, what: string) {
  const want = await expected(ex, fn, args);
  const context = (e: Error): never => {
    throw new Error(`${what}: ${e.message}`);
  };
  const cpuResult = await runOn(page, "cpu", fn, args).catch(context);
  const gpuResult = await runOn(page, "webgpu", fn, args).catch(context);
  assertAgrees(cpuResult, want, 1e-6, `${what} on the CPU`);
  assertAgrees(gpuResult, want, 1e-5, `${what} on WebGPU`);
}

/** Drops a file on the page's drop zone, as a user dragging it from the desktop. */
async function drop(page: Page, name: string, bytes: Uint8Array): Promise<string> {
  const dataTransfer = await page.evaluateHandle(([name, data]) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(data)], name));
    return dt;
  }, [name, Array.from(bytes)] as const);
  return await act(page, () => page.dispatchEvent("#drop", "drop", { dataTransfer }));
}

async function text(page: Page, selector: string): Promise<string> {
  return (await page.textContent(selector)) ?? "";
}

/** Replaces the editor's text (as a paste would; typing is checked once, by keys). */
async function setSource(page: Page, source: string): Promise<void> {
  await page.evaluate((t) => relaxvmPlayground.setSource(t), source);
}

async function getSource(page: Page): Promise<string> {
  return await page.evaluate(() => relaxvmPlayground.getSource());
}

/** The error an action reports, or an Error saying it succeeded. */
async function failing(page: Page, what: () => Promise<unknown>): Promise<Error> {
  return await act(page, what).then(() => new Error("the action succeeded"), (e: Error) => e);
}

/** A program that prints while it builds and while it runs. */
const PRINTS = `const ib = new ExecBuilder();
console.log("building", tensor([1, 2]), { n: 3 });
console.warn("a warning");
ib.function("show", { num_inputs: 1 }, () => {
  ib.emit_call("vm.builtin.print", [ib.r(0)], { dst: ib.void_arg() });
  ib.emit_ret(ib.r(0));
});
`;

/** The program the persistence check keeps. */
const KEPT = `// kept across reloads
const ib = new ExecBuilder();
ib.function("kept", { num_inputs: 1, param_names: ["x"] }, () => {
  ib.emit_call("vm.op.negative", [ib.r(0)], { dst: ib.r(1) });
  ib.emit_ret(ib.r(1));
});
`;

/**
 * Operator, number of tensor inputs, then the arguments after them: a shape, an imm, a
 * dtype, or a tensor constant.
 */
type OperatorCase = [
  op: string,
  inputs: 1 | 2,
  extra: (number[] | number | string | { tensor: number[][] | number[]; dtype?: string })[],
];

const OPERATOR_CASES: OperatorCase[] = [
  ...["add", "subtract", "multiply", "divide", "maximum", "minimum"]
    .map((op): OperatorCase => [op, 2, []]),
  ...["negative", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "softmax", "transpose"]
    .map((op): OperatorCase => [op, 1, []]),
  ...["sum", "max", "mean"].flatMap((op): OperatorCase[] => [
    [op, 1, []],
    [op, 1, [[1], 1]],
    [op, 1, [[0], 0]],
  ]),
  ["matmul", 1, [{ tensor: [[1, 2], [-3, 0.5], [0, 1], [2, -2], [0.25, 4]] }]],
  ["layer_norm", 1, [{ tensor: [1, 2, 0.5, -1, 1] }, { tensor: [0, 0.5, 0, -0.5, 1] }]],
  ...["float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "uint32", "bool"]
    .map((dt): OperatorCase => ["cast", 1, [dt]]),
  ["take", 1, [{ tensor: [4, 0, -1, 2], dtype: "int32" }, 1]],
  ["strided_slice", 1, [[1], [1], [5], [2]]],
  ["concat", 2, [1]], // of the tuple (x, y)
  ["causal_mask", 1, []],
  ["attention", 2, [{ tensor: [[1, 2, 3], [-1, 0.5, 4]] }]],
  ["attention", 2, [{ tensor: [[1, 2, 3], [-1, 0.5, 4]] }, 1]],
];

/**
 * Runs in the page: each case on the CPU and on WebGPU, through the bundle the
 * page loaded, on operands with zeros of both signs, NaN and infinities.
 * Returns the mismatches.
 */
async function sweepOperators(cases: OperatorCase[]): Promise<string[]> {
  const bundle = "/dist/relaxvm.js"; // a variable: resolved by the page, not by the type checker
  const { ExecBuilder, VirtualMachine, tensor, webgpu, cpu, dtype } = await import(bundle);
  const gpu = await webgpu();
  const x = [[0.5, -1.25, 2, 0, -0], [3, NaN, Infinity, -Infinity, 1e30]];
  const y = [[1.5, 2, -0.75, 0, 3], [0.5, 4, 1, -2, NaN]];
  const same = (a: number, b: number) =>
    Object.is(a, b) || a === b || Math.abs(a - b) <= 1e-5 * Math.max(1, Math.abs(a)) ||
    Number.isNaN(a) && Number.isNaN(b);
  const mismatches: string[] = [];
  for (const [op, inputs, extra] of cases) {
    const what = `${op}(${
      ["x", "y"].slice(0, inputs).concat(extra.map((e) => JSON.stringify(e)))
    })`;
    try {
      const ib = new ExecBuilder();
      ib.function("f", { num_inputs: inputs }, () => {
        const args: unknown[] = [ib.r(0), ib.r(1)].slice(0, inputs);
        if (op === "concat") {
          ib.emit_call("vm.builtin.make_tuple", args, { dst: ib.r(inputs) });
          args.splice(0, inputs, ib.r(inputs));
        }
        for (const e of extra) {
          if (typeof e === "number") args.push(ib.imm(e));
          else if (typeof e === "string") args.push(dtype(e));
          else if ("tensor" in e) args.push(tensor(e.tensor, { dtype: e.dtype ?? "float32" }));
          else args.push(e);
        }
        ib.emit_call(`vm.op.${op}`, args, { dst: ib.r(inputs) });
        ib.emit_ret(ib.r(inputs));
      });
      const ex = ib.get();
      const values: number[][] = [];
      for (const device of [cpu(), gpu]) {
        const operands = [tensor(x, { device }), tensor(y, { device })].slice(0, inputs);
        const out = await new VirtualMachine(ex, device).invoke("f", ...operands);
        values.push(Array.from(await out.data(), Number));
      }
      const [c, g] = values;
      const bad = c.flatMap((v, i) => same(v, g[i]) ? [] : [`[${i}] cpu ${v}, webgpu ${g[i]}`]);
      if (bad.length > 0) mismatches.push(`${what}: ${bad.join("; ")}`);
    } catch (e) {
      mismatches.push(`${what}: ${e}`);
    }
  }
  return mismatches;
}

// ---- The checks ---------------------------------------------------------------------

const chromiumAt = Deno.args.includes("--chromium")
  ? Deno.args[Deno.args.indexOf("--chromium") + 1]
  : findChromium();

let browser: Browser | null = null;
let server: Deno.HttpServer<Deno.NetAddr> | null = null;
let base = "";
let index: OpenPage | null = null;
let strict: OpenPage | null = null;
const designDoc = await Deno.readFile(new URL("../../testdata/design_doc.rvm", import.meta.url));

const checks: [string, () => Promise<void>][] = [
  ["bundles, serves on 127.0.0.1 and launches Chromium with WebGPU", async () => {
    if (chromiumAt === null) throw new Error("no Chromium found");
    const bundles = await buildBundles();
    server = servePlayground({ bundles, onListen: (url) => base = url });
    assertEquals(server.addr.hostname, "127.0.0.1");
    browser = await chromium.launch({
      executablePath: chromiumAt,
      headless: true,
      args: ["--enable-unsafe-webgpu"],
    });
  }],

  ["the server serves its routes only, with the pages' CSP headers", async () => {
    const get = async (path: string, method = "GET") => {
      const r = await fetch(new URL(path, base), { method });
      await r.body?.cancel();
      return r;
    };
    const page = await get("/");
    assertEquals(page.headers.get("content-security-policy"), PLAYGROUND_CSP);
    assertEquals((await get("/strict.html")).headers.get("content-security-policy"), STRICT_CSP);
    const lib = await get("/dist/relaxvm.js", "HEAD");
    assertEquals(lib.status, 200);
    assertStringIncludes(lib.headers.get("content-type") ?? "", "text/javascript");
    for (const path of ["/web/serve.ts", "/deno.json", "/%2e%2e/deno.json", "/dist/"]) {
      assertEquals((await get(path)).status, 404, path);
    }
  }],

  ["the guide's browser example prints [11, 22] from WebGPU", async () => {
    const [, guide] = pageWith(await readPages(), "\n## Use in the browser\n");
    const section = guide.slice(guide.indexOf("\n## Use in the browser\n"));
    const html = /```html\n([\s\S]*?)```/.exec(section)?.[1];
    if (html === undefined) throw new Error("no html example in the guide's browser section");
    const page = await browser!.newPage();
    try {
      // The example imports ./dist/relaxvm.js: serve it from beside the bundle.
      await page.route(
        "**/readme_example.html",
        (route) => route.fulfill({ contentType: "text/html", body: `<!doctype html>\n${html}` }),
      );
      let timer: ReturnType<typeof setTimeout> | undefined;
      const logged = new Promise<unknown>((resolve, reject) => {
        page.on("pageerror", reject);
        page.on("console", async (m) => {
          if (m.type() === "log") {
            resolve(await m.args()[0].evaluate((a) => Array.from(a as ArrayLike<number>)));
          } else if (m.type() === "error") reject(new Error(m.text()));
        });
        timer = setTimeout(
          () => reject(new Error("the example printed nothing")),
          ACTION_TIMEOUT_MS,
        );
      }).finally(() => clearTimeout(timer));
      await page.goto(new URL("readme_example.html", base).href);
      assertEquals(await logged, [11, 22]);
    } finally {
      await page.close();
    }
  }],

  [
    "a TVM-compiled package (the encoder block) loads from dist/relaxvm.js and matches TVM's llvm build",
    async () => {
      // tests/webgpu/tvm_package_suite.ts runs it in Deno (naga); this is Chromium's Tint.
      const dir = new URL("../../testdata/tvm_webgpu/encoder/", import.meta.url);
      const reference = JSON.parse(await Deno.readTextFile(new URL("reference.json", dir)));
      const page = await browser!.newPage();
      try {
        await page.route("**/tvm_package/**", (route) => {
          const file = new URL(route.request().url()).pathname.split("/tvm_package/")[1];
          const known = ["package.json", "executable.tvm", "reference.json"];
          const ok = known.includes(file) || /^params\/[\w.-]+$/.test(file);
          return ok
            ? route.fulfill({ path: new URL(file, dir).pathname })
            : route.fulfill({ status: 404, body: "" });
        });
        await page.route("**/tvm_example.html", (route) =>
          route.fulfill({
            contentType: "text/html",
            body: `<!doctype html>
<script type="module">
import { loadTVMPackage, tensor } from "./dist/relaxvm.js";
const bytes = (b) => Uint8Array.from(atob(b), (c) => c.charCodeAt(0)).buffer;
const { cases } = await (await fetch("./tvm_package/reference.json")).json();
const pkg = await loadTVMPackage(new URL("./tvm_package/", location.href));
const vm = pkg.createVM();
const outputs = [];
for (const c of cases) {
  const x = tensor(new Float32Array(bytes(c.inputs[0].base64)), { shape: c.inputs[0].shape });
  const y = await vm.invoke("forward", x, ...pkg.params());
  outputs.push(Array.from(await y.data()));
}
console.log(JSON.stringify(outputs));
</script>`,
          }));
        let timer: ReturnType<typeof setTimeout> | undefined;
        const logged = new Promise<string>((resolve, reject) => {
          page.on("pageerror", reject);
          page.on("console", (m) => {
            if (m.type() === "log") resolve(m.text());
            else if (m.type() === "error") reject(new Error(m.text()));
          });
          // SwiftShader compiles the 14 kernels in about 13 s on a 2-core machine.
          timer = setTimeout(
            () => reject(new Error("the TVM package page printed nothing")),
            4 * ACTION_TIMEOUT_MS,
          );
        }).finally(() => clearTimeout(timer));
        await page.goto(new URL("tvm_example.html", base).href);
        const outputs = JSON.parse(await logged) as number[][];
        assertEquals(outputs.length, reference.cases.length);
        reference.cases.forEach((c: { output: { base64: string } }, i: number) => {
          const raw = Uint8Array.from(atob(c.output.base64), (ch) => ch.charCodeAt(0));
          const want = new Float32Array(raw.buffer);
          let diff = 0, scale = 0;
          want.forEach((w, j) => {
            diff = Math.max(diff, Math.abs(outputs[i][j] - w));
            scale = Math.max(scale, Math.abs(w));
          });
          assertEquals(outputs[i].length, want.length);
          assert(diff / scale <= 1e-4, `case ${i}: max rel diff ${diff / scale}`);
        });
      } finally {
        await page.close();
      }
    },
  ],

  ["index.html loads with its CSP and builds the first sample", async () => {
    index = await open(browser!, base);
    assertEquals(index.csp, PLAYGROUND_CSP);
    assertEquals(await text(index.page, "#text"), SAMPLES[0].build().as_text());
    assertEquals(await index.page.getAttribute("#editor .cm-content", "contenteditable"), "true");
  }],

  [
    "the editor is CodeMirror: it numbers lines, takes typed keys, and Ctrl+Enter builds",
    async () => {
      const { page } = index!;
      assert(await page.isVisible("#editor .cm-editor .cm-lineNumbers"), "no line numbers");
      await page.click("#editor .cm-content");
      await page.keyboard.press("Control+A");
      await page.keyboard.press("Delete");
      // One line: typed by keys, with the editor closing brackets and quotes as it goes.
      const line =
        'const ib = new ExecBuilder(); ib.function("typed_keys", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));';
      await page.keyboard.type(line);
      await page.keyboard.press("Escape"); // closes a completion list, if one is open
      assertEquals(await getSource(page), line);
      await act(page, () => page.keyboard.press("Control+Enter"));
      assertEquals(await text(page, "#text"), (await evaluateProgram(line)).as_text());
    },
  ],

  [
    "a program typed in the editor builds; as_text, as_typescript and stats are the library's",
    async () => {
      const { page } = index!;
      await setSource(page, TYPED);
      await act(page, () => page.click("#build"));
      const ex = await evaluateProgram(TYPED);
      assertEquals(await text(page, "#text"), ex.as_text());
      assertEquals(await text(page, "#typescript"), ex.as_typescript());
      assertEquals(await text(page, "#stats"), ex.stats());
    },
  ],

  [
    "the typed program runs on the CPU and on WebGPU, each way the VM runs, with timing and memory",
    async () => {
      const { page } = index!;
      const ex = await evaluateProgram(TYPED);
      await runBoth(page, ex, "scale_tanh_t", TYPED_ARGS, "typed program");
      const timing = await text(page, "#timing");
      assertStringIncludes(timing, "device webgpu(0)");
      assertStringIncludes(timing, "compiled mode"); // the VM's default, first in the list
      assert(/10 timed calls: median \d+\.\d+ ms/.test(timing), timing);
      const memory = JSON.parse((await page.getAttribute("#memory", "data-json"))!);
      assert(memory.peakBytes >= 24 && memory.allocatedBytes >= 24, JSON.stringify(memory));
      assert(memory.poolHits > 0, `the pool served no allocation: ${JSON.stringify(memory)}`);

      // The same on a VM with the generic loop, as a page without eval runs it.
      await page.selectOption("#dispatch", "generic");
      const want = await expected(ex, "scale_tanh_t", TYPED_ARGS);
      assertAgrees(await runOn(page, "cpu", "scale_tanh_t", TYPED_ARGS), want, 1e-6, "generic");
      assertStringIncludes(await text(page, "#timing"), "generic dispatch; VM created");
      await page.selectOption("#dispatch", "specialized");
      assertAgrees(await runOn(page, "cpu", "scale_tanh_t", TYPED_ARGS), want, 1e-6, "specialized");
      assertStringIncludes(await text(page, "#timing"), "specialized dispatch; VM created");
      await page.selectOption("#dispatch", "compiled");
    },
  ],

  ["Save .rvm downloads the executable's bytes", async () => {
    const { page } = index!;
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#save")]);
    const saved = await Deno.readFile(await download.path());
    assertEquals(saved, (await evaluateProgram(TYPED)).save());
  }],

  ["as_typescript() pasted into the editor rebuilds the same program (Ctrl+Enter)", async () => {
    const { page } = index!;
    const before = await text(page, "#text");
    await setSource(page, await text(page, "#typescript"));
    await act(page, () => page.press("#editor .cm-content", "Control+Enter")); // as Build does
    assertEquals(await text(page, "#text"), before);
  }],

  ["every sample builds from the editor and runs on both devices, agreeing with Deno", async () => {
    const { page } = index!;
    for (const s of SAMPLES) {
      await act(page, () => page.selectOption("#sample", s.name)); // builds the editor's text
      assertEquals(await getSource(page), s.source);
      assertEquals(await text(page, "#text"), s.build().as_text(), s.name);
      await runBoth(page, s.build(), s.function, s.args, `sample ${s.name}`);
    }
  }],

  ["a .rvm file dropped on the page loads and runs on both devices", async () => {
    const { page } = index!;
    assertStringIncludes(await drop(page, "design_doc.rvm", designDoc), "Loaded design_doc.rvm");
    const ex = Executable.load(designDoc);
    assertEquals(await text(page, "#text"), ex.as_text());
    // What the selected function takes is spelled out under the arguments.
    const hint = await text(page, "#arg-hint");
    assertEquals(hint, argumentHint(ex, await page.inputValue("#function")));
    assertStringIncludes(hint, "takes 2 arguments");
    await page.selectOption("#function", "func0");
    assertEquals(await text(page, "#arg-hint"), argumentHint(ex, "func0"));
    await runBoth(page, ex, "func0", "[[1, 2], [10, 20]]", "design_doc.rvm");
  }],

  ["errors show in the status: the editor's code with its line, a failing run", async () => {
    const { page } = index!;
    await setSource(page, "const ib = new ExecBuilder();\n\nib.emit_ret(ib.r(0));\n");
    const error = await failing(page, () => page.click("#build"));
    assertStringIncludes(error.message, "no function is open");
    assertStringIncludes(error.message, "(line 3)");
    assertEquals(await page.getAttribute("#status", "data-line"), "3");
    // The editor marks the line: a gutter marker and the line's text underlined.
    await page.waitForSelector("#editor .cm-lint-marker-error");
    assertEquals(await text(page, "#editor .cm-lintRange-error"), "ib.emit_ret(ib.r(0));");

    // A failing run of a loaded file shows the VMError and no stale result.
    await drop(page, "design_doc.rvm", designDoc);
    await page.fill("#args", "[]");
    const runError = await act(page, () => page.click("#run")).then(
      () => new Error("the run succeeded"),
      (e: Error) => e,
    );
    assertStringIncludes(runError.message, "VMError: ");
    assertStringIncludes(runError.message, "2 arguments");
    assertEquals(await text(page, "#result"), "");
  }],

  ["a syntax error is marked at its line, and a failed build clears the last listing", async () => {
    const { page } = index!;
    await setSource(page, TYPED);
    await act(page, () => page.click("#build"));
    assert((await text(page, "#text")).includes("@scale_tanh_t"));
    await setSource(
      page,
      'const ib = new ExecBuilder();\nib.function("f", 1, () => {\n  ib.emit_ret(ib.r(0);\n});\n',
    );
    const error = await failing(page, () => page.click("#build"));
    assertStringIncludes(error.message, "SyntaxError");
    assertStringIncludes(error.message, "(line 3)");
    assertEquals(await page.getAttribute("#status", "data-line"), "3");
    await page.waitForSelector("#editor .cm-lint-marker-error");
    // Nothing of the previous program is left to mistake for this one's.
    for (const pane of ["#text", "#typescript", "#stats", "#result", "#arg-hint"]) {
      assertEquals(await text(page, pane), "", pane);
    }
    assertEquals(await page.$$eval("#function option", (o) => o.length), 0);
    assertEquals(await page.getAttribute("#save", "aria-disabled"), "");
    const run = await failing(page, () => page.click("#run"));
    assertStringIncludes(run.message, "Build a program or load a .rvm file first");
  }],

  [
    "console.log while building, and vm.builtin.print while running, show in the console pane",
    async () => {
      const { page } = index!;
      await setSource(page, PRINTS);
      await act(page, () => page.click("#build"));
      assertEquals(
        await text(page, "#console"),
        "building NDArray(float32, [2], cpu(0)) [1, 2] { n: 3 }\na warning\n",
      );
      assertEquals(await page.$$eval("#console .warn", (w) => w.length), 1);
      await page.fill("#args", "[[[7, 8], [9, 10]]]");
      await page.selectOption("#device", "cpu");
      await act(page, () => page.click("#run")); // returns its argument: the page must not free it
      assertStringIncludes(await text(page, "#console"), "[[7, 8], [9, 10]]");
      // A new build starts a new console.
      await setSource(page, TYPED);
      await act(page, () => page.click("#build"));
      assertEquals(await text(page, "#console"), "");
    },
  ],

  ["the program is kept: reopening the page and a shared link open it again", async () => {
    const { page } = index!;
    await setSource(page, KEPT);
    await page.fill("#args", "[[1, -2]]");
    await act(page, () => page.click("#build"));
    const link = page.url();
    assertStringIncludes(link, "#p1=");
    assertEquals(await page.getAttribute("#share", "href"), link);
    const want = (await evaluateProgram(KEPT)).as_text();
    assertEquals(await text(page, "#arg-hint"), argumentHint(await evaluateProgram(KEPT), "kept"));

    // Edits are kept as one types, built or not: the page opened without a link has them.
    const edited = KEPT + "// edited, not built\n";
    await setSource(page, edited);
    await page.waitForTimeout(600); // the page saves 300 ms after the last change
    await page.goto(base); // the address without the link
    await page.waitForFunction(() => Number(document.body.dataset.actions) >= 1);
    assertEquals(await getSource(page), edited);
    assertEquals(await page.inputValue("#args"), "[[1, -2]]");
    assertStringIncludes(await text(page, "#status"), "(the program from local storage)");

    // The link opens the built program anywhere: another profile (context) has no storage.
    const elsewhere = await browser!.newContext();
    try {
      const shared = await elsewhere.newPage();
      await shared.goto(link);
      await shared.waitForFunction(() => Number(document.body.dataset.actions) >= 1);
      assertEquals(await getSource(shared), KEPT);
      assertEquals(await text(shared, "#text"), want);
      assertEquals(await shared.inputValue("#function"), "kept");
      assertStringIncludes(await text(shared, "#status"), "(the program from the link)");
      await act(shared, () => shared.click("#run"));
      assertEquals(await result(shared), {
        tensor: { dtype: "float32", shape: [2], device: "cpu(0)", values: [-1, 2] },
      });
    } finally {
      await elsewhere.close();
    }
    await page.goto(link); // only the fragment changes: the same document, so reload it
    await page.reload();
    await page.waitForFunction(() => Number(document.body.dataset.actions) >= 1);
    assertEquals(await getSource(page), KEPT, "the link wins over local storage");
  }],

  [
    "every WebGPU operator agrees with the CPU in Chromium, NaN and infinities included",
    async () => {
      // Chromium compiles WGSL with Tint and, without a GPU, runs it on SwiftShader: both
      // differ from Deno's naga and llvmpipe (constant -inf rejected; exp(NaN) = inf).
      const mismatches = await index!.page.evaluate(sweepOperators, OPERATOR_CASES);
      assertEquals(mismatches, []);
    },
  ],

  ["index.html logged no errors", () => {
    assertEquals(index!.errors, []);
    return Promise.resolve();
  }],

  ["strict.html loads with a CSP that forbids eval; its editor is read-only", async () => {
    strict = await open(browser!, new URL("strict.html", base).href);
    assertEquals(strict.csp, STRICT_CSP);
    assert(!STRICT_CSP.includes("unsafe-eval"));
    assertEquals(
      await strict.page.getAttribute("#editor .cm-content", "contenteditable"),
      "false",
    );
    assertStringIncludes(await text(strict.page, "#mode"), "Strict Content-Security-Policy");
  }],

  [
    "under the strict CSP every sample builds from compiled code and runs on both devices",
    async () => {
      const { page } = strict!;
      for (const s of SAMPLES) {
        await act(page, () => page.selectOption("#sample", s.name)); // builds at once
        assertStringIncludes(await text(page, "#status"), "(compiled in)");
        assertEquals(await text(page, "#text"), s.build().as_text(), s.name);
        await runBoth(page, s.build(), s.function, s.args, `strict: sample ${s.name}`);
      }
    },
  ],

  ["under the strict CSP a dropped .rvm file loads, runs on both devices and saves", async () => {
    const { page } = strict!;
    await drop(page, "design_doc.rvm", designDoc);
    await runBoth(page, Executable.load(designDoc), "func0", "[[3], [4]]", "strict: design_doc");
    // Specialized dispatch falls back to the generic loop as well (as compiled mode, the default).
    await page.selectOption("#dispatch", "specialized");
    assertAgrees(
      await runOn(page, "cpu", "func0", "[[3], [4]]"),
      await expected(Executable.load(designDoc), "func0", "[[3], [4]]"),
      0,
      "strict: specialized dispatch",
    );
    await page.selectOption("#dispatch", "compiled");
    // Saving works under the policy too (a blob: download).
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#save")]);
    assertEquals(await Deno.readFile(await download.path()), Executable.load(designDoc).save());
  }],

  ["under the strict CSP the VM's eval was refused (generic loop), and nothing else", async () => {
    const { page, errors } = strict!;
    const read = async (): Promise<{ directive: string; blocked: string }[]> =>
      JSON.parse((await page.evaluate(() => document.body.dataset.cspViolations)) ?? "[]");
    const violations = await read();
    for (const v of violations) assertEquals(v, { directive: "script-src", blocked: "eval" });
    const perAttempt = await violationsPerEvalAttempt(browser!);
    // The first VM tried to write its specialized loops with new Function and was refused;
    // the refusal is remembered for the page (vm/dynamic_code.ts), so the dozens of VMs and
    // functions above cost one attempt's reports (one per policy), not one per function (24
    // events before).
    // The results came from the generic loop.
    assert(perAttempt > 0, "the probe page allowed new Function");
    assertEquals(violations.length, perAttempt, "the VM tried new Function more than once");
    assertStringIncludes(await text(page, "#csp"), "generic dispatch loop");
    assertEquals(errors, []);
  }],
];

report({ kind: "plan", checks: checks.map(([name]) => name) });
let setupFailed: string | null = null;
let failed = 0;
try {
  for (const [name, fn] of checks) {
    const start = performance.now();
    let error: string | null = null;
    if (setupFailed !== null) {
      error = `not run: ${setupFailed}`;
    } else {
      try {
        await fn();
      } catch (e) {
        error = e instanceof Error ? e.stack ?? e.message : String(e);
        if (browser === null || index === null && name.startsWith("index.html loads")) {
          setupFailed = `"${name}" failed`;
        }
      }
    }
    if (error !== null) failed++;
    report({ kind: "check", name, error, ms: Math.round(performance.now() - start) });
  }
} finally {
  const version = browser === null ? "none" : (browser as Browser).version();
  await (browser as Browser | null)?.close();
  await (server as Deno.HttpServer | null)?.shutdown();
  const ms = Math.round(performance.now() - t0);
  report({ kind: "done", browser: version, ms });
  console.error(
    `browser e2e (Chromium ${version}): ${
      checks.length - failed
    } passed, ${failed} failed, ${ms} ms`,
  );
}
if (failed > 0) Deno.exit(1);

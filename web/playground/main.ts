/**
 * The playground page (web/index.html, web/strict.html): write an
 * ExecBuilder program, see its dumps, run it on the CPU or on WebGPU with
 * timing and memory figures, or drop a `.rvm` file to load and run it.
 *
 * The page comes in two variants. index.html may evaluate the editor's text
 * (its CSP allows `'unsafe-eval'`). strict.html is served under a CSP
 * without it: the editor is read-only there, Build builds the chosen
 * sample from code compiled into this bundle, and `.rvm` files load and run
 * as usual (loading needs no eval). There the VM cannot write its
 * specialized loops (`new Function` throws) and runs its generic dispatch
 * loop; the page counts the CSP violations that attempt reports.
 *
 * The editor is CodeMirror 6 (editor.ts). What the editor's code prints with
 * `console.log` (and what `vm.builtin.print` prints during a run) shows in the
 * console pane; an error in the code is marked at its line. The program (text,
 * arguments, function) is kept in local storage as one types, and in the URL's
 * fragment after each build (share.ts), so reloading keeps it and the URL is a
 * link to it.
 *
 * State the browser test reads: `document.body.dataset.actions` counts
 * finished actions, `dataset.busy` is "1" while one runs; `#status` has
 * `data-state` "ok" or "error" and, for an error in the editor's code,
 * `data-line`; `#result` has the results as JSON in `data-json` (see
 * program.ts's `ResultJSON`); `body.dataset.cspViolations` lists the
 * violations seen, as JSON. `globalThis.relaxvmPlayground` has `getSource()`
 * and `setSource(text)`, for tests and for pasting programs from scripts.
 *
 * @module
 */

import {
  cpu,
  type Device,
  Executable,
  type Execution,
  NDArray,
  TENSOR_DTYPES,
  type TensorDType,
  VirtualMachine,
  type VirtualMachineOptions,
  webgpu,
} from "../../mod.ts";
import {
  argumentHint,
  evaluateProgram,
  formatConsoleValue,
  formatResult,
  parseArguments,
  resultJSON,
  sourceLine,
} from "./program.ts";
import { type Sample, sample, SAMPLES } from "./samples.ts";
import { createEditor } from "./editor.ts";
import { checked, decodeShared, encodeShared, type SharedProgram } from "./share.ts";

/** Whether this page's CSP forbids eval (strict.html says so on its root element). */
const STRICT = document.documentElement.dataset.csp === "strict";

const DTYPES = TENSOR_DTYPES;

// ---- A few DOM helpers ---------------------------------------------------

type Props = Record<string, string | boolean | number>;

/** Makes an element with attributes (`text` sets its text) and children. */
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "text") e.textContent = String(v);
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false) e.setAttribute(k, String(v));
  }
  e.append(...children);
  return e;
}

function options(values: readonly string[], labels?: readonly string[]): HTMLOptionElement[] {
  return values.map((v, i) => el("option", { value: v, text: labels?.[i] ?? v }));
}

// ---- The page --------------------------------------------------------------

const ui = {
  sample: el(
    "select",
    { id: "sample" },
    ...options(SAMPLES.map((s) => s.name), SAMPLES.map((s) => `${s.name}: ${s.title}`)),
  ),
  build: el("button", { id: "build", type: "button", text: "Build" }),
  save: el("a", { id: "save", download: "program.rvm", text: "Save .rvm", "aria-disabled": true }),
  share: el("a", {
    id: "share",
    href: "#",
    text: "Link to this program",
    title: "the page's URL holds the program after each build: copy it to share",
  }),
  editor: el("div", { id: "editor" }),
  console: el("pre", { id: "console", "aria-label": "console output" }),
  hint: el("p", { id: "arg-hint" }),
  file: el("input", { id: "file", type: "file", accept: ".rvm" }),
  drop: el("div", { id: "drop" }),
  fn: el("select", { id: "function", "aria-label": "function" }),
  device: el("select", { id: "device" }, ...options(["cpu", "webgpu"], ["CPU", "WebGPU"])),
  dispatch: el(
    "select",
    {
      id: "dispatch",
      title: "how the VM runs functions (VirtualMachineOptions execution)",
    },
    ...options(
      ["compiled", "specialized", "generic"],
      ["compiled mode", "specialized loop", "generic loop"],
    ),
  ),
  dtype: el("select", { id: "dtype" }, ...options(DTYPES)),
  repeat: el("input", { id: "repeat", type: "number", value: 10, min: 1, max: 1000 }),
  args: el("input", { id: "args", type: "text", spellcheck: false, "aria-label": "arguments" }),
  run: el("button", { id: "run", type: "button", text: "Run" }),
  result: el("pre", { id: "result" }),
  timing: el("pre", { id: "timing" }),
  memory: el("pre", { id: "memory" }),
  text: el("pre", { id: "text" }),
  typescript: el("pre", { id: "typescript" }),
  stats: el("pre", { id: "stats" }),
  status: el("p", { id: "status", role: "status", "data-state": "ok" }),
  csp: el("p", { id: "csp" }),
};

ui.drop.append(
  "Drop a .rvm file here, or ",
  el("label", {}, "choose one ", ui.file),
);

function section(title: string, ...children: (Node | string)[]): HTMLElement {
  return el("section", {}, el("h2", { text: title }), ...children);
}

function details(title: string, body: HTMLElement, open = false): HTMLElement {
  return el("details", { open }, el("summary", { text: title }), body);
}

document.body.append(
  el(
    "header",
    {},
    el("h1", { text: "relaxvm playground" }),
    el("p", {
      id: "mode",
      text: STRICT
        ? "Strict Content-Security-Policy: this page may not evaluate code, so the editor is " +
          "read-only. Build builds the chosen sample from code compiled into the page; .rvm files " +
          "load and run as usual. The VM runs its generic dispatch loop here."
        : "Write an ExecBuilder program in JavaScript, build it, run it on the CPU or on WebGPU. " +
          "Drop a .rvm file anywhere to load it.",
    }),
    ui.csp,
  ),
  el(
    "main",
    {},
    section(
      "Program",
      el(
        "div",
        { class: "toolbar" },
        el("label", {}, "Sample ", ui.sample),
        ui.build,
        ui.save,
        ...(STRICT ? [] : [ui.share]),
      ),
      ui.editor,
      ui.drop,
      el("h3", { text: "Console" }),
      ui.console,
    ),
    section(
      "Run",
      el(
        "div",
        { class: "toolbar" },
        el("label", {}, "Function ", ui.fn),
        el("label", {}, "Device ", ui.device),
        el("label", {}, "Run as ", ui.dispatch),
        el("label", {}, "Tensors as ", ui.dtype),
        el("label", {}, "Timed runs ", ui.repeat),
        ui.run,
      ),
      el("label", { class: "wide" }, "Arguments (JSON array) ", ui.args),
      ui.hint,
      el("h3", { text: "Result" }),
      ui.result,
      el("h3", { text: "Timing" }),
      ui.timing,
      el("h3", { text: "Memory" }),
      ui.memory,
    ),
    section(
      "Executable",
      details("as_text()", ui.text, true),
      details("as_typescript()", ui.typescript),
      details("stats()", ui.stats),
    ),
  ),
  el("footer", {}, ui.status),
);

const editor = createEditor({
  parent: ui.editor,
  text: "",
  readOnly: STRICT,
  onChange: () => saveLater(),
  onBuild: () => void action(build),
});

(globalThis as Record<string, unknown>).relaxvmPlayground = {
  getSource: () => editor.getSource(),
  setSource: (text: string) => editor.setSource(text),
};

// ---- State -------------------------------------------------------------------

let executable: Executable | null = null;
/** VMs of the current executable, per device kind and way of running: reused so the pool warms up. */
const vms = new Map<string, VirtualMachine>();
let saveUrl: string | null = null;
let gpu: Promise<Device> | null = null;
let actions = 0;
const violations: { directive: string; blocked: string }[] = [];

document.body.dataset.actions = "0";
document.body.dataset.busy = "0";
document.body.dataset.cspViolations = "[]";

document.addEventListener("securitypolicyviolation", (e) => {
  violations.push({ directive: e.effectiveDirective, blocked: e.blockedURI });
  document.body.dataset.cspViolations = JSON.stringify(violations);
  const evals = violations.filter((v) => v.blocked === "eval").length;
  ui.csp.textContent = `The CSP blocked eval ${evals} time${evals === 1 ? "" : "s"} ` +
    `(${violations.length} violation${violations.length === 1 ? "" : "s"} in all): ` +
    "the VM runs its generic dispatch loop instead of generated JavaScript.";
});

function setStatus(state: "ok" | "error", message: string): void {
  ui.status.dataset.state = state;
  ui.status.textContent = message;
}

/** Runs one user action: disables the buttons, reports errors, counts it as finished. */
async function action(what: () => Promise<string>): Promise<void> {
  document.body.dataset.busy = "1";
  ui.build.disabled = ui.run.disabled = true;
  delete ui.status.dataset.line;
  try {
    setStatus("ok", await what());
  } catch (e) {
    console.warn(e); // the page shows it; a warning keeps console errors for real faults
    setStatus("error", e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  } finally {
    ui.build.disabled = ui.run.disabled = false;
    document.body.dataset.busy = "0";
    document.body.dataset.actions = String(++actions);
  }
}

function ms(t: number): string {
  return `${t.toFixed(t < 10 ? 2 : 1)} ms`;
}

function bytes(n: number): string {
  return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`;
}

/** Empties the result, timing and memory panels (a new program, or a new run). */
function clearOutputs(): void {
  ui.result.textContent = ui.timing.textContent = ui.memory.textContent = "";
  delete ui.result.dataset.json;
  delete ui.memory.dataset.json;
}

// ---- The console pane, error lines, persistence ----------------------------------

const LEVELS = ["log", "info", "warn", "error", "debug"] as const;
/** Lines the console pane keeps (the oldest go first). */
const CONSOLE_LINES = 1000;

function appendConsole(level: string, args: unknown[]): void {
  const line = el("span", { class: level, text: args.map((a) => formatConsoleValue(a)).join(" ") });
  ui.console.append(line, "\n");
  while (ui.console.childNodes.length > 2 * CONSOLE_LINES) ui.console.firstChild?.remove();
  ui.console.scrollTop = ui.console.scrollHeight;
}

/** Runs `fn` with `console.*` also writing to the console pane. */
async function captureConsole<T>(fn: () => Promise<T>): Promise<T> {
  const saved = LEVELS.map((level) => console[level]);
  LEVELS.forEach((level, i) => {
    console[level] = (...args: unknown[]) => {
      appendConsole(level, args);
      saved[i].apply(console, args);
    };
  });
  try {
    return await fn();
  } finally {
    LEVELS.forEach((level, i) => console[level] = saved[i]);
  }
}

/**
 * Marks the line of the editor's code where `e` came from: from the stack for an error the
 * code threw (program.ts adds "(line n)" to the message), from the editor's parser for a
 * syntax error (V8 gives no line for code compiled with `new Function`).
 */
function markErrorLine(e: unknown): void {
  if (!(e instanceof Error)) return;
  let line = sourceLine(e);
  if (line === null && e instanceof SyntaxError) {
    line = editor.syntaxErrorLine();
    if (line !== null) e.message += ` (line ${line})`;
  }
  if (line === null) return;
  editor.showError(line, `${e.name}: ${e.message}`);
  ui.status.dataset.line = String(line);
}

const STORAGE_KEY = "relaxvm.playground.v1";

function currentProgram(): SharedProgram {
  return { source: editor.getSource(), args: ui.args.value, fn: ui.fn.value };
}

let saveTimer: ReturnType<typeof setTimeout> | undefined;

/** Keeps the program in local storage a moment after the last keystroke. */
function saveLater(): void {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(saveNow, 300);
}

function saveNow(): void {
  clearTimeout(saveTimer);
  if (STRICT) return; // this page runs its compiled-in samples only
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(currentProgram()));
  } catch {
    // Storage off (private mode, quota): the URL still holds the last build.
  }
}

/** Puts the program into the URL's fragment: the URL is then a link to it. */
async function updateLink(): Promise<void> {
  if (STRICT) return;
  history.replaceState(null, "", await encodeShared(currentProgram()));
  ui.share.href = location.href;
}

/** The program of the page's link, else the one in local storage, else null. */
async function storedProgram(): Promise<{ program: SharedProgram; from: string } | null> {
  if (STRICT) return null;
  const linked = await decodeShared(location.hash);
  if (linked !== null) return { program: linked, from: "the link" };
  try {
    const text = localStorage.getItem(STORAGE_KEY);
    if (text !== null) return { program: checked(JSON.parse(text)), from: "local storage" };
  } catch {
    // Nothing usable stored.
  }
  return null;
}

/** Forgets the executable: a failed build must not leave the previous one's listing. */
function clearExecutable(): void {
  executable = null;
  vms.clear();
  ui.text.textContent = ui.typescript.textContent = ui.stats.textContent = "";
  ui.fn.replaceChildren();
  ui.hint.textContent = "";
  if (saveUrl !== null) URL.revokeObjectURL(saveUrl);
  saveUrl = null;
  ui.save.removeAttribute("href");
  ui.save.setAttribute("aria-disabled", "");
  clearOutputs();
}

function updateHint(): void {
  ui.hint.textContent = executable === null ? "" : argumentHint(executable, ui.fn.value);
}

/** Shows a new executable: dumps, function list, save link; drops the old VMs. */
function show(ex: Executable, source: string): void {
  executable = ex;
  vms.clear();
  ui.text.textContent = ex.as_text();
  ui.typescript.textContent = ex.as_typescript();
  ui.stats.textContent = ex.stats();
  const previous = ui.fn.value;
  ui.fn.replaceChildren(...options(ex.function_names));
  if (ex.function_names.includes(previous)) ui.fn.value = previous;
  if (saveUrl !== null) URL.revokeObjectURL(saveUrl);
  const bytes = ex.save();
  saveUrl = URL.createObjectURL(
    new Blob([bytes as BlobPart], { type: "application/octet-stream" }),
  );
  ui.save.href = saveUrl;
  ui.save.removeAttribute("aria-disabled");
  clearOutputs();
  ui.save.title = `${source}: ${bytes.length} bytes`;
  updateHint();
}

function chooseSample(s: Sample): void {
  ui.sample.value = s.name;
  editor.setSource(s.source);
  ui.args.value = s.args;
  ui.fn.value = s.function;
}

async function build(): Promise<string> {
  const t0 = performance.now();
  let ex: Executable;
  let from: string;
  ui.console.replaceChildren();
  editor.clearErrors();
  try {
    if (STRICT) {
      const s = sample(ui.sample.value);
      ex = s.build();
      from = `sample "${s.name}" (compiled in)`;
    } else {
      const source = editor.getSource();
      ex = await captureConsole(() => evaluateProgram(source));
      from = "the editor";
    }
  } catch (e) {
    clearExecutable();
    markErrorLine(e);
    throw e;
  }
  const t = performance.now() - t0;
  const wanted = ui.fn.value;
  show(ex, from);
  const s = SAMPLES.find((s) => s.name === ui.sample.value);
  if (s !== undefined && ex.function_names.includes(s.function) && STRICT) ui.fn.value = s.function;
  if (ex.function_names.includes(wanted)) ui.fn.value = wanted;
  updateHint();
  saveNow();
  await updateLink();
  const warnings = ex.warnings.length > 0 ? `; warnings: ${ex.warnings.join("; ")}` : "";
  return `Built from ${from} in ${ms(t)}: ${ex.function_names.length} function(s)${warnings}`;
}

async function load(file: File): Promise<string> {
  const data = new Uint8Array(await file.arrayBuffer());
  const t0 = performance.now();
  const ex = Executable.load(data);
  const t = performance.now() - t0;
  show(ex, file.name);
  ui.args.value = "[]";
  return `Loaded ${file.name} (${data.length} bytes) in ${ms(t)}: functions ${
    ex.function_names.join(", ")
  }`;
}

async function deviceFor(kind: string): Promise<Device> {
  if (kind === "cpu") return cpu();
  gpu ??= webgpu().catch((e) => {
    gpu = null; // try again next time
    throw e;
  });
  return await gpu;
}

async function run(): Promise<string> {
  if (executable === null) throw new Error("Build a program or load a .rvm file first");
  clearOutputs(); // a failing run leaves no stale figures behind
  const name = ui.fn.value;
  const kind = ui.device.value;
  const runAs = ui.dispatch.value;
  const vmOptions: VirtualMachineOptions = { execution: runAs as Execution };
  const how = runAs === "compiled" ? "compiled mode" : `${runAs} dispatch`;
  const repeat = Math.max(1, Math.min(1000, Math.floor(Number(ui.repeat.value)) || 1));

  let t0 = performance.now();
  const device = await deviceFor(kind);
  const tDevice = performance.now() - t0;

  let vm = vms.get(`${kind} ${runAs}`);
  let loaded = `${how}; VM reused (kept until the next build)`;
  if (vm === undefined) {
    t0 = performance.now();
    vm = new VirtualMachine(executable, device, vmOptions);
    vms.set(`${kind} ${runAs}`, vm);
    loaded = `${how}; VM created in ${ms(performance.now() - t0)}`;
  }

  // Inputs go where the program runs: tensors are made on the chosen device.
  const args = parseArguments(ui.args.value, ui.dtype.value as TensorDType, device);
  try {
    t0 = performance.now();
    const out = await captureConsole(() => vm.invoke(name, ...args));
    const tCall = performance.now() - t0;
    const json = await resultJSON(out);
    const tFirst = performance.now() - t0;
    disposeResult(out, args);

    const timed = await vm.time_evaluator(name, { number: 1, repeat })(...args);

    ui.result.dataset.json = JSON.stringify(json);
    ui.result.textContent = formatResult(json);
    ui.timing.textContent = [
      `device ${device}${kind === "webgpu" ? ` (acquired in ${ms(tDevice)})` : ""}`,
      loaded,
      `first call ${ms(tCall)} (${ms(tFirst)} with reading the result)`,
      `${repeat} timed call${repeat === 1 ? "" : "s"}: median ${ms(timed.median)}, ` +
      `min ${ms(timed.min)}, max ${ms(timed.max)}`,
    ].join("\n");
    const m = vm.memory_stats(device);
    ui.memory.dataset.json = JSON.stringify(m);
    ui.memory.textContent = [
      `live ${bytes(m.liveBytes)} in ${m.liveBlocks} block(s), peak ${bytes(m.peakBytes)}`,
      `allocated from the device ${bytes(m.allocatedBytes)} in all`,
      `pool hits ${m.poolHits}, misses ${m.poolMisses}`,
    ].join("\n");
    return `Ran @${name} on ${device}`;
  } finally {
    for (const a of args) if (a instanceof NDArray) a.dispose();
  }
}

/**
 * Gives back the memory of a result (tensors, nested in tuples too), except the arguments
 * themselves, which a function may return and the timed runs still use.
 */
function disposeResult(v: unknown, args: readonly unknown[]): void {
  if (args.includes(v)) return;
  if (v instanceof NDArray) v.dispose();
  else if (Array.isArray(v)) v.forEach((x) => disposeResult(x, args));
}

// ---- Wiring --------------------------------------------------------------------

ui.sample.addEventListener("change", () => {
  chooseSample(sample(ui.sample.value));
  void action(build);
});
ui.build.addEventListener("click", () => void action(build));
// Ctrl+Enter (Cmd+Enter) in the editor builds (editor.ts's keymap).
ui.run.addEventListener("click", () => void action(run));
ui.args.addEventListener("input", saveLater);
ui.fn.addEventListener("change", () => {
  updateHint();
  saveNow();
  void updateLink();
});
ui.share.addEventListener("click", (e) => {
  e.preventDefault();
  void navigator.clipboard?.writeText(location.href).then(
    () => setStatus("ok", "Copied the link to this program"),
    () => setStatus("ok", "The address bar holds the link to this program"),
  );
});
ui.file.addEventListener("change", () => {
  const f = ui.file.files?.[0];
  if (f !== undefined) void action(() => load(f));
  ui.file.value = "";
});

// A file dropped anywhere on the page loads; the drop zone lights up meanwhile.
addEventListener("dragover", (e) => {
  e.preventDefault();
  ui.drop.classList.add("over");
});
addEventListener("dragleave", () => ui.drop.classList.remove("over"));
addEventListener("drop", (e) => {
  e.preventDefault();
  ui.drop.classList.remove("over");
  const f = e.dataTransfer?.files[0];
  if (f !== undefined) void action(() => load(f));
});

// The program of the link, or of the last visit, or the first sample.
void action(async () => {
  let stored: Awaited<ReturnType<typeof storedProgram>> = null;
  let note = "";
  try {
    stored = await storedProgram();
  } catch (e) {
    note = ` (${(e as Error).message}: showing a sample instead)`;
  }
  if (stored === null) {
    chooseSample(SAMPLES[0]);
    return await build() + note;
  }
  editor.setSource(stored.program.source);
  ui.args.value = stored.program.args;
  ui.fn.replaceChildren(...options([stored.program.fn]));
  ui.fn.value = stored.program.fn;
  return `${await build()} (the program from ${stored.from})`;
});

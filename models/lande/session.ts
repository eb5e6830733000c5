/**
 * `LandeSession`: lande's language detector run by the VM. Reads the
 * languages and n-grams from `lande.json`, loads the network through the
 * program's `load_params`, and classifies texts in one batch.
 *
 * @module
 */

import { cpu, type Device, type NDArray, tensor, VirtualMachine } from "../../mod.ts";
import { features, type LandeNgrams } from "./features.ts";
import { buildLande } from "./program.ts";

/** lande loaded on a device. */
export class LandeSession {
  /** The VM running the program. */
  readonly vm: VirtualMachine;
  /** The language codes (ISO 639-3), one per output. */
  readonly langs: readonly string[];
  readonly #ngrams: LandeNgrams;
  readonly #params: NDArray[];

  private constructor(vm: VirtualMachine, langs: string[], ngrams: LandeNgrams, params: NDArray[]) {
    this.vm = vm;
    this.langs = langs;
    this.#ngrams = ngrams;
    this.#params = params;
  }

  /** Loads the model from the directory at `dir` (a URL) that `tools/fetch_lande.ts` writes. */
  static async create(dir: string | URL, options: { device?: Device } = {}): Promise<LandeSession> {
    const base = new URL(String(dir).endsWith("/") ? String(dir) : `${dir}/`);
    const response = await fetch(new URL("lande.json", base));
    if (!response.ok) throw new Error(`${base}lande.json: HTTP ${response.status}`);
    const { langs, ngrams } = await response.json();
    const device = options.device ?? cpu();
    // The program loads its weights itself: the VM grants it exactly that directory.
    const vm = new VirtualMachine(buildLande(), device, { tensorCacheRoots: [base.href] });
    const params = await vm.invoke("load_params", base.href, device.deviceType, device.id);
    return new LandeSession(vm, langs, ngrams, params as NDArray[]);
  }

  /** Each text's probability per language, in the order of `langs`. */
  async probabilities(texts: readonly string[]): Promise<Float32Array[]> {
    const rows = texts.map((t) => features(t, this.#ngrams));
    const width = rows[0]?.length ?? 0;
    const x = new Float32Array(rows.length * width);
    rows.forEach((r, i) => x.set(r, i * width));
    using input = tensor(x, { shape: [rows.length, width] });
    using out = await this.vm.invokeTensor("classify", input, this.#params);
    const data = await out.data() as Float32Array;
    const n = this.langs.length;
    return rows.map((_, i) => data.slice(i * n, (i + 1) * n));
  }

  /** What `lande(text)` returns for each text: `[language, probability]`, most probable first. */
  async detect(texts: readonly string[]): Promise<[string, number][][]> {
    return (await this.probabilities(texts)).map((p) =>
      Array.from(p, (v, i): [string, number] => [this.langs[i], v]).sort((a, b) => b[1] - a[1])
    );
  }

  /** Releases the parameters. */
  dispose(): void {
    for (const p of this.#params) p.dispose();
  }
}

/**
 * The playground's code editor: CodeMirror 6 (basic setup, JavaScript mode), with the two
 * things the page needs beyond editing: an error shown at its line (a lint diagnostic, which
 * marks the line and its gutter), and the line of the first syntax error, which V8 does not
 * give for code compiled with `new Function`: the editor's own JavaScript parser finds it.
 *
 * CodeMirror comes from npm through web/browser.deno.json (versions pinned in
 * web/browser.deno.lock) and is bundled into playground.js by web/bundle.ts.
 *
 * @module
 */

import { basicSetup } from "codemirror";
import { javascript } from "@codemirror/lang-javascript";
import { ensureSyntaxTree } from "@codemirror/language";
import { type Diagnostic, lintGutter, setDiagnostics } from "@codemirror/lint";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap } from "@codemirror/view";

/** The editor, as the page uses it. */
export interface Editor {
  /** The CodeMirror view (its DOM is `view.dom`). */
  readonly view: EditorView;
  /** The program text. */
  getSource(): string;
  /** Replaces the program text (clears error marks). */
  setSource(text: string): void;
  /** Marks line `line` (1-based) with `message`; a line out of range marks the last. */
  showError(line: number, message: string): void;
  /** Removes the error marks. */
  clearErrors(): void;
  /** The line of the first syntax error in the text, or null when it parses. */
  syntaxErrorLine(): number | null;
}

/** What `createEditor` needs from the page. */
export interface EditorOptions {
  /** Where the editor goes. */
  parent: HTMLElement;
  /** The initial text. */
  text: string;
  /** No editing (the strict-CSP page, which cannot evaluate what one types). */
  readOnly: boolean;
  /** Called after each change of the text. */
  onChange(text: string): void;
  /** Ctrl+Enter / Cmd+Enter. */
  onBuild(): void;
}

/** Makes the editor inside `options.parent`. */
export function createEditor(options: EditorOptions): Editor {
  const view = new EditorView({
    parent: options.parent,
    state: EditorState.create({
      doc: options.text,
      extensions: [
        keymap.of([{
          key: "Mod-Enter",
          run: () => {
            options.onBuild();
            return true;
          },
        }]),
        basicSetup,
        javascript(),
        lintGutter(),
        EditorState.readOnly.of(options.readOnly),
        EditorView.editable.of(!options.readOnly),
        EditorView.contentAttributes.of({ "aria-label": "ExecBuilder program (JavaScript)" }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) options.onChange(update.state.doc.toString());
        }),
      ],
    }),
  });
  const clearErrors = () => view.dispatch(setDiagnostics(view.state, []));
  return {
    view,
    getSource: () => view.state.doc.toString(),
    setSource(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
      clearErrors();
    },
    showError(line, message) {
      const doc = view.state.doc;
      const at = doc.line(Math.min(Math.max(1, line), doc.lines));
      const diagnostic: Diagnostic = {
        from: at.from,
        to: at.to,
        severity: "error",
        message,
      };
      view.dispatch(setDiagnostics(view.state, [diagnostic]));
    },
    clearErrors,
    syntaxErrorLine() {
      const tree = ensureSyntaxTree(view.state, view.state.doc.length, 2000);
      if (tree === null) return null;
      let at = -1;
      tree.iterate({
        enter(node) {
          if (at >= 0) return false;
          if (node.type.isError) at = node.from;
        },
      });
      return at < 0 ? null : view.state.doc.lineAt(at).number;
    },
  };
}

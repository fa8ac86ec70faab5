/* A small hand-written syntax highlighter for the code editor (JavaScript and Python): comments,
   strings, numbers and keywords, rendered into a <pre> under a transparent <textarea>. */
"use strict";
const Highlight = (() => {
  const KEYWORDS = {
    nodejs: "async await break case catch class const continue default delete do else export extends false finally for function if in instanceof let new null of return switch this throw true try typeof undefined var void while yield require module exports",
    python: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield",
  };
  const escape = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const span = (kind, text) => `<span class="tok-${kind}">${escape(text)}</span>`;
  function pattern(language) {
    const comment = language === "python" ? String.raw`#[^\n]*` : String.raw`\/\/[^\n]*|\/\*[\s\S]*?\*\/`;
    const strings = [String.raw`"""[\s\S]*?"""`, String.raw`'''[\s\S]*?'''`, String.raw`"(?:\\.|[^"\\\n])*"`, String.raw`'(?:\\.|[^'\\\n])*'`];
    if (language !== "python") strings.push(String.raw`\`(?:\\.|[^\`\\])*\``);
    return new RegExp(`(${comment})|(${strings.join("|")})|(\\b\\d+(?:\\.\\d+)?\\b)|([A-Za-z_$][\\w$]*)(\\s*\\()?`, "g");
  }
  function render(code, language) {
    const keywords = new Set((KEYWORDS[language] || "").split(" "));
    let out = "";
    let last = 0;
    for (const match of code.matchAll(pattern(language))) {
      const [text, comment, string, number, word, call] = match;
      out += escape(code.slice(last, match.index));
      if (comment) out += span("com", text);
      else if (string) out += span("str", text);
      else if (number) out += span("num", text);
      else if (keywords.has(word)) out += span("kw", word) + escape(call || "");
      else if (call) out += span("fn", word) + escape(call);
      else out += escape(text);
      last = match.index + text.length;
    }
    return out + escape(code.slice(last)) + "\n";
  }
  /* Wire a textarea to its <pre>: re-render on input, keep scrolling in step, Tab inserts two spaces. */
  function attach(textarea, pre, language) {
    const state = { language };
    const update = () => { pre.innerHTML = render(textarea.value, state.language); pre.scrollTop = textarea.scrollTop; pre.scrollLeft = textarea.scrollLeft; };
    textarea.addEventListener("input", update);
    textarea.addEventListener("scroll", () => { pre.scrollTop = textarea.scrollTop; pre.scrollLeft = textarea.scrollLeft; });
    textarea.addEventListener("keydown", (event) => {
      if (event.key !== "Tab" || textarea.readOnly) return;
      event.preventDefault();
      const { selectionStart: start, selectionEnd: end } = textarea;
      textarea.value = textarea.value.slice(0, start) + "  " + textarea.value.slice(end);
      textarea.selectionStart = textarea.selectionEnd = start + 2;
      update();
    });
    update();
    return { setLanguage(value) { state.language = value; update(); }, update };
  }
  return { render, attach };
})();

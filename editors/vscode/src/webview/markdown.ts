// A small, safe markdown renderer for the chat view: the model's text is escaped first, then
// only a few constructs become markup — headings, fenced code (coloured by a minimal
// tokenizer), inline code, bold, italic, lists, paragraphs. Links stay text (their label and
// address), so nothing the model writes can navigate, load or run anything.

/** Escapes the five characters HTML gives meaning to. */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/** Keywords coloured in code blocks (a union over the languages a model writes most). */
const KEYWORDS = new Set(
  (
    "as async await break case catch class const continue crate def default do else enum export " +
    "extends false fn for from func function go if impl import in interface let loop match mod " +
    "move mut new nil None null package pub return Self self static struct super switch throw " +
    "trait true try type typeof use var void where while with yield Some Ok Err"
  ).split(" "),
);

/** One code block's text as HTML, its tokens in spans the stylesheet colours. */
export function highlight(code: string): string {
  const token =
    /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)|(\b\d[\d_]*(?:\.\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
  let html = "";
  let last = 0;
  for (const match of code.matchAll(token)) {
    const at = match.index ?? 0;
    html += escapeHtml(code.slice(last, at));
    const [text, comment, string, number, word] = match;
    const escaped = escapeHtml(text);
    if (comment !== undefined) {
      html += `<span class="tok-comment">${escaped}</span>`;
    } else if (string !== undefined) {
      html += `<span class="tok-string">${escaped}</span>`;
    } else if (number !== undefined) {
      html += `<span class="tok-number">${escaped}</span>`;
    } else if (word !== undefined && KEYWORDS.has(word)) {
      html += `<span class="tok-keyword">${escaped}</span>`;
    } else {
      html += escaped;
    }
    last = at + text.length;
  }
  return html + escapeHtml(code.slice(last));
}

/** Inline markup of one escaped line: code spans first (their insides stay literal). */
function inline(escaped: string): string {
  return escaped
    .split(/(`[^`]+`)/)
    .map((part) => {
      if (part.length > 2 && part.startsWith("`") && part.endsWith("`")) {
        return `<code>${part.slice(1, -1)}</code>`;
      }
      return part
        .replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, '$1 <span class="link">($2)</span>')
        .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
        .replace(/__([^_]+)__/g, "<strong>$1</strong>")
        .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
        .replace(/(^|[^\w])_([^_\s][^_]*)_(?!\w)/g, "$1<em>$2</em>");
    })
    .join("");
}

/** The markdown `text` as HTML; unfinished constructs (a fence still streaming) render too. */
export function renderMarkdown(text: string): string {
  const lines = text.split("\n");
  const out: string[] = [];
  let paragraph: string[] = [];
  let list: { tag: "ul" | "ol"; items: string[] } | undefined;
  const flush = () => {
    if (paragraph.length > 0) {
      out.push(`<p>${paragraph.map((line) => inline(escapeHtml(line))).join("<br>")}</p>`);
      paragraph = [];
    }
    if (list) {
      out.push(`<${list.tag}>${list.items.map((item) => `<li>${item}</li>`).join("")}</${list.tag}>`);
      list = undefined;
    }
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)/.exec(line);
    if (fence) {
      flush();
      const code: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) {
        code.push(lines[i]);
        i++;
      }
      const language = fence[2] ? ` data-language="${escapeHtml(fence[2])}"` : "";
      out.push(`<pre class="code"${language}><code>${highlight(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const level = Math.min(heading[1].length + 2, 6);
      out.push(`<h${level}>${inline(escapeHtml(heading[2]))}</h${level}>`);
      continue;
    }
    const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (item) {
      const tag = item[1] ? "ul" : "ol";
      if (paragraph.length > 0 || (list && list.tag !== tag)) {
        flush();
      }
      list ??= { tag, items: [] };
      list.items.push(inline(escapeHtml(item[3])));
      continue;
    }
    if (line.trim() === "") {
      flush();
      continue;
    }
    if (list) {
      flush();
    }
    paragraph.push(line);
  }
  flush();
  return out.join("");
}

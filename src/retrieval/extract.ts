/**
 * The text of an uploaded file, as a vector store indexes it, chosen by the file's extension as
 * OpenAI's file search chooses: plain text, Markdown, JSON, CSV and source code as their UTF-8
 * text; HTML as the text a reader sees (no markup, scripts or styles); PDF and DOCX through their
 * readers, loaded only when such a file arrives. A file that cannot be read is refused with its
 * reason, for that file alone.
 */
import { Parser } from "htmlparser2";
import { docxText } from "./docx.js";
import { pdfText } from "./pdf.js";
import { UnreadableFile } from "./unreadable.js";

export { UnreadableFile };

/** Extensions read as their UTF-8 text. */
const textExtensions = new Set(
  (
    "txt text md markdown mdx rst json jsonl ndjson csv tsv log xml yaml yml toml ini cfg conf tex " +
    "js mjs cjs jsx ts tsx py rb php java kt kts scala go rs c h cc cpp cxx hpp hh cs swift m mm " +
    "sh bash zsh ps1 bat sql r lua pl dart ex exs erl hs clj elm vue svelte css scss less graphql proto"
  ).split(" "),
);

const htmlExtensions = new Set(["html", "htm", "xhtml"]);

/** Elements whose content is not text a reader sees. */
const hiddenElements = new Set(["script", "style", "template", "noscript", "svg", "math", "iframe", "object"]);

/** Elements that end a line, so that their text does not run into the next. */
const blockElements = new Set(
  (
    "p div br hr h1 h2 h3 h4 h5 h6 li ul ol dl dt dd tr table thead tbody tfoot section article aside " +
    "header footer nav main blockquote pre figure figcaption address title form fieldset details summary"
  ).split(" "),
);

function extensionOf(filename: string): string {
  const dot = filename.lastIndexOf(".");
  return dot < 0 ? "" : filename.slice(dot + 1).toLowerCase();
}

function utf8Text(bytes: Uint8Array, filename: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new UnreadableFile(
      "invalid_file",
      `${filename} is not valid UTF-8 text. Save it as UTF-8 and upload it again.`,
    );
  }
}

/** An HTML document's visible text, in one pass over it: its block elements each on lines of their own. */
export function htmlText(html: string): string {
  const parts: string[] = [];
  let hidden = 0;
  const parser = new Parser(
    {
      onopentagname(name) {
        if (hiddenElements.has(name)) hidden++;
        else if (blockElements.has(name)) parts.push("\n");
      },
      onclosetag(name) {
        if (hiddenElements.has(name)) hidden = Math.max(0, hidden - 1);
        else if (blockElements.has(name)) parts.push("\n");
      },
      ontext(text) {
        if (hidden === 0) parts.push(text);
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.end(html);
  return parts
    .join("")
    .replace(/[ \t\f\v\u00a0]+/g, " ")
    .replace(/ *\n[\s]*/g, "\n")
    .trim();
}

/** The text of `bytes`, read as `filename`'s extension says. */
export async function extractText(bytes: Uint8Array, filename: string): Promise<string> {
  const extension = extensionOf(filename);
  if (extension === "pdf") return pdfText(bytes, filename);
  if (extension === "docx") return docxText(bytes, filename);
  if (htmlExtensions.has(extension)) return htmlText(utf8Text(bytes, filename));
  if (textExtensions.has(extension)) return utf8Text(bytes, filename);
  throw new UnreadableFile(
    "unsupported_file",
    `Files of type '.${extension || "(none)"}' are not read for search (${filename}). ` +
      "Upload plain text, Markdown, HTML, PDF, DOCX, JSON, CSV or source code.",
  );
}

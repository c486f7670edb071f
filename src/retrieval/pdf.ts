/**
 * A PDF's text, page by page, read by PDF.js (unpdf's build of it, which runs without a DOM or a
 * worker of its own, as a service worker needs; its 1.7 line, whose engines are Node 20's too). It
 * is imported only when a PDF arrives. PDF.js runs here with `eval` off (no font program is ever
 * compiled to code) and loads no fonts, and the worker yields between pages, so a long document
 * never holds up a request for long.
 */
import { loadReader } from "./reader.js";
import { UnreadableFile } from "./unreadable.js";

/** Text at most this long is read from one PDF (a 64 MiB upload of text holds no more); later pages are not read. */
const mostCharacters = 16 * 1024 * 1024;

/** One page's text items as lines: an item that ends a line ends it in the text too. */
function pageText(items: readonly unknown[]): string {
  let text = "";
  for (const item of items) {
    if (typeof item !== "object" || item === null || !("str" in item)) continue;
    text += String(item.str) + ("hasEOL" in item && item.hasEOL ? "\n" : "");
  }
  return text
    .replace(/[^\S\n]+/g, " ")
    .replace(/ ?\n ?/g, "\n")
    .trim();
}

export async function pdfText(bytes: Uint8Array, filename: string): Promise<string> {
  const { getDocumentProxy } = await loadReader(() => import("unpdf"), "PDF");
  let document;
  try {
    // A copy: PDF.js takes the buffer it is given.
    document = await getDocumentProxy(bytes.slice(), { disableFontFace: true, isEvalSupported: false });
  } catch (error) {
    throw new UnreadableFile(
      "invalid_file",
      `${filename} could not be read as a PDF (${(error as Error).message}). Upload it again, or upload its text.`,
    );
  }
  try {
    const pages: string[] = [];
    let length = 0;
    for (let number = 1; number <= document.numPages && length < mostCharacters; number++) {
      const page = await document.getPage(number);
      const text = pageText((await page.getTextContent()).items);
      page.cleanup();
      if (text) pages.push(text);
      length += text.length;
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    if (pages.length === 0)
      throw new UnreadableFile(
        "invalid_file",
        `${filename} has no text layer (a scan, or pictures of text). Upload a PDF with selectable text, or its text.`,
      );
    return pages.join("\n\n").slice(0, mostCharacters);
  } finally {
    await document.loadingTask.destroy();
  }
}

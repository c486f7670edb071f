/** A file's text as a vector store reads it: by extension, HTML as the text a reader sees, and each refusal's reason. */
import { describe, expect, it } from "vitest";
import { extractText, htmlText, UnreadableFile } from "../../../src/retrieval/extract.js";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("extractText", () => {
  it("reads HTML as its visible text: no markup, scripts, styles or templates, entities decoded, blocks on lines", () => {
    const html = [
      "<!doctype html><html><head><title>Guide</title><style>p { color: red }</style>",
      "<script>alert('x')</script></head><body><h1>Setup &amp; use</h1>",
      "<p>Fill the <b>tank</b>&nbsp;first.</p><template><p>hidden</p></template>",
      "<ul><li>One</li><li>Two</li></ul><!-- a comment --><noscript>no</noscript></body></html>",
    ].join("");
    expect(htmlText(html)).toBe("Guide\nSetup & use\nFill the tank first.\nOne\nTwo");
    expect(extractText(bytes(html), "page.HTML")).toBe(htmlText(html));
  });

  it("reads Markdown, JSON, CSV and code as their UTF-8 text, a BOM dropped", () => {
    expect(extractText(bytes("\uFEFF# Title\n\nText"), "notes.md")).toBe("# Title\n\nText");
    expect(extractText(bytes('{"a": 1}'), "data.json")).toBe('{"a": 1}');
    expect(extractText(bytes("a,b\n1,2"), "table.csv")).toBe("a,b\n1,2");
    expect(extractText(bytes("def f():\n  return 1"), "main.py")).toBe("def f():\n  return 1");
  });

  it("refuses a type it does not read, and bytes that are not UTF-8, each with its code", () => {
    const refusal = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return error instanceof UnreadableFile ? { code: error.code, message: error.message } : error;
      }
      return undefined;
    };
    expect(refusal(() => extractText(bytes("x"), "archive.zip"))).toMatchObject({ code: "unsupported_file" });
    expect(refusal(() => extractText(new Uint8Array([0x61, 0xc3, 0x28]), "notes.txt"))).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("not valid UTF-8"),
    });
  });

  it("reads a large, deeply nested HTML document in time linear in its size", () => {
    const nested = "<div>".repeat(20_000) + "deep" + "</div>".repeat(20_000);
    const started = performance.now();
    expect(htmlText(nested)).toBe("deep");
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

/**
 * A file's text as a vector store reads it: by extension, HTML as the text a reader sees, PDF and
 * DOCX (fixtures written by reportlab and python-docx: test/fixtures/documents/) through their
 * readers, and each refusal's reason, a ZIP bomb's included.
 */
import { readFileSync } from "node:fs";
import { deflateRawSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { extractText, htmlText, UnreadableFile } from "../../../src/retrieval/extract.js";
import { zipParts } from "../../../src/retrieval/docx.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const fixture = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../fixtures/documents/${name}`, import.meta.url)));

/** What reading `bytes` as `filename` was refused with, as its code and message. */
async function refusal(data: Uint8Array, filename: string) {
  try {
    await extractText(data, filename);
  } catch (error) {
    return error instanceof UnreadableFile ? { code: error.code, message: error.message } : error;
  }
  return undefined;
}

/** A ZIP of stored or deflated parts, each declaring `declared` (its true size unless given). */
function zip(parts: { name: string; text: string; declared?: number }[]): Uint8Array {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const part of parts) {
    const name = Buffer.from(part.name);
    const inflated = Buffer.from(part.text);
    const data = deflateRawSync(inflated);
    const declared = part.declared ?? inflated.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(declared, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(declared, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    centrals.push(central, name);
    offset += 30 + name.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(parts.length, 8);
  end.writeUInt16LE(parts.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return new Uint8Array(Buffer.concat([...locals, directory, end]));
}

describe("extractText", () => {
  it("reads HTML as its visible text: no markup, scripts, styles or templates, entities decoded, blocks on lines", async () => {
    const html = [
      "<!doctype html><html><head><title>Guide</title><style>p { color: red }</style>",
      "<script>alert('x')</script></head><body><h1>Setup &amp; use</h1>",
      "<p>Fill the <b>tank</b>&nbsp;first.</p><template><p>hidden</p></template>",
      "<ul><li>One</li><li>Two</li></ul><!-- a comment --><noscript>no</noscript></body></html>",
    ].join("");
    expect(htmlText(html)).toBe("Guide\nSetup & use\nFill the tank first.\nOne\nTwo");
    expect(await extractText(bytes(html), "page.HTML")).toBe(htmlText(html));
  });

  it("reads Markdown, JSON, CSV and code as their UTF-8 text, a BOM dropped", async () => {
    expect(await extractText(bytes("\uFEFF# Title\n\nText"), "notes.md")).toBe("# Title\n\nText");
    expect(await extractText(bytes('{"a": 1}'), "data.json")).toBe('{"a": 1}');
    expect(await extractText(bytes("a,b\n1,2"), "table.csv")).toBe("a,b\n1,2");
    expect(await extractText(bytes("def f():\n  return 1"), "main.py")).toBe("def f():\n  return 1");
  });

  it("reads a PDF's text layer, a line a line and a page a paragraph", async () => {
    expect(await extractText(fixture("kettle.pdf"), "kettle.pdf")).toBe(
      [
        "Kettle manual",
        "To descale the kettle, boil water with white vinegar.",
        "Rinse it twice before use.",
        "",
        "The warranty covers the heating element for two years.",
      ].join("\n"),
    );
  });

  it("reads a DOCX's paragraphs, headings and table cells, each a paragraph", async () => {
    expect(await extractText(fixture("bread.docx"), "bread.docx")).toBe(
      [
        "Bread recipe",
        "Knead the dough for ten minutes, then let it rise.",
        "Bake at 220 degrees for half an hour.",
        "Flour",
        "500 g",
        "Water",
        "350 ml",
      ].join("\n\n"),
    );
  });

  it("refuses a type it does not read, and bytes that are not UTF-8, PDF or DOCX, each with its code", async () => {
    expect(await refusal(bytes("x"), "archive.zip")).toMatchObject({ code: "unsupported_file" });
    expect(await refusal(new Uint8Array([0x61, 0xc3, 0x28]), "notes.txt")).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("not valid UTF-8"),
    });
    expect(await refusal(bytes("%PDF-1.7 nothing more"), "broken.pdf")).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("could not be read as a PDF"),
    });
    expect(await refusal(bytes("not a zip"), "broken.docx")).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("not a DOCX"),
    });
    expect(await refusal(zip([{ name: "word/document.xml", text: "<w:document/>" }]), "empty.docx")).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("could not be read as a DOCX"),
    });
  });

  it("refuses a ZIP bomb before mammoth inflates it: XML past the bound, or a part past its declared size", async () => {
    // A part that declares 100 MiB of XML is refused on its word, before anything is inflated.
    const declared = 100 * 1024 * 1024;
    expect(await refusal(zip([{ name: "word/document.xml", text: "<w/>", declared }]), "bomb.docx")).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("past the 67108864 read here"),
    });
    // 10 MiB of XML in about 10 KiB, declaring a kilobyte: found out while inflating, past that kilobyte.
    const huge = "<w:t>a</w:t>".repeat(900_000);
    const liar = zip([{ name: "word/document.xml", text: huge, declared: 1024 }]);
    expect(zipParts(liar)).toEqual([expect.objectContaining({ name: "word/document.xml", inflated: 1024 })]);
    const started = performance.now();
    expect(await refusal(liar, "liar.docx")).toMatchObject({
      code: "invalid_file",
      message: expect.stringContaining("does not inflate to the size its ZIP declares"),
    });
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("reads a large, deeply nested HTML document in time linear in its size", () => {
    const nested = "<div>".repeat(20_000) + "deep" + "</div>".repeat(20_000);
    const started = performance.now();
    expect(htmlText(nested)).toBe("deep");
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

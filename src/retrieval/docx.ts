/**
 * A Word document's text, read by mammoth (paragraphs, headings, lists and tables, each paragraph
 * on its own), imported only when a DOCX arrives. A DOCX is a ZIP, and a ZIP bomb inflates a few
 * megabytes into gigabytes: its XML parts are inflated here first, natively and without keeping
 * them, and a file whose parts inflate past what their directory declares, or past a bound in
 * all, is refused before mammoth inflates anything.
 */
import { loadReader } from "./reader.js";
import { UnreadableFile } from "./unreadable.js";

/** The XML a DOCX may hold in all, inflated: mammoth keeps the whole tree in memory, several times its size. */
const mostXmlBytes = 64 * 1024 * 1024;

/** A part of a ZIP, as its central directory describes it. */
interface ZipPart {
  name: string;
  method: number;
  compressed: number;
  inflated: number;
  /** Where its local header starts. */
  offset: number;
}

/** The ZIP's parts, from its central directory; undefined when there is none that can be read (or a ZIP64 one). */
export function zipParts(bytes: Uint8Array): ZipPart[] | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // The end record: 22 bytes, then a comment of at most 65,535.
  let end = -1;
  for (let at = bytes.length - 22; at >= Math.max(0, bytes.length - 22 - 65_535); at--)
    if (view.getUint32(at, true) === 0x06054b50) {
      end = at;
      break;
    }
  if (end < 0) return undefined;
  const parts: ZipPart[] = [];
  const names = new TextDecoder();
  let at = view.getUint32(end + 16, true);
  for (let entry = view.getUint16(end + 10, true); entry > 0; entry--) {
    if (at + 46 > bytes.length || view.getUint32(at, true) !== 0x02014b50) return undefined;
    const nameLength = view.getUint16(at + 28, true);
    const part = {
      name: names.decode(bytes.subarray(at + 46, at + 46 + nameLength)),
      method: view.getUint16(at + 10, true),
      compressed: view.getUint32(at + 20, true),
      inflated: view.getUint32(at + 24, true),
      offset: view.getUint32(at + 42, true),
    };
    if (part.inflated === 0xffffffff || part.compressed === 0xffffffff || part.offset === 0xffffffff) return undefined;
    parts.push(part);
    at += 46 + nameLength + view.getUint16(at + 30, true) + view.getUint16(at + 32, true);
  }
  return parts;
}

/** Whether `part` inflates to no more than it declares, read through once and dropped. */
async function inflatesAsDeclared(bytes: Uint8Array, part: ZipPart): Promise<boolean> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (part.offset + 30 > bytes.length || view.getUint32(part.offset, true) !== 0x04034b50) return false;
  const start = part.offset + 30 + view.getUint16(part.offset + 26, true) + view.getUint16(part.offset + 28, true);
  const data = bytes.subarray(start, start + part.compressed);
  if (part.method === 0) return data.length === part.inflated;
  if (part.method !== 8) return false;
  const reader = new Blob([data as Uint8Array<ArrayBuffer>])
    .stream()
    .pipeThrough(new DecompressionStream("deflate-raw"))
    .getReader();
  let inflated = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return inflated === part.inflated;
      inflated += value.length;
      if (inflated > part.inflated) return false;
    }
  } catch {
    return false;
  } finally {
    await reader.cancel().catch(() => {});
  }
}

async function checkBounded(bytes: Uint8Array, filename: string): Promise<void> {
  const parts = zipParts(bytes);
  if (!parts)
    throw new UnreadableFile(
      "invalid_file",
      `${filename} is not a DOCX (a ZIP) that can be read. Save it again as .docx.`,
    );
  const xml = parts.filter((part) => /\.(xml|rels)$/i.test(part.name));
  const declared = xml.reduce((sum, part) => sum + part.inflated, 0);
  if (declared > mostXmlBytes)
    throw new UnreadableFile(
      "invalid_file",
      `${filename} would inflate to ${declared} bytes of XML, past the ${mostXmlBytes} read here. Split it, or upload its text.`,
    );
  for (const part of xml)
    if (!(await inflatesAsDeclared(bytes, part)))
      throw new UnreadableFile(
        "invalid_file",
        `${filename}'s part ${part.name} does not inflate to the size its ZIP declares: the file is damaged. Save it again as .docx.`,
      );
}

export async function docxText(bytes: Uint8Array, filename: string): Promise<string> {
  await checkBounded(bytes, filename);
  const { default: mammoth } = await loadReader(() => import("mammoth"), "DOCX");
  let text;
  try {
    const copy = bytes.slice();
    // mammoth's browser build reads `arrayBuffer`, its Node build (the unit tests') `buffer`; JSZip takes a Uint8Array for either.
    const input = { arrayBuffer: copy.buffer, buffer: copy } as unknown as { arrayBuffer: ArrayBuffer };
    text = (await mammoth.extractRawText(input)).value;
  } catch (error) {
    throw new UnreadableFile(
      "invalid_file",
      `${filename} could not be read as a DOCX (${(error as Error).message}). Save it again as .docx.`,
    );
  }
  return text.replace(/\n{3,}/g, "\n\n").trim();
}

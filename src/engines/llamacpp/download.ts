/**
 * GGUF files kept in the origin's private file system (OPFS), downloaded so that an interruption
 * (the network lost, the tab closed, the worker stopped) costs at most one piece.
 *
 * Invariants:
 * - A file is kept as pieces of `pieceBytes` under `gguf/<sha-256 of its URL>/`. A piece is
 *   written whole and committed by `close()`: OPFS keeps a closed piece and drops an unclosed
 *   one, so every piece on disk is complete.
 * - A download resumes at the first missing piece with a `Range` request, validated by `If-Range`
 *   against the ETag (or Last-Modified) the first response gave, and taken only when its
 *   `Content-Range` is exactly the bytes asked for. A server that ignores the range, answers
 *   another, or a file that changed, restarts the download cleanly: the kept pieces are dropped first.
 * - `info.json` says `complete` only after the last piece is closed and, where the app pinned the
 *   file's SHA-256, after the pieces hashed to it; a file that does not is deleted, never kept. The
 *   model is opened from the pieces as one Blob (disk-backed, never copied into memory).
 * - A download starts only when the rest of the file fits in the origin's storage with the
 *   billing headroom left free (src/core/storage-room.ts). A piece the browser still refuses to
 *   store is a storage failure, named as such: never blamed on the network.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { EngineError, networkRetrySeconds } from "../../core/errors/engine.js";
import { browserEstimator, roomShortfall } from "../../core/storage-room.js";

/** 32 MiB: a lost connection costs at most this much again. */
const pieceBytes = 32 * 2 ** 20;

interface FileInfo {
  url: string;
  /** The validator for `If-Range`: the ETag, else Last-Modified; null when the server gave neither. */
  validator: string | null;
  total: number;
  complete: boolean;
  /** The SHA-256 the pieces were checked against, where the app pinned one. */
  sha256?: string;
}

interface DownloadProgress {
  loaded: number;
  total: number;
}

export interface DownloadOptions {
  /** What the file is, and how to serve it: a failed fetch names both. */
  what: string;
  fix: string;
  /** The file's pinned SHA-256 (hex): the download is checked against it before it is kept. */
  sha256?: string;
  fetch?: typeof fetch;
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
}

async function folderName(url: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(url));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function pieceName(index: number): string {
  return `piece-${String(index).padStart(6, "0")}`;
}

async function root(): Promise<FileSystemDirectoryHandle> {
  const storage = globalThis.navigator?.storage;
  if (!storage?.getDirectory)
    throw new EngineError("device", "This browser has no origin private file system, where llama.cpp keeps models.");
  return (await storage.getDirectory()).getDirectoryHandle("gguf", { create: true });
}

async function folderOf(url: string, create: boolean): Promise<FileSystemDirectoryHandle | null> {
  try {
    return await (await root()).getDirectoryHandle(await folderName(url), { create });
  } catch (error) {
    if ((error as DOMException).name === "NotFoundError") return null;
    throw error;
  }
}

async function readInfo(folder: FileSystemDirectoryHandle): Promise<FileInfo | null> {
  try {
    const file = await (await folder.getFileHandle("info.json")).getFile();
    return JSON.parse(await file.text()) as FileInfo;
  } catch {
    return null;
  }
}

async function writeFile(folder: FileSystemDirectoryHandle, name: string, data: BufferSource | string): Promise<void> {
  const writable = await (await folder.getFileHandle(name, { create: true })).createWritable();
  await writable.write(data);
  await writable.close();
}

/** The pieces on disk, in order, up to the first one missing. */
async function keptPieces(folder: FileSystemDirectoryHandle): Promise<File[]> {
  const pieces: File[] = [];
  for (;;) {
    try {
      pieces.push(await (await folder.getFileHandle(pieceName(pieces.length))).getFile());
    } catch {
      return pieces;
    }
  }
}

async function clear(folder: FileSystemDirectoryHandle): Promise<void> {
  const names: string[] = [];
  for await (const name of (folder as unknown as { keys(): AsyncIterable<string> }).keys()) names.push(name);
  for (const name of names) await folder.removeEntry(name);
}

export async function isDownloaded(url: string): Promise<boolean> {
  const folder = await folderOf(url, false).catch(() => null);
  return folder !== null && (await readInfo(folder))?.complete === true;
}

export async function deleteDownload(url: string): Promise<void> {
  const folder = await folderOf(url, false);
  if (folder) await (await root()).removeEntry(folder.name, { recursive: true });
}

function totalOf(response: Response, start: number): number | null {
  const range = response.headers.get("content-range")?.match(/\/(\d+)$/);
  if (range) return Number(range[1]);
  const length = response.headers.get("content-length");
  return length === null ? null : start + Number(length);
}

/**
 * Fetches from `start` (a Range request when resuming). Returns null when the server or the
 * file's version cannot resume there: the caller restarts from 0.
 */
async function request(url: string, start: number, info: FileInfo | null, options: DownloadOptions) {
  const headers: Record<string, string> = {};
  if (start > 0) {
    if (!info?.validator) return null;
    headers.range = `bytes=${start}-`;
    headers["if-range"] = info.validator;
  }
  const fetcher = options.fetch ?? ((input, init) => fetch(input, init));
  const response = await fetcher(url, { headers, ...(options.signal ? { signal: options.signal } : {}) });
  if (!response.ok)
    throw new EngineError(
      "load_failed",
      `Could not fetch ${options.what} from ${url}: HTTP ${response.status}. ${options.fix[0]!.toUpperCase()}${options.fix.slice(1)}.`,
    );
  if (start > 0 && !(response.status === 206 && resumesAt(response, start, info!.total))) {
    await response.body?.cancel();
    return null;
  }
  return response;
}

/**
 * Whether a 206 holds the bytes asked for: `Content-Range: bytes <start>-<end>/<total>` from
 * `start` to the file's end, of the file as first fetched. A cache or proxy that answers another
 * range (or none) would splice the wrong bytes in; the download starts again instead.
 */
function resumesAt(response: Response, start: number, total: number): boolean {
  const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(response.headers.get("content-range")?.trim() ?? "");
  return range !== null && Number(range[1]) === start && Number(range[2]) === total - 1 && Number(range[3]) === total;
}

/** A piece the browser would not store (its quota, or the disk, is full). */
class StorageRefusal extends Error {
  constructor(cause: unknown) {
    super(`${(cause as Error).name ?? "Error"}: ${(cause as Error).message ?? String(cause)}`, { cause });
  }
}

/** Writes the body as pieces from piece `index` on; each piece is closed (committed) when full. */
async function writePieces(
  folder: FileSystemDirectoryHandle,
  body: ReadableStream<Uint8Array>,
  index: number,
  report: (bytes: number) => void,
): Promise<void> {
  const reader = body.getReader();
  const buffer = new Uint8Array(pieceBytes);
  let filled = 0;
  const commit = async () => {
    try {
      await writeFile(folder, pieceName(index++), buffer.subarray(0, filled));
    } catch (error) {
      throw new StorageRefusal(error);
    }
    filled = 0;
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    for (let offset = 0; offset < value.length;) {
      const take = Math.min(pieceBytes - filled, value.length - offset);
      buffer.set(value.subarray(offset, offset + take), filled);
      filled += take;
      offset += take;
      if (filled === pieceBytes) await commit();
    }
    report(value.length);
  }
  if (filled > 0) await commit();
}

/**
 * The response for the rest of the file, from piece `firstPiece` on; or for the whole file, the
 * kept pieces dropped, where the server or the file's version cannot resume there.
 */
async function resume(
  url: string,
  folder: FileSystemDirectoryHandle,
  info: FileInfo | null,
  firstPiece: number,
  options: DownloadOptions,
): Promise<{ response: Response; info: FileInfo | null; firstPiece: number; start: number }> {
  try {
    const response = await request(url, firstPiece * pieceBytes, info, options);
    if (response) return { response, info, firstPiece, start: firstPiece * pieceBytes };
    // Started again: from the first byte, into the first piece.
    await clear(folder);
    return { response: (await request(url, 0, null, options))!, info: null, firstPiece: 0, start: 0 };
  } catch (error) {
    if (error instanceof EngineError) throw error;
    throw new EngineError(
      "load_failed",
      `Could not fetch ${options.what} from ${url}: the network request failed (${(error as Error).message}); check the connection and try again.`,
      { cause: error, retryAfterSeconds: networkRetrySeconds },
    );
  }
}

/**
 * The file at `url` as one Blob, from the cache, downloading what is missing first. A failure
 * mid-download keeps the pieces already written, and the next call resumes after them.
 */
export async function download(url: string, options: DownloadOptions): Promise<Blob> {
  const folder = (await folderOf(url, true))!;
  const saved = await readInfo(folder);
  const kept = saved ? await keptPieces(folder) : [];
  if (saved && (saved.complete || sizeOf(kept) === saved.total)) return finish(folder, saved, kept, options);
  // Only whole pieces count: a short last piece is written again.
  const wholePieces = kept.filter((piece) => piece.size === pieceBytes).length;
  const resumed = await resume(url, folder, saved, wholePieces, options);
  const { response, firstPiece, start } = resumed;
  let { info } = resumed;
  const total = totalOf(response, start);
  if (total === null || !response.body)
    throw new EngineError("load_failed", `Could not fetch ${url}: the server gave no length for it.`);
  const shortfall = await roomShortfall(browserEstimator(), total - start);
  if (shortfall) {
    await response.body.cancel();
    throw noRoom(url, options, shortfall);
  }
  if (!info) {
    info = {
      url,
      validator: response.headers.get("etag") ?? response.headers.get("last-modified"),
      total,
      complete: false,
    };
    await writeFile(folder, "info.json", JSON.stringify(info));
  }
  let loaded = start;
  options.onProgress?.({ loaded, total });
  try {
    await writePieces(folder, response.body, firstPiece, (bytes) => {
      loaded += bytes;
      options.onProgress?.({ loaded, total });
    });
  } catch (error) {
    if (error instanceof StorageRefusal)
      throw noRoom(url, options, `The browser refused to store more of it (${error.message}).`, error.cause);
    throw interrupted(url, loaded, total, error);
  }
  const written = await keptPieces(folder);
  if (sizeOf(written) !== total) throw interrupted(url, sizeOf(written), total);
  return finish(folder, info, written, options);
}

function sizeOf(pieces: File[]): number {
  return pieces.reduce((sum, piece) => sum + piece.size, 0);
}

async function finish(
  folder: FileSystemDirectoryHandle,
  info: FileInfo,
  pieces: File[],
  options: DownloadOptions,
): Promise<Blob> {
  const pinned = options.sha256?.toLowerCase();
  if (!info.complete || (pinned !== undefined && info.sha256 !== pinned)) {
    if (pinned !== undefined) await verify(folder, info.url, pieces, pinned, options);
    await writeFile(folder, "info.json", JSON.stringify({ ...info, complete: true, sha256: pinned }));
  }
  return new Blob(pieces);
}

/**
 * Hashes the pieces in order, a piece at a time (32 MiB in memory at most, yielding between
 * pieces). A mismatch deletes them: the file at the URL is not the one the app pinned.
 */
async function verify(
  folder: FileSystemDirectoryHandle,
  url: string,
  pieces: File[],
  pinned: string,
  options: DownloadOptions,
): Promise<void> {
  const hash = sha256.create();
  for (const piece of pieces) hash.update(new Uint8Array(await piece.arrayBuffer()));
  const actual = bytesToHex(hash.digest());
  if (actual === pinned) return;
  await clear(folder);
  throw new EngineError(
    "load_failed",
    `Could not load ${options.what} from ${url}: its SHA-256 is ${actual}, not the pinned ${pinned}, so it was deleted. The file at that URL is not the one pinned: point the build's \`file\` at the revision that has this hash (\`…/resolve/<commit>/…\` on Hugging Face), or pin the new file's hash in \`sha256\`.`,
  );
}

/** No room to keep the file: the cause, and what frees room. Retrying alone would fail again. */
function noRoom(url: string, options: DownloadOptions, why: string, cause?: unknown): EngineError {
  return new EngineError(
    "storage",
    `Could not keep ${options.what} (${url}) on this device. ${why} Free space on the device, or delete models this site no longer needs (the app's \`deleteModel\`); then try again, and the download resumes from what was kept.`,
    cause === undefined ? {} : { cause },
  );
}

/** A download cut midway: what was written is kept, and the next load resumes after it. */
function interrupted(url: string, loaded: number, total: number, cause?: unknown): EngineError {
  return new EngineError(
    "load_failed",
    `Could not load ${url}: the connection ended after ${loaded} of ${total} bytes (the network failed mid-download); try again, and the download resumes from what was kept.`,
    { retryAfterSeconds: networkRetrySeconds, ...(cause === undefined ? {} : { cause }) },
  );
}

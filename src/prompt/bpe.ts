/**
 * Byte-pair encoding of words, exactly as `@lenml/tokenizers` (transformers.js) encodes them, in
 * a fraction of its time and memory.
 *
 * Time: that library merges with a heap of linked node objects, copying a node on every merge,
 * about 8 µs a character, so a prompt of one long run ("a" or a space 400,000 times, one
 * pre-token) held the worker for seconds. Here symbols are integers in typed arrays and each
 * candidate pair is one number in a heap: the same merges in the same order (lowest rank first,
 * then leftmost), in O(n log n) with a small constant.
 *
 * Memory: the library keeps each merge as an array of two strings, a map keyed by its JSON, and
 * the parsed file's merge list: several million small objects for Llama 3 (280,147 merges) or
 * Gemma (514,906), which every full garbage collection of the worker must trace, in the middle
 * of other requests' streams. Here the merges are one open-addressed table in four typed arrays,
 * which a collection does not look inside.
 */

/** The fields of the library's BPE model this reads or replaces. */
export interface BpeModel {
  bpe(word: string): string[];
  tokens_to_ids: Map<string, number>;
  vocab: string[];
  /** The library's cache of short words' tokens (an LRU map). */
  cache: { get(word: string): string[] | undefined; put(word: string, tokens: string[]): void };
  /** Words shorter than this are cached. */
  max_length_to_cache: number;
}

/** A merge as the file lists it: `"left right"`, or (tokenizers ≥ 0.20) `[left, right]`. */
export type MergeListing = string | [string, string];

/** Each merge's rank and merged id, by the ids of its two parts. */
class MergeTable {
  readonly #lefts: Int32Array;
  readonly #rights: Int32Array;
  readonly #ranks: Int32Array;
  readonly #merged: Int32Array;
  readonly #mask: number;

  constructor(count: number) {
    let capacity = 16;
    while (capacity * 0.75 < count) capacity *= 2;
    this.#lefts = new Int32Array(capacity).fill(-1);
    this.#rights = new Int32Array(capacity);
    this.#ranks = new Int32Array(capacity);
    this.#merged = new Int32Array(capacity);
    this.#mask = capacity - 1;
  }

  /** The slot of the pair, or of the empty one where it would go (the table is at most three quarters full). */
  #slot(left: number, right: number): number {
    let hash = Math.imul(left, 0x9e3779b1) ^ Math.imul(right + 0x7f4a7c15, 0x85ebca6b);
    hash ^= hash >>> 15;
    let slot = hash & this.#mask;
    while (this.#lefts[slot] !== -1 && (this.#lefts[slot] !== left || this.#rights[slot] !== right))
      slot = (slot + 1) & this.#mask;
    return slot;
  }

  /** As the library's map of ranks: a pair listed twice keeps its last rank. */
  set(left: number, right: number, rank: number, merged: number): void {
    const slot = this.#slot(left, right);
    this.#lefts[slot] = left;
    this.#rights[slot] = right;
    this.#ranks[slot] = rank;
    this.#merged[slot] = merged;
  }

  /** The pair's slot, or -1 when no merge takes it. */
  find(left: number, right: number): number {
    const slot = this.#slot(left, right);
    return this.#lefts[slot] === -1 ? -1 : slot;
  }

  rankAt(slot: number): number {
    return this.#ranks[slot]!;
  }

  mergedAt(slot: number): number {
    return this.#merged[slot]!;
  }
}

/**
 * The table of the listed merges, parsed as the library parses them (a string is split at its
 * first space). A merge whose parts or result the vocabulary lacks can never apply: every
 * symbol here is a vocabulary entry, or an unknown character that no merge takes.
 */
function mergeTable(model: BpeModel, merges: readonly MergeListing[]): MergeTable {
  const table = new MergeTable(merges.length);
  const ids = model.tokens_to_ids;
  merges.forEach((merge, rank) => {
    const [left = "", right = ""] = typeof merge === "string" ? merge.split(" ", 2) : merge;
    const leftId = ids.get(left);
    const rightId = ids.get(right);
    const mergedId = ids.get(left + right);
    if (leftId !== undefined && rightId !== undefined && mergedId !== undefined)
      table.set(leftId, rightId, rank, mergedId);
  });
  return table;
}

/** A binary min-heap of numbers. */
class NumberHeap {
  #items: number[] = [];

  get size(): number {
    return this.#items.length;
  }

  push(value: number): void {
    const items = this.#items;
    let index = items.push(value) - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (items[parent]! <= value) break;
      items[index] = items[parent]!;
      index = parent;
    }
    items[index] = value;
  }

  pop(): number {
    const items = this.#items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length === 0) return top;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && items[right]! < items[left]! ? right : left;
      if (items[child]! >= last) break;
      items[index] = items[child]!;
      index = child;
    }
    items[index] = last;
    return top;
  }
}

/**
 * The word's tokens. A character the vocabulary lacks stays a symbol of its own that no merge
 * takes (the library's byte fallback then handles it, as for its own output).
 */
function encodeWord(table: MergeTable, model: BpeModel, word: string): string[] {
  const characters = Array.from(word);
  const count = characters.length;
  const ids = new Int32Array(count);
  const next = new Int32Array(count);
  const previous = new Int32Array(count);
  const alive = new Uint8Array(count).fill(1);
  characters.forEach((character, index) => {
    ids[index] = model.tokens_to_ids.get(character) ?? -1;
    next[index] = index + 1 < count ? index + 1 : -1;
    previous[index] = index - 1;
  });
  // A candidate is rank * count + left: the lowest rank first, then the leftmost, as the library
  // orders them. A node's position is its first character's, so it never changes; a candidate
  // is stale when its pair is no longer the two nodes' ids.
  const heap = new NumberHeap();
  const slotOf = (left: number) => {
    const right = next[left]!;
    if (right < 0 || ids[left]! < 0 || ids[right]! < 0) return -1;
    return table.find(ids[left]!, ids[right]!);
  };
  const offer = (left: number) => {
    const slot = slotOf(left);
    if (slot >= 0) heap.push(table.rankAt(slot) * count + left);
  };
  for (let index = 0; index + 1 < count; index++) offer(index);
  while (heap.size > 0) {
    const candidate = heap.pop();
    const left = candidate % count;
    const rank = (candidate - left) / count;
    const slot = alive[left] ? slotOf(left) : -1;
    if (slot < 0 || table.rankAt(slot) !== rank) continue;
    const right = next[left]!;
    ids[left] = table.mergedAt(slot);
    alive[right] = 0;
    next[left] = next[right]!;
    if (next[left]! >= 0) previous[next[left]!] = left;
    if (previous[left]! >= 0) offer(previous[left]!);
    offer(left);
  }
  const tokens: string[] = [];
  for (let index = 0; index >= 0 && index < count; index = next[index]!)
    tokens.push(ids[index]! >= 0 ? model.vocab[ids[index]!]! : characters[index]!);
  return tokens;
}

/**
 * Makes `model` encode every word here, from `merges` (the file's list, in rank order), caching
 * short words in the library's own cache as it does. The model is built with no merges of its
 * own, so that the library never holds them, and has no word suffixes (see `fastBpeMerges`).
 */
export function installFastBpe(model: BpeModel, merges: readonly MergeListing[]): void {
  const table = mergeTable(model, merges);
  model.bpe = (word) => {
    if (word.length === 0) return [];
    const cached = model.cache.get(word);
    if (cached !== undefined) return cached;
    const tokens = encodeWord(table, model, word);
    if (word.length < model.max_length_to_cache) model.cache.put(word, tokens);
    return tokens;
  };
}

/** The model section of a `tokenizer.json`, as far as this reads it. */
interface ModelJson {
  type?: string;
  merges?: MergeListing[];
  end_of_word_suffix?: string | null;
  continuing_subword_suffix?: string | null;
}

/**
 * The merges this module encodes with, for a BPE model without word suffixes (every family's
 * tokenizer); undefined for any other, which the library then encodes itself.
 */
export function fastBpeMerges(model: ModelJson | undefined): MergeListing[] | undefined {
  if (model?.type !== "BPE" || !Array.isArray(model.merges)) return undefined;
  if (model.end_of_word_suffix || model.continuing_subword_suffix) return undefined;
  return model.merges;
}

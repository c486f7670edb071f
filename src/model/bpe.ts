/**
 * Byte-pair encoding of one long word, exactly as `@lenml/tokenizers` (transformers.js) encodes
 * it, several times faster. That library merges with a heap of linked node objects, copying a
 * node on every merge: about 8 µs a character, so a prompt of one long run ("a" or a space
 * 400,000 times, one pre-token) held the worker for seconds. Here symbols are integers in typed
 * arrays and each candidate pair is one number in a heap: the same merges in the same order
 * (lowest rank first, then leftmost), in O(n log n) with a small constant.
 *
 * The library keeps its own code for short words (it caches them); `installFastBpe` hands it
 * this one for words of `longWord` characters or more.
 */

/** The fields of the library's BPE model this reads. */
export interface BpeModel {
  bpe(word: string): string[];
  merges: [string, string][];
  tokens_to_ids: Map<string, number>;
  vocab: string[];
  end_of_word_suffix?: string | null;
  continuing_subword_suffix?: string | null;
}

/** Words this long or longer are encoded here. */
const longWord = 256;

interface MergeTable {
  /** Rank and merged id of a pair of ids, keyed `left * size + right`. */
  ranks: Map<number, number>;
  merged: Map<number, number>;
  size: number;
}

function mergeTable(model: BpeModel): MergeTable {
  const size = model.vocab.length + 1;
  const ranks = new Map<number, number>();
  const merged = new Map<number, number>();
  model.merges.forEach(([left, right], rank) => {
    const leftId = model.tokens_to_ids.get(left);
    const rightId = model.tokens_to_ids.get(right);
    const mergedId = model.tokens_to_ids.get(left + right);
    if (leftId === undefined || rightId === undefined || mergedId === undefined) return;
    const key = leftId * size + rightId;
    // As the library's Map of ranks: a pair listed twice keeps its last rank.
    ranks.set(key, rank);
    merged.set(key, mergedId);
  });
  return { ranks, merged, size };
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
  const rankOf = (left: number) => {
    const right = next[left]!;
    if (right < 0 || ids[left]! < 0 || ids[right]! < 0) return undefined;
    return table.ranks.get(ids[left]! * table.size + ids[right]!);
  };
  const offer = (left: number) => {
    const rank = rankOf(left);
    if (rank !== undefined) heap.push(rank * count + left);
  };
  for (let index = 0; index + 1 < count; index++) offer(index);
  while (heap.size > 0) {
    const candidate = heap.pop();
    const left = candidate % count;
    const rank = (candidate - left) / count;
    if (!alive[left] || rankOf(left) !== rank) continue;
    const right = next[left]!;
    ids[left] = table.merged.get(ids[left]! * table.size + ids[right]!)!;
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

/** Encodes the model's long words here, its short ones as before; a model with word suffixes is left as it is. */
export function installFastBpe(model: BpeModel): void {
  if (model.end_of_word_suffix || model.continuing_subword_suffix || !Array.isArray(model.merges)) return;
  const original = model.bpe.bind(model);
  let table: MergeTable | undefined;
  model.bpe = (word) => {
    if (word.length < longWord) return original(word);
    table ??= mergeTable(model);
    return encodeWord(table, model, word);
  };
}

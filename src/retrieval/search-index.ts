/**
 * Hybrid search over a store's chunks: each chunk scored by its vector's cosine with the query's
 * and by BM25 over its words, both scaled to [0, 1] and mixed by weight, so a score is in [0, 1]
 * and a chunk that matches the query's words and its meaning ranks first. The scan is brute
 * force, one pass over the vectors and the postings of the query's words: exact, linear in the
 * store, and at the sizes a device holds (bench/results/retrieval.md) cheaper than embedding the
 * query.
 */

/** What an index is built of: each chunk's text, unit vector, and the file it belongs to. */
export interface IndexedChunk {
  fileId: string;
  text: string;
  vector: Float32Array;
}

export interface SearchOptions {
  limit: number;
  /** Results scoring under it are left out. */
  threshold: number;
  /** How much the vectors' score and the words' weigh in the mix. */
  weights: { embedding: number; text: number };
  /** Whether a chunk of the file may be found. */
  allows: (fileId: string) => boolean;
}

export interface Hit {
  chunk: number;
  score: number;
}

/** BM25's usual constants: how soon a word's repeats stop counting, and how much a long chunk's are discounted. */
const termSaturation = 1.2;
const lengthDiscount = 0.75;

/** A text's words for BM25: runs of letters and digits, lower-cased. */
export function wordsOf(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

export class SearchIndex {
  readonly chunks: readonly IndexedChunk[];
  readonly dimensions: number;
  readonly #vectors: Float32Array;
  /** For each word, the chunks it is in and how often. */
  readonly #postings = new Map<string, { chunks: number[]; counts: number[] }>();
  readonly #lengths: Uint32Array;
  readonly #averageLength: number;

  constructor(chunks: readonly IndexedChunk[], dimensions: number) {
    this.chunks = chunks;
    this.dimensions = dimensions;
    this.#vectors = new Float32Array(chunks.length * dimensions);
    this.#lengths = new Uint32Array(chunks.length);
    let total = 0;
    chunks.forEach((chunk, place) => {
      this.#vectors.set(chunk.vector.subarray(0, dimensions), place * dimensions);
      const counts = new Map<string, number>();
      const words = wordsOf(chunk.text);
      for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
      for (const [word, count] of counts) {
        const posting = this.#postings.get(word) ?? { chunks: [], counts: [] };
        posting.chunks.push(place);
        posting.counts.push(count);
        this.#postings.set(word, posting);
      }
      this.#lengths[place] = words.length;
      total += words.length;
    });
    this.#averageLength = chunks.length ? total / chunks.length : 0;
  }

  /** What the index holds in memory, roughly: its vectors and its postings. */
  get bytes(): number {
    let postings = 0;
    for (const posting of this.#postings.values()) postings += posting.chunks.length * 16;
    return this.#vectors.byteLength + this.#lengths.byteLength + postings;
  }

  /** The best chunks for the queries (each a unit vector and its text): a chunk's score is its best over them. */
  search(queries: readonly { vector: Float32Array; text: string }[], options: SearchOptions): Hit[] {
    const scores = new Float32Array(this.chunks.length);
    for (const query of queries) {
      const semantic = this.#cosines(query.vector);
      const keyword = this.#bm25(query.text);
      const weight = options.weights.embedding + options.weights.text || 1;
      for (let place = 0; place < scores.length; place++) {
        const mixed =
          (options.weights.embedding * Math.max(0, semantic[place]!) + options.weights.text * keyword[place]!) / weight;
        if (mixed > scores[place]!) scores[place] = mixed;
      }
    }
    const allowed = new Map<string, boolean>();
    const hits: Hit[] = [];
    scores.forEach((score, chunk) => {
      if (score < options.threshold || score <= 0) return;
      const fileId = this.chunks[chunk]!.fileId;
      let allows = allowed.get(fileId);
      if (allows === undefined) allowed.set(fileId, (allows = options.allows(fileId)));
      if (allows) hits.push({ chunk, score: Math.min(1, score) });
    });
    return topOf(hits, options.limit);
  }

  #cosines(query: Float32Array): Float32Array {
    const { dimensions } = this;
    const out = new Float32Array(this.chunks.length);
    const vectors = this.#vectors;
    for (let place = 0, offset = 0; place < out.length; place++, offset += dimensions) {
      let sum = 0;
      for (let index = 0; index < dimensions; index++) sum += vectors[offset + index]! * query[index]!;
      out[place] = sum;
    }
    return out;
  }

  /** Each chunk's BM25 score for the query's words, scaled so the best is 1. */
  #bm25(text: string): Float32Array {
    const out = new Float32Array(this.chunks.length);
    const count = this.chunks.length;
    let best = 0;
    for (const word of new Set(wordsOf(text))) {
      const posting = this.#postings.get(word);
      if (!posting) continue;
      const rarity = Math.log(1 + (count - posting.chunks.length + 0.5) / (posting.chunks.length + 0.5));
      posting.chunks.forEach((place, at) => {
        const frequency = posting.counts[at]!;
        const norm = 1 - lengthDiscount + (lengthDiscount * this.#lengths[place]!) / (this.#averageLength || 1);
        out[place]! += (rarity * frequency * (termSaturation + 1)) / (frequency + termSaturation * norm);
        best = Math.max(best, out[place]!);
      });
    }
    if (best > 0) for (let place = 0; place < count; place++) out[place]! /= best;
    return out;
  }
}

/** The `limit` best hits, best first (ties in chunk order): a bounded heap, so linear in the hits. */
function topOf(hits: Hit[], limit: number): Hit[] {
  const better = (a: Hit, b: Hit) => a.score > b.score || (a.score === b.score && a.chunk < b.chunk);
  const heap: Hit[] = [];
  const sift = (from: number) => {
    for (let at = from; ;) {
      const left = 2 * at + 1;
      const right = left + 1;
      let worst = at;
      if (left < heap.length && better(heap[worst]!, heap[left]!)) worst = left;
      if (right < heap.length && better(heap[worst]!, heap[right]!)) worst = right;
      if (worst === at) return;
      [heap[at], heap[worst]] = [heap[worst]!, heap[at]!];
      at = worst;
    }
  };
  for (const hit of hits) {
    if (heap.length < limit) {
      heap.push(hit);
      for (let at = heap.length - 1; at > 0;) {
        const parent = (at - 1) >> 1;
        if (!better(heap[parent]!, heap[at]!)) break;
        [heap[at], heap[parent]] = [heap[parent]!, heap[at]!];
        at = parent;
      }
    } else if (heap.length && better(hit, heap[0]!)) {
      heap[0] = hit;
      sift(0);
    }
  }
  return heap.sort((a, b) => (better(a, b) ? -1 : 1));
}

/**
 * Hybrid search over a store's chunks: each chunk scored by its vector's cosine with the query's
 * and by BM25 over its words, both scaled to [0, 1] and mixed by weight, so a score is in [0, 1]
 * and a chunk that matches the query's words and its meaning ranks first. The scan is brute
 * force, one pass over the vectors (in WebAssembly SIMD: ./vector-scan.ts) and the postings of the
 * query's words: exact, linear in the store, and at the sizes a device holds
 * (bench/results/retrieval.md) cheaper than embedding the query.
 */
import { VectorScan } from "./vector-scan.js";

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

/** A word's postings: the chunks it is in, in order, and how often it is in each. */
interface Posting {
  chunks: Uint32Array;
  counts: Uint16Array;
}

export class SearchIndex {
  readonly chunks: readonly IndexedChunk[];
  readonly dimensions: number;
  readonly #scan: VectorScan;
  readonly #postings = new Map<string, Posting>();
  readonly #lengths: Uint32Array;
  readonly #averageLength: number;
  /** Each chunk's file, as a number into `#fileIds`, so a filter is asked once per file. */
  readonly #fileOf: Uint32Array;
  readonly #fileIds: string[] = [];
  /** A search's scratch: the best mix so far and one query's word scores, per chunk (a search runs to its end before another starts). */
  readonly #scores: Float32Array;
  readonly #keyword: Float32Array;

  constructor(chunks: readonly IndexedChunk[], dimensions: number) {
    this.chunks = chunks;
    this.dimensions = dimensions;
    this.#scan = new VectorScan(chunks.length, dimensions);
    this.#lengths = new Uint32Array(chunks.length);
    this.#fileOf = new Uint32Array(chunks.length);
    this.#scores = new Float32Array(chunks.length);
    this.#keyword = new Float32Array(chunks.length);
    const files = new Map<string, number>();
    const building = new Map<string, { chunks: number[]; counts: number[] }>();
    let total = 0;
    chunks.forEach((chunk, place) => {
      this.#scan.set(place, chunk.vector);
      let file = files.get(chunk.fileId);
      if (file === undefined) files.set(chunk.fileId, (file = this.#fileIds.push(chunk.fileId) - 1));
      this.#fileOf[place] = file;
      const counts = new Map<string, number>();
      const words = wordsOf(chunk.text);
      for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
      for (const [word, count] of counts) {
        let posting = building.get(word);
        if (!posting) building.set(word, (posting = { chunks: [], counts: [] }));
        posting.chunks.push(place);
        posting.counts.push(Math.min(count, 65_535));
      }
      this.#lengths[place] = words.length;
      total += words.length;
    });
    for (const [word, posting] of building)
      this.#postings.set(word, { chunks: Uint32Array.from(posting.chunks), counts: Uint16Array.from(posting.counts) });
    this.#averageLength = chunks.length ? total / chunks.length : 0;
  }

  /** What the index holds in memory, roughly: its vectors, its postings and its per-chunk numbers. */
  get bytes(): number {
    let postings = 0;
    for (const [word, posting] of this.#postings)
      postings += posting.chunks.byteLength + posting.counts.byteLength + 2 * word.length + 64;
    const scratch = this.#scores.byteLength + this.#keyword.byteLength;
    return this.#scan.bytes + this.#lengths.byteLength + this.#fileOf.byteLength + scratch + postings;
  }

  /** The best chunks for the queries (each a unit vector and its text): a chunk's score is its best over them. */
  search(queries: readonly { vector: Float32Array; text: string }[], options: SearchOptions): Hit[] {
    const count = this.chunks.length;
    const weight = options.weights.embedding + options.weights.text || 1;
    const embedding = options.weights.embedding / weight;
    const text = options.weights.text / weight;
    const scores = this.#scores.fill(0);
    for (const query of queries) {
      const semantic = this.#scan.dots(query.vector);
      const keyword = this.#bm25(query.text);
      for (let place = 0; place < count; place++) {
        const mixed = embedding * Math.max(0, semantic[place]!) + text * keyword[place]!;
        if (mixed > scores[place]!) scores[place] = mixed;
      }
    }
    // 0: not yet asked; 1: allowed; 2: not.
    const allowed = new Uint8Array(this.#fileIds.length);
    const top = new TopHits(options.limit);
    for (let place = 0; place < count; place++) {
      const score = Math.min(1, scores[place]!);
      if (score < options.threshold || score <= 0 || !top.takes(score)) continue;
      const file = this.#fileOf[place]!;
      if (allowed[file] === 0) allowed[file] = options.allows(this.#fileIds[file]!) ? 1 : 2;
      if (allowed[file] === 1) top.add({ chunk: place, score });
    }
    return top.best();
  }

  /** Each chunk's BM25 score for the query's words, scaled so the best is 1. */
  #bm25(text: string): Float32Array {
    const count = this.chunks.length;
    const out = this.#keyword.fill(0);
    let best = 0;
    for (const word of new Set(wordsOf(text))) {
      const posting = this.#postings.get(word);
      if (!posting) continue;
      const found = posting.chunks.length;
      const rarity = Math.log(1 + (count - found + 0.5) / (found + 0.5));
      for (let at = 0; at < found; at++) {
        const place = posting.chunks[at]!;
        const frequency = posting.counts[at]!;
        const norm = 1 - lengthDiscount + (lengthDiscount * this.#lengths[place]!) / (this.#averageLength || 1);
        const score = (out[place]! +=
          (rarity * frequency * (termSaturation + 1)) / (frequency + termSaturation * norm));
        if (score > best) best = score;
      }
    }
    if (best > 0) for (let place = 0; place < count; place++) out[place]! /= best;
    return out;
  }
}

/** Whether hit `a` ranks before `b`: a higher score, or the same score in an earlier chunk. */
const better = (a: Hit, b: Hit) => a.score > b.score || (a.score === b.score && a.chunk < b.chunk);

/**
 * The `limit` best hits seen, in a heap whose root is the worst kept: each hit offered in chunk
 * order costs one comparison once the heap is full and O(log limit) when it is kept.
 */
class TopHits {
  readonly #limit: number;
  readonly #heap: Hit[] = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Whether a hit of `score`, later in chunk order than every hit so far, would be kept. */
  takes(score: number): boolean {
    return this.#heap.length < this.#limit || (this.#limit > 0 && score > this.#heap[0]!.score);
  }

  add(hit: Hit): void {
    const heap = this.#heap;
    if (heap.length < this.#limit) {
      heap.push(hit);
      for (let at = heap.length - 1; at > 0;) {
        const parent = (at - 1) >> 1;
        if (!better(heap[parent]!, heap[at]!)) break;
        [heap[at], heap[parent]] = [heap[parent]!, heap[at]!];
        at = parent;
      }
      return;
    }
    if (!heap.length || !better(hit, heap[0]!)) return;
    heap[0] = hit;
    for (let at = 0; ;) {
      const left = 2 * at + 1;
      const right = left + 1;
      let worst = at;
      if (left < heap.length && better(heap[worst]!, heap[left]!)) worst = left;
      if (right < heap.length && better(heap[worst]!, heap[right]!)) worst = right;
      if (worst === at) return;
      [heap[at], heap[worst]] = [heap[worst]!, heap[at]!];
      at = worst;
    }
  }

  /** The hits kept, best first. */
  best(): Hit[] {
    return [...this.#heap].sort((a, b) => (better(a, b) ? -1 : 1));
  }
}

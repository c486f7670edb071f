/**
 * Searching a vector store: its index built from the database once and kept in the worker's
 * memory while the store is unchanged (its `revision`), the queries embedded with the store's
 * model and billed to the searching key like any embedding request, then the hybrid ranking
 * (src/retrieval/search-index.ts) with the filters on the files' attributes. An index is its
 * store's and so its account's alone: it is found by the store's id after the account's own
 * store is, and never serves another.
 */
import type { VectorStoreFileRecord, VectorStoreRecord } from "../accounts/database.js";
import type { StoredVectorStores } from "../accounts/stored/vector-stores.js";
import type { SearchFilter } from "../core/wire/vector-stores.js";
import { matchesFilter } from "../retrieval/filters.js";
import { SearchIndex } from "../retrieval/search-index.js";

/** A store's index, and the files its chunks belong to. */
export interface StoreIndex {
  store: VectorStoreRecord;
  index: SearchIndex;
  files: Map<string, VectorStoreFileRecord>;
}

/** A chunk found, with its file and its score in [0, 1]. */
export interface Found {
  file: VectorStoreFileRecord;
  text: string;
  score: number;
}

export interface StoreQuery {
  /** Each query's unit vector and its text. */
  queries: { vector: Float32Array; text: string }[];
  limit: number;
  threshold: number;
  weights: { embedding: number; text: number };
  filter: SearchFilter | undefined;
}

/** What OpenAI mixes when it is not told: mostly meaning, some words. */
export const defaultWeights = { embedding: 0.7, text: 0.3 };

/** The chunks the kept indexes hold at most, all stores together; the least recently searched go first. */
const keptChunks = 400_000;

export class SearchIndexes {
  readonly #vectorStores: StoredVectorStores;
  readonly #kept = new Map<string, StoreIndex>();

  constructor(vectorStores: StoredVectorStores) {
    this.#vectorStores = vectorStores;
  }

  /** The account's store's index, as the store now is; undefined when the account has no such store. */
  async of(accountId: string, storeId: string): Promise<StoreIndex | undefined> {
    const store = await this.#vectorStores.store(accountId, storeId);
    if (!store) return undefined;
    const kept = this.#kept.get(storeId);
    this.#kept.delete(storeId);
    if (kept && kept.store.accountId === accountId && kept.store.revision === store.revision) {
      this.#kept.set(storeId, kept);
      return kept;
    }
    const searchable = await this.#vectorStores.searchable(accountId, storeId);
    if (!searchable) return undefined;
    const dimensions = searchable.chunks[0]?.vector?.length ?? 0;
    const chunks = searchable.chunks.map((chunk) => ({
      fileId: chunk.fileId,
      text: chunk.text,
      vector: chunk.vector!,
    }));
    const built = { store: searchable.store, index: new SearchIndex(chunks, dimensions), files: searchable.files };
    this.#kept.set(storeId, built);
    this.#evict();
    return built;
  }

  #evict(): void {
    let total = 0;
    for (const kept of this.#kept.values()) total += kept.index.chunks.length;
    for (const [storeId, kept] of this.#kept) {
      if (total <= keptChunks || this.#kept.size === 1) return;
      this.#kept.delete(storeId);
      total -= kept.index.chunks.length;
    }
  }
}

/** The best chunks of the store for the queries, best first. */
export function searchIndex(store: StoreIndex, query: StoreQuery): Found[] {
  const allows = (fileId: string) => {
    const file = store.files.get(fileId);
    return file !== undefined && (query.filter === undefined || matchesFilter(query.filter, file.attributes));
  };
  const hits = store.index.search(query.queries, { ...query, allows });
  return hits.map((hit) => {
    const chunk = store.index.chunks[hit.chunk]!;
    return { file: store.files.get(chunk.fileId)!, text: chunk.text, score: hit.score };
  });
}

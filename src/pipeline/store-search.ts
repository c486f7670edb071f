/**
 * Searching a vector store: its index built from the database once and kept in the worker's
 * memory while the store is unchanged (its `revision`), the queries embedded with the store's
 * model and billed to the searching key like any embedding request, then the hybrid ranking
 * (src/retrieval/search-index.ts) with the filters on the files' attributes. An index is its
 * store's and so its account's alone: it is found by the store's id after the account's own
 * store is, and never serves another.
 */
import { BadRequestError, NotFoundError } from "../core/errors/api.js";
import type { VectorStoreFileRecord, VectorStoreRecord } from "../accounts/database.js";
import type { StoredVectorStores } from "../accounts/stored/vector-stores.js";
import type { RateLimitState } from "../accounts/accounts.js";
import type { SearchFilter } from "../core/wire/vector-stores.js";
import { matchesFilter } from "../retrieval/filters.js";
import { SearchIndex } from "../retrieval/search-index.js";
import { countTextTokens } from "./budget.js";
import { admitEmbedding, embedAdmitted, normalised, textEmbeddingCall } from "./embedding.js";
import { nothingUsed } from "./metering.js";
import { placementOf, type Placement } from "./placement.js";
import type { ServeRequest } from "./request.js";
import type { Services } from "./services.js";
import type { Tokenizer } from "../prompt/tokenizer.js";

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

interface StoreQuery {
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
function searchIndex(store: StoreIndex, query: StoreQuery): Found[] {
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

/** A 400 for a store past its `expires_after`, which is no longer searched. */
export function checkUnexpired(store: VectorStoreRecord, now: number, param = "vector_store_id"): void {
  if (store.expiresAt !== null && store.expiresAt <= now)
    throw new BadRequestError(`Vector store ${store.id} has expired; create a new one to search.`, {
      param,
      code: "vector_store_expired",
    });
}

/**
 * A search as a request asks it: the texts to search for, and how to rank and filter what is
 * found. `cut`: a text past the embedding model's window is cut to its last tokens that fit (a
 * conversation's message searched for), where a client's own query is refused.
 */
export type StoreSearch = Omit<StoreQuery, "queries"> & { texts: string[]; cut?: boolean };

/**
 * The end of `text` that the model embeds at once: at most half its window in the family's
 * tokens, leaving room for a vocabulary of its own. Characters first, so the work is bounded
 * whatever the text's length (a token is at least one character in every family).
 */
function fitted(text: string, tokenizer: Tokenizer, window: number): string {
  const most = Math.floor(window / 2);
  const ids = tokenizer.encodeText(text.slice(-most * 8));
  return ids.length <= most ? text.slice(-most * 8) : tokenizer.decode(ids.slice(-most)).trim();
}

/** What a search found, with the key's window once its embedding was admitted, and where it was embedded. */
export interface Searched {
  found: Found[];
  /** Absent when nothing was embedded: an empty store is searched without admitting anything. */
  rate?: RateLimitState;
  placement?: Placement;
}

/**
 * Searches the account's store for `request`'s key: the texts embedded with the store's model,
 * admitted and settled by the one meter as an embedding request is (billed as `/v1/embeddings`
 * bills them, a ledger entry of its own), then ranked. Undefined when the account has no such
 * store; an expired store, or a text past the model's window, is a 400.
 */
export async function searchStore(
  services: Services,
  indexes: SearchIndexes,
  request: ServeRequest,
  storeId: string,
  search: StoreSearch,
): Promise<Searched | undefined> {
  const accountId = request.key.accountId;
  const indexed = await indexes.of(accountId, storeId);
  if (!indexed) return undefined;
  const { store } = indexed;
  checkUnexpired(store, services.clock());
  if (indexed.index.chunks.length === 0) return { found: [] };
  const model = services.catalogue.get(store.embeddingModel);
  if (!model)
    throw new NotFoundError(
      `The vector store's embedding model \`${store.embeddingModel}\` is no longer in the catalogue: create a store with a model it has.`,
      { code: "model_not_found", param: "vector_store_id" },
    );
  const tokenizer = await services.tokenizers.forFamily(model.family);
  if (search.cut)
    search = { ...search, texts: search.texts.map((text) => fitted(text, tokenizer, model.contextWindow)) };
  search.texts.forEach((text) => countTextTokens(tokenizer, text, model, "query"));
  const call = textEmbeddingCall(model, tokenizer, search.texts);
  const placement = await placementOf(services.engine, model);
  const { meter, early } = await admitEmbedding(services, request, placement, call);
  let embedded;
  try {
    embedded = await embedAdmitted(services, request, placement, call, meter, { early });
  } catch (error) {
    await meter.settle(request.signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
  }
  const queries = embedded.vectors.map((vector, index) => ({ vector: normalised(vector), text: search.texts[index]! }));
  await services.vectorStores.touch(accountId, storeId);
  return { found: searchIndex(indexed, { ...search, queries }), rate: meter.rate, placement };
}

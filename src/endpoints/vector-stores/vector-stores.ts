/**
 * OpenAI's vector stores: create (with `file_ids`), list, retrieve, update and delete a store.
 * Its files and batches are in files.ts, its search in search.ts. Each store is the key's
 * account's own; what it holds counts against the account's storage quota.
 */
import { BadRequestError, NotFoundError, quoted } from "../../core/errors/api.js";
import type { ModelEntry } from "../../catalogue/entry.js";
import type { VectorStoreRecord } from "../../accounts/database.js";
import type { NewStoreFile } from "../../accounts/stored/vector-stores.js";
import {
  autoChunking,
  vectorStoreCreateSchema,
  vectorStoreListQuerySchema,
  vectorStoreUpdateSchema,
  type ChunkingStrategy,
  type FileAttributes,
  type VectorStoreObject,
} from "../../core/wire/vector-stores.js";
import type { Indexer } from "../../pipeline/indexing.js";
import type { SearchIndexes } from "../../pipeline/store-search.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { jsonResponse } from "../../http/json-response.js";
import { listQueryOf, pageOf } from "../../http/list-query.js";
import { parseWith, readJson } from "../../http/validate.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";

export const vectorStorePaths = {
  stores: /^\/vector_stores\/?$/,
  one: /^\/vector_stores\/(?<store>[^/]+)\/?$/,
};

/** What the vector store endpoints share: the services, the background indexer and the kept indexes. */
export interface RetrievalDependencies {
  dependencies: EndpointDependencies;
  indexer: Indexer;
  indexes: SearchIndexes;
}

export const answer = (body: unknown) => ({ response: jsonResponse(body) });

export function storeNotFound(id: string): NotFoundError {
  return new NotFoundError(`No vector store found with id '${quoted(id)}'.`, { param: "vector_store_id" });
}

const seconds = (ms: number) => Math.floor(ms / 1000);

function vectorStoreObjectOf(record: VectorStoreRecord, now: number): VectorStoreObject {
  const counts = record.counts;
  const expired = record.expiresAt !== null && record.expiresAt <= now;
  return {
    id: record.id,
    object: "vector_store",
    created_at: seconds(record.createdAt),
    name: record.name,
    description: record.description,
    usage_bytes: record.usageBytes,
    file_counts: { ...counts, total: counts.in_progress + counts.completed + counts.failed + counts.cancelled },
    status: expired ? "expired" : counts.in_progress > 0 ? "in_progress" : "completed",
    expires_after:
      record.expiresAfterDays === null ? null : { anchor: "last_active_at", days: record.expiresAfterDays },
    expires_at: record.expiresAt === null ? null : seconds(record.expiresAt),
    last_active_at: seconds(record.lastActiveAt),
    metadata: record.metadata,
    embedding_model: record.embeddingModel,
  };
}

/**
 * The chunk sizes a strategy asks for, for the store's model: `auto` is OpenAI's 800 tokens with
 * 400 of overlap, cut to three quarters of a model's window where that is less (its tokenizer may
 * count a text longer than the family's, which sizes the chunks); a static size past that is refused.
 */
export function chunkingOf(strategy: ChunkingStrategy | null | undefined, model: ModelEntry): NewStoreFile["chunking"] {
  const most = Math.floor(model.contextWindow * 0.75);
  if (!strategy || strategy.type === "auto") {
    const maxTokens = Math.min(autoChunking.max_chunk_size_tokens, most);
    return { maxTokens, overlapTokens: Math.min(autoChunking.chunk_overlap_tokens, Math.floor(maxTokens / 2)) };
  }
  const { max_chunk_size_tokens: maxTokens, chunk_overlap_tokens: overlapTokens } = strategy.static;
  if (maxTokens > most)
    throw new BadRequestError(
      `max_chunk_size_tokens is ${maxTokens}, but the store's embedding model ${model.id} embeds at most ${most} tokens a chunk ` +
        `(three quarters of its ${model.contextWindow}-token window). Ask for ${most} or fewer.`,
      { param: "chunking_strategy.static.max_chunk_size_tokens", code: "invalid_value" },
    );
  return { maxTokens, overlapTokens };
}

/** The files to add, each the account's own uploaded file (404 naming the first that is not). */
export async function filesToAdd(
  dependencies: EndpointDependencies,
  context: RequestContext,
  fileIds: readonly string[],
  options: { attributes: FileAttributes; chunking: NewStoreFile["chunking"]; batchId: string | null; param: string },
): Promise<NewStoreFile[]> {
  const unique = [...new Set(fileIds)];
  const records = await Promise.all(unique.map((id) => dependencies.files.file(context.key.accountId, id)));
  return records.map((record, index) => {
    if (!record)
      throw new NotFoundError(`No file found with id '${quoted(unique[index]!)}'.`, { param: options.param });
    return {
      fileId: record.id,
      filename: record.filename,
      attributes: options.attributes,
      chunking: options.chunking,
      batchId: options.batchId,
      keyId: context.key.id,
      origin: context.url.origin,
    };
  });
}

/** The store's embedding model: the one named, else the catalogue's first embedding model. */
function embeddingModelOf(dependencies: EndpointDependencies, named: string | null | undefined): ModelEntry {
  if (named)
    return findModel(dependencies, named, "embedding_model", { kind: "embedding", endpoint: "v1/vector_stores" });
  const model = dependencies.catalogue.list().find((entry) => entry.kind === "embedding");
  if (!model)
    throw new BadRequestError(
      "No embedding model is in this app's catalogue, so a vector store cannot embed its files. Add one to the catalogue (kind 'embedding').",
      { param: "embedding_model", code: "model_not_found" },
    );
  return model;
}

async function created(retrieval: RetrievalDependencies, context: RequestContext) {
  const { dependencies } = retrieval;
  const request = parseWith(vectorStoreCreateSchema, await readJson(context.body));
  const model = embeddingModelOf(dependencies, request.embedding_model);
  const chunking = chunkingOf(request.chunking_strategy, model);
  const files = await filesToAdd(dependencies, context, request.file_ids ?? [], {
    attributes: {},
    chunking,
    batchId: null,
    param: "file_ids",
  });
  const record = await dependencies.vectorStores.create(
    {
      id: dependencies.newId("vs_"),
      accountId: context.key.accountId,
      name: request.name ?? "",
      description: request.description ?? null,
      metadata: request.metadata ?? {},
      embeddingModel: model.id,
      expiresAfterDays: request.expires_after?.days ?? null,
    },
    files,
  );
  if (files.length) void retrieval.indexer.wake();
  return answer(vectorStoreObjectOf(record, dependencies.clock()));
}

async function listed({ dependencies }: RetrievalDependencies, context: RequestContext) {
  const query = parseWith(vectorStoreListQuerySchema, listQueryOf(context.url));
  const page = await dependencies.vectorStores.page(context.key.accountId, query);
  if (!page) throw storeNotFound(query.after ?? query.before ?? "");
  const now = dependencies.clock();
  return answer(
    pageOf(
      page.items.map((record) => vectorStoreObjectOf(record, now)),
      page.hasMore,
    ),
  );
}

async function updated({ dependencies }: RetrievalDependencies, context: RequestContext, id: string) {
  const request = parseWith(vectorStoreUpdateSchema, await readJson(context.body));
  const change: Parameters<typeof dependencies.vectorStores.update>[2] = {};
  if (request.name != null) change.name = request.name;
  if (request.metadata != null) change.metadata = request.metadata;
  if (request.expires_after !== undefined) change.expiresAfterDays = request.expires_after?.days ?? null;
  const record = await dependencies.vectorStores.update(context.key.accountId, id, change);
  if (!record) throw storeNotFound(id);
  return answer(vectorStoreObjectOf(record, dependencies.clock()));
}

/** The store endpoints, each over the key's account's stores only. */
export function vectorStoreRoutes(retrieval: RetrievalDependencies): InferenceRoute[] {
  const { dependencies } = retrieval;
  const stores = dependencies.vectorStores;
  return [
    { method: "POST", path: vectorStorePaths.stores, handler: async (context) => created(retrieval, context) },
    { method: "GET", path: vectorStorePaths.stores, handler: async (context) => listed(retrieval, context) },
    {
      method: "GET",
      path: vectorStorePaths.one,
      handler: async ({ key }, { store }) => {
        const record = await stores.store(key.accountId, store!);
        if (!record) throw storeNotFound(store!);
        return answer(vectorStoreObjectOf(record, dependencies.clock()));
      },
    },
    {
      method: "POST",
      path: vectorStorePaths.one,
      handler: async (context, { store }) => updated(retrieval, context, store!),
    },
    {
      method: "DELETE",
      path: vectorStorePaths.one,
      handler: async ({ key }, { store }) => {
        if (!(await stores.remove(key.accountId, store!))) throw storeNotFound(store!);
        return answer({ id: store, object: "vector_store.deleted", deleted: true });
      },
    },
  ];
}

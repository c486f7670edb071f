/**
 * A vector store's files and file batches: add one (`POST …/files`) or many at once
 * (`POST …/file_batches`), each indexed in the background; list, retrieve, update the attributes
 * of, and remove a file, and read its chunks (`…/content`); retrieve, list and cancel a batch.
 * A file being indexed tells a polling client (openai-node's `uploadAndPoll`) when to ask again.
 */
import { NotFoundError, quoted } from "../../core/errors/api.js";
import type { FileBatchRecord, VectorStoreFileRecord, VectorStoreRecord } from "../../accounts/database.js";
import {
  fileBatchCreateSchema,
  vectorStoreFileCreateSchema,
  vectorStoreFileUpdateSchema,
  vectorStoreListQuerySchema,
  type FileBatchObject,
  type VectorStoreFileObject,
} from "../../core/wire/vector-stores.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { jsonResponse } from "../../http/json-response.js";
import { listQueryOf, pageOf } from "../../http/list-query.js";
import { parseWith, readJson } from "../../http/validate.js";
import { answer, chunkingOf, filesToAdd, storeNotFound, type RetrievalDependencies } from "./vector-stores.js";

export const storeFilePaths = {
  files: /^\/vector_stores\/(?<store>[^/]+)\/files\/?$/,
  one: /^\/vector_stores\/(?<store>[^/]+)\/files\/(?<file>[^/]+)\/?$/,
  content: /^\/vector_stores\/(?<store>[^/]+)\/files\/(?<file>[^/]+)\/content\/?$/,
  batches: /^\/vector_stores\/(?<store>[^/]+)\/file_batches\/?$/,
  batch: /^\/vector_stores\/(?<store>[^/]+)\/file_batches\/(?<batch>[^/]+)\/?$/,
  cancel: /^\/vector_stores\/(?<store>[^/]+)\/file_batches\/(?<batch>[^/]+)\/cancel\/?$/,
  batchFiles: /^\/vector_stores\/(?<store>[^/]+)\/file_batches\/(?<batch>[^/]+)\/files\/?$/,
};

/** How soon a client polling a file still being indexed should ask again. */
const pollAfterMs = 500;

function fileNotFound(id: string): NotFoundError {
  return new NotFoundError(`No file found with id '${quoted(id)}' in this vector store.`, { param: "file_id" });
}

function batchNotFound(id: string): NotFoundError {
  return new NotFoundError(`No file batch found with id '${quoted(id)}'.`, { param: "batch_id" });
}

function storeFileObjectOf(record: VectorStoreFileRecord): VectorStoreFileObject {
  return {
    id: record.fileId,
    object: "vector_store.file",
    created_at: Math.floor(record.createdAt / 1000),
    vector_store_id: record.storeId,
    usage_bytes: record.status === "completed" ? record.usageBytes : 0,
    status: record.status,
    last_error: record.lastError,
    attributes: record.attributes,
    chunking_strategy: {
      type: "static",
      static: { max_chunk_size_tokens: record.chunking.maxTokens, chunk_overlap_tokens: record.chunking.overlapTokens },
    },
    indexing: {
      chunks: record.chunks,
      embedded_chunks: record.embedded,
      embedded_tokens: record.embeddedTokens ?? 0,
    },
  };
}

/** A file's object, with OpenAI's hint to pollers while it is being indexed. */
function fileAnswer(record: VectorStoreFileRecord) {
  const headers: Record<string, string> =
    record.status === "in_progress" ? { "openai-poll-after-ms": String(pollAfterMs) } : {};
  return { response: jsonResponse(storeFileObjectOf(record), 200, headers) };
}

async function storeOf(
  retrieval: RetrievalDependencies,
  context: RequestContext,
  id: string,
): Promise<VectorStoreRecord> {
  const store = await retrieval.dependencies.vectorStores.store(context.key.accountId, id);
  if (!store) throw storeNotFound(id);
  return store;
}

function modelOf(retrieval: RetrievalDependencies, store: VectorStoreRecord) {
  const model = retrieval.dependencies.catalogue.get(store.embeddingModel);
  if (!model)
    throw new NotFoundError(
      `The vector store's embedding model \`${store.embeddingModel}\` is no longer in the catalogue: create a store with a model it has.`,
      { code: "model_not_found", param: "vector_store_id" },
    );
  return model;
}

async function fileAdded(retrieval: RetrievalDependencies, context: RequestContext, storeId: string) {
  const request = parseWith(vectorStoreFileCreateSchema, await readJson(context.body));
  const store = await storeOf(retrieval, context, storeId);
  const chunking = chunkingOf(request.chunking_strategy, modelOf(retrieval, store));
  const files = await filesToAdd(retrieval.dependencies, context, [request.file_id], {
    attributes: request.attributes ?? {},
    chunking,
    batchId: null,
    param: "file_id",
  });
  const [record] = (await retrieval.dependencies.vectorStores.addFiles(context.key.accountId, storeId, files)) ?? [];
  if (!record) throw storeNotFound(storeId);
  void retrieval.indexer.wake();
  return fileAnswer(record);
}

async function batchObjectOf(retrieval: RetrievalDependencies, batch: FileBatchRecord): Promise<FileBatchObject> {
  const counts = await retrieval.dependencies.vectorStores.batchCounts(batch);
  const total = counts.in_progress + counts.completed + counts.failed + counts.cancelled;
  const status = batch.cancelled ? "cancelled" : counts.in_progress > 0 ? "in_progress" : "completed";
  return {
    id: batch.id,
    object: "vector_store.files_batch",
    created_at: Math.floor(batch.createdAt / 1000),
    vector_store_id: batch.storeId,
    status,
    file_counts: { ...counts, total },
  };
}

async function batchAdded(retrieval: RetrievalDependencies, context: RequestContext, storeId: string) {
  const { dependencies } = retrieval;
  const request = parseWith(fileBatchCreateSchema, await readJson(context.body));
  const store = await storeOf(retrieval, context, storeId);
  const chunking = chunkingOf(request.chunking_strategy, modelOf(retrieval, store));
  const batchId = dependencies.newId("vsfb_");
  const files = await filesToAdd(dependencies, context, request.file_ids, {
    attributes: request.attributes ?? {},
    chunking,
    batchId,
    param: "file_ids",
  });
  const batch = await dependencies.vectorStores.createBatch({ id: batchId, storeId, accountId: context.key.accountId });
  await dependencies.vectorStores.addFiles(context.key.accountId, storeId, files);
  void retrieval.indexer.wake();
  return answer(await batchObjectOf(retrieval, batch));
}

async function filesListed(
  retrieval: RetrievalDependencies,
  context: RequestContext,
  storeId: string,
  batchId?: string,
) {
  const query = parseWith(vectorStoreListQuerySchema, listQueryOf(context.url));
  await storeOf(retrieval, context, storeId);
  const page = await retrieval.dependencies.vectorStores.filesPage(context.key.accountId, storeId, {
    ...query,
    ...(batchId !== undefined ? { batchId } : {}),
  });
  if (!page) throw fileNotFound(query.after ?? query.before ?? "");
  const objects = page.items.map(storeFileObjectOf);
  return answer(pageOf(objects, page.hasMore));
}

async function batchOf(retrieval: RetrievalDependencies, context: RequestContext, storeId: string, batchId: string) {
  const batch = await retrieval.dependencies.vectorStores.batch(context.key.accountId, storeId, batchId);
  if (!batch) throw batchNotFound(batchId);
  return batch;
}

async function fileOf(retrieval: RetrievalDependencies, context: RequestContext, storeId: string, fileId: string) {
  const file = await retrieval.dependencies.vectorStores.file(context.key.accountId, storeId, fileId);
  if (!file)
    throw (await retrieval.dependencies.vectorStores.store(context.key.accountId, storeId))
      ? fileNotFound(fileId)
      : storeNotFound(storeId);
  return file;
}

/** The routes of a store's files, each over the key's account's stores only. */
export function storeFileRoutes(retrieval: RetrievalDependencies): InferenceRoute[] {
  const stores = retrieval.dependencies.vectorStores;
  return [
    {
      method: "POST",
      path: storeFilePaths.files,
      handler: async (context, { store }) => fileAdded(retrieval, context, store!),
    },
    {
      method: "GET",
      path: storeFilePaths.files,
      handler: async (context, { store }) => filesListed(retrieval, context, store!),
    },
    {
      method: "GET",
      path: storeFilePaths.one,
      handler: async (context, { store, file }) => fileAnswer(await fileOf(retrieval, context, store!, file!)),
    },
    {
      method: "POST",
      path: storeFilePaths.one,
      handler: async (context, { store, file }) => {
        const request = parseWith(vectorStoreFileUpdateSchema, await readJson(context.body));
        await fileOf(retrieval, context, store!, file!);
        const record = await stores.setAttributes(context.key.accountId, store!, file!, request.attributes ?? {});
        if (!record) throw fileNotFound(file!);
        return fileAnswer(record);
      },
    },
    {
      method: "DELETE",
      path: storeFilePaths.one,
      handler: async (context, { store, file }) => {
        await fileOf(retrieval, context, store!, file!);
        if (!(await stores.removeFile(context.key.accountId, store!, file!))) throw fileNotFound(file!);
        return answer({ id: file, object: "vector_store.file.deleted", deleted: true });
      },
    },
    {
      method: "GET",
      path: storeFilePaths.content,
      handler: async (context, { store, file }) => {
        const record = await fileOf(retrieval, context, store!, file!);
        const chunks = record.status === "completed" ? await stores.chunksOf(record) : [];
        const data = chunks.map((text) => ({ type: "text", text }));
        return {
          response: jsonResponse({ object: "vector_store.file_content.page", data, has_more: false, next_page: null }),
        };
      },
    },
  ];
}

/** The routes of a store's file batches, each over the key's account's stores only. */
export function fileBatchRoutes(retrieval: RetrievalDependencies): InferenceRoute[] {
  const stores = retrieval.dependencies.vectorStores;
  return [
    {
      method: "POST",
      path: storeFilePaths.batches,
      handler: async (context, { store }) => batchAdded(retrieval, context, store!),
    },
    {
      method: "GET",
      path: storeFilePaths.batch,
      handler: async (context, { store, batch }) =>
        answer(await batchObjectOf(retrieval, await batchOf(retrieval, context, store!, batch!))),
    },
    {
      method: "POST",
      path: storeFilePaths.cancel,
      handler: async (context, { store, batch }) => {
        await batchOf(retrieval, context, store!, batch!);
        const cancelled = await stores.cancelBatch(context.key.accountId, store!, batch!);
        if (!cancelled) throw batchNotFound(batch!);
        return answer(await batchObjectOf(retrieval, cancelled));
      },
    },
    {
      method: "GET",
      path: storeFilePaths.batchFiles,
      handler: async (context, { store, batch }) => {
        await batchOf(retrieval, context, store!, batch!);
        return filesListed(retrieval, context, store!, batch!);
      },
    },
  ];
}

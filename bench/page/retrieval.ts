/**
 * The retrieval benchmark's calls in the page (bench/retrieval.mjs): a file indexed through
 * `/v1/vector_stores` against its chunks embedded through `/v1/embeddings` alone, the search index
 * at scale, and recall on a labelled set, each as an app reaches the API (fetch, the page's key).
 */
import { SearchIndex } from "../../src/retrieval/search-index.js";

export interface RetrievalCalls {
  /** Uploads `text` as `filename`, adds it to a new store of `model`, and waits until it is indexed. */
  indexFile(request: { model: string; filename: string; text: string }): Promise<{
    ms: number;
    storeId: string;
    fileId: string;
    chunks: number;
    tokens: number;
  }>;
  /** The file's chunks, read back, embedded through /v1/embeddings, `batch` chunks a request. */
  embedChunks(request: { model: string; storeId: string; fileId: string; batch: number }): Promise<{
    ms: number;
    chunks: number;
    tokens: number;
  }>;
  /** An index of `count` chunks (random unit vectors, `texts` cycled), built and searched in this page. */
  searchAtScale(request: { count: number; dimensions: number; texts: string[]; queries: string[] }): Promise<{
    buildMs: number;
    searchMs: number[];
    bytes: number;
  }>;
  /** Labelled passages as files of one store, then each query searched three ways; how often its passage is in the top 5. */
  recall(request: { model: string; passages: string[]; queries: { text: string; passage: number }[] }): Promise<{
    vectors: number;
    keywords: number;
    hybrid: number;
    queries: number;
  }>;
}

type Account = () => { baseURL: string; key: string };

async function answer(account: Account, path: string, init: RequestInit = {}): Promise<Response> {
  const { baseURL, key } = account();
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (typeof init.body === "string") headers["content-type"] = "application/json";
  const response = await fetch(`${baseURL}${path}`, { ...init, headers });
  if (!response.ok)
    throw new Error(`${init.method ?? "GET"} ${path}: HTTP ${response.status}: ${await response.text()}`);
  return response;
}

async function api<T>(account: Account, path: string, init: RequestInit = {}): Promise<T> {
  return (await (await answer(account, path, init)).json()) as T;
}

async function upload(account: Account, filename: string, text: string): Promise<string> {
  const form = new FormData();
  form.append("purpose", "assistants");
  form.append("file", new File([text], filename));
  return (await api<{ id: string }>(account, "/files", { method: "POST", body: form })).id;
}

interface StoreFile {
  id: string;
  status: string;
  last_error: { message: string } | null;
  indexing: { chunks: number | null; embedded_tokens: number };
}

/**
 * Waits until every file of the store has left `in_progress`, polling as the OpenAI SDKs' `poll`
 * does: again after the `openai-poll-after-ms` that a file being indexed answers with (500 ms
 * unless it says otherwise).
 */
async function indexed(account: Account, storeId: string): Promise<StoreFile[]> {
  for (;;) {
    const files: StoreFile[] = [];
    for (let after = ""; ;) {
      const query = `limit=100&order=asc${after ? `&after=${after}` : ""}`;
      const page = await api<{ data: StoreFile[]; has_more: boolean }>(
        account,
        `/vector_stores/${storeId}/files?${query}`,
      );
      files.push(...page.data);
      if (!page.has_more) break;
      after = page.data.at(-1)!.id;
    }
    let pollAfterMs = 500;
    const busy = files.find((file) => file.status === "in_progress");
    if (busy) {
      const response = await answer(account, `/vector_stores/${storeId}/files/${busy.id}`);
      pollAfterMs = Number(response.headers.get("openai-poll-after-ms") ?? 500);
    }
    const failed = files.find((file) => file.status === "failed");
    if (failed) throw new Error(`indexing ${failed.id} failed: ${failed.last_error?.message}`);
    if (files.every((file) => file.status === "completed")) return files;
    await new Promise((resolve) => setTimeout(resolve, pollAfterMs));
  }
}

/** A seeded generator of unit vectors. */
function unitVectors(count: number, dimensions: number): Float32Array[] {
  let state = 12_345;
  const random = () => ((state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32) * 2 - 1;
  return Array.from({ length: count }, () => {
    const vector = Float32Array.from({ length: dimensions }, random);
    const length = Math.hypot(...vector);
    return vector.map((value) => value / length);
  });
}

export function retrievalCalls(account: Account): RetrievalCalls {
  return {
    async indexFile({ model, filename, text }) {
      const started = performance.now();
      const fileId = await upload(account, filename, text);
      const store = await api<{ id: string }>(account, "/vector_stores", {
        method: "POST",
        body: JSON.stringify({ embedding_model: model, file_ids: [fileId] }),
      });
      const [file] = await indexed(account, store.id);
      const ms = performance.now() - started;
      return {
        ms,
        storeId: store.id,
        fileId,
        chunks: file!.indexing.chunks ?? 0,
        tokens: file!.indexing.embedded_tokens,
      };
    },
    async embedChunks({ model, storeId, fileId, batch }) {
      const started = performance.now();
      const page = await api<{ data: { text: string }[] }>(
        account,
        `/vector_stores/${storeId}/files/${fileId}/content`,
      );
      const texts = page.data.map((part) => part.text);
      let tokens = 0;
      for (let from = 0; from < texts.length; from += batch) {
        const body = JSON.stringify({ model, input: texts.slice(from, from + batch), encoding_format: "base64" });
        const embedded = await api<{ usage: { prompt_tokens: number } }>(account, "/embeddings", {
          method: "POST",
          body,
        });
        tokens += embedded.usage.prompt_tokens;
      }
      return { ms: performance.now() - started, chunks: texts.length, tokens };
    },
    async searchAtScale({ count, dimensions, texts, queries }) {
      const vectors = unitVectors(count, dimensions);
      const chunks = vectors.map((vector, place) => ({
        fileId: `file-${place % 97}`,
        text: texts[place % texts.length]!,
        vector,
      }));
      let started = performance.now();
      const index = new SearchIndex(chunks, dimensions);
      const buildMs = performance.now() - started;
      const options = { limit: 10, threshold: 0, weights: { embedding: 0.7, text: 0.3 }, allows: () => true };
      const searchMs: number[] = [];
      const asked = unitVectors(queries.length + 1, dimensions).slice(1);
      index.search([{ vector: asked[0]!, text: queries[0]! }], options);
      queries.forEach((text, place) => {
        started = performance.now();
        index.search([{ vector: asked[place]!, text }], options);
        searchMs.push(performance.now() - started);
      });
      return { buildMs, searchMs, bytes: index.bytes };
    },
    async recall({ model, passages, queries }) {
      const fileIds: string[] = [];
      for (const [place, text] of passages.entries()) fileIds.push(await upload(account, `passage-${place}.txt`, text));
      const store = await api<{ id: string }>(account, "/vector_stores", {
        method: "POST",
        body: JSON.stringify({ embedding_model: model }),
      });
      for (let from = 0; from < fileIds.length; from += 500)
        await api(account, `/vector_stores/${store.id}/file_batches`, {
          method: "POST",
          body: JSON.stringify({ file_ids: fileIds.slice(from, from + 500) }),
        });
      await indexed(account, store.id);
      const found = { vectors: 0, keywords: 0, hybrid: 0 };
      const ways = {
        vectors: { embedding_weight: 1, text_weight: 0 },
        keywords: { embedding_weight: 0, text_weight: 1 },
        hybrid: undefined,
      };
      for (const query of queries)
        for (const [way, hybrid] of Object.entries(ways) as [keyof typeof found, object | undefined][]) {
          const body = {
            query: query.text,
            max_num_results: 5,
            ...(hybrid ? { ranking_options: { hybrid_search: hybrid } } : {}),
          };
          const page = await api<{ data: { file_id: string }[] }>(account, `/vector_stores/${store.id}/search`, {
            method: "POST",
            body: JSON.stringify(body),
          });
          if (page.data.some((result) => result.file_id === fileIds[query.passage])) found[way]++;
        }
      return { ...found, queries: queries.length };
    },
  };
}

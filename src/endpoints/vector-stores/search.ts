/**
 * `POST /v1/vector_stores/{id}/search`: the queries embedded with the store's model (admitted
 * and billed like `/v1/embeddings`), then the store's chunks ranked by meaning and words
 * together, filtered by the files' attributes, in OpenAI's `vector_store.search_results.page`.
 */
import { BadRequestError } from "../../core/errors/api.js";
import { vectorStoreSearchSchema, type SearchResult } from "../../core/wire/vector-stores.js";
import { countTextTokens } from "../../pipeline/budget.js";
import { embedAdmitted, embeddingAdmission, normalised, textEmbeddingCall } from "../../pipeline/embedding.js";
import { admit } from "../../pipeline/metering.js";
import { placementOf } from "../../pipeline/placement.js";
import { defaultWeights, searchIndex, type Found } from "../../pipeline/store-search.js";
import { wordsOf } from "../../retrieval/search-index.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { jsonResponse } from "../../http/json-response.js";
import { admitted, placed, type Outcome } from "../../http/outcome.js";
import { abortWith } from "../../http/respond.js";
import { serveRequest } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";
import { findModel } from "../dependencies.js";
import { storeNotFound, type RetrievalDependencies } from "./vector-stores.js";

export const searchPath = /^\/vector_stores\/(?<store>[^/]+)\/search\/?$/;

/** Words a question has that a search for its subject does not need. */
const askingWords = new Set(
  (
    "a an the is are was were be been am do does did what which who whom whose when where why how " +
    "i me my we our you your it its of in on at to for from by with about can could would should " +
    "please tell show find explain give list and or"
  ).split(" "),
);

/**
 * `rewrite_query`: the question cut to the words that carry its subject, as a keyword search
 * wants it. This API rewrites without a model, so the rewrite is cheap and the same every time;
 * a query of nothing but such words stays as it was.
 */
export function rewrittenQuery(query: string): string {
  const kept = wordsOf(query).filter((word) => !askingWords.has(word));
  return kept.length ? kept.join(" ") : query;
}

function resultOf(found: Found): SearchResult {
  return {
    file_id: found.file.fileId,
    filename: found.file.filename,
    score: found.score,
    attributes: found.file.attributes,
    content: [{ type: "text", text: found.text }],
  };
}

const page = (queries: string[], data: SearchResult[]) =>
  jsonResponse({
    object: "vector_store.search_results.page",
    search_query: queries,
    data,
    has_more: false,
    next_page: null,
  });

async function searched(retrieval: RetrievalDependencies, context: RequestContext, storeId: string): Promise<Outcome> {
  const { dependencies } = retrieval;
  const request = parseWith(vectorStoreSearchSchema, await readJson(context.body));
  const indexed = await retrieval.indexes.of(context.key.accountId, storeId);
  if (!indexed) throw storeNotFound(storeId);
  const { store } = indexed;
  if (store.expiresAt !== null && store.expiresAt <= dependencies.clock())
    throw new BadRequestError(`Vector store ${storeId} has expired; create a new one to search.`, {
      param: "vector_store_id",
      code: "vector_store_expired",
    });
  const model = findModel(dependencies, store.embeddingModel, "vector_store_id");
  const asked = typeof request.query === "string" ? [request.query] : request.query;
  const queries = request.rewrite_query ? asked.map(rewrittenQuery) : asked;
  if (indexed.index.chunks.length === 0) return { response: page(queries, []) };
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  queries.forEach((query) => countTextTokens(tokenizer, query, model, "query"));
  const call = textEmbeddingCall(model, tokenizer, queries);
  const placement = await placementOf(dependencies.engine, model);
  return placed(placement, async () => {
    const controller = abortWith(context.request);
    const serving = serveRequest(context, controller.signal);
    const meter = await admit(dependencies, serving, model, embeddingAdmission(placement, call));
    return admitted(meter, placement, async () => {
      const embedded = await embedAdmitted(dependencies, serving, placement, call, meter);
      const hybrid = request.ranking_options?.hybrid_search;
      const found = searchIndex(indexed, {
        queries: embedded.vectors.map((vector, index) => ({ vector: normalised(vector), text: queries[index]! })),
        limit: request.max_num_results ?? 10,
        threshold: request.ranking_options?.score_threshold ?? 0,
        weights: hybrid ? { embedding: hybrid.embedding_weight, text: hybrid.text_weight } : defaultWeights,
        filter: request.filters ?? undefined,
      });
      await dependencies.vectorStores.touch(context.key.accountId, storeId);
      return { response: page(queries, found.map(resultOf)) };
    });
  });
}

export function searchRoute(retrieval: RetrievalDependencies): InferenceRoute {
  return {
    method: "POST",
    path: searchPath,
    handler: async (context, { store }) => searched(retrieval, context, store!),
  };
}

/**
 * `POST /v1/vector_stores/{id}/search`: the queries embedded with the store's model (admitted
 * and billed like `/v1/embeddings`), then the store's chunks ranked by meaning and words
 * together, filtered by the files' attributes, in OpenAI's `vector_store.search_results.page`.
 */
import { vectorStoreSearchSchema, type SearchResult } from "../../core/wire/vector-stores.js";
import { defaultWeights, searchStore, type Found } from "../../pipeline/store-search.js";
import { wordsOf } from "../../retrieval/search-index.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { jsonResponse } from "../../http/json-response.js";
import type { Outcome } from "../../http/outcome.js";
import { abortWith } from "../../http/respond.js";
import { serveRequest } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";
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
  const { dependencies, indexes } = retrieval;
  const request = parseWith(vectorStoreSearchSchema, await readJson(context.body));
  const asked = typeof request.query === "string" ? [request.query] : request.query;
  const texts = request.rewrite_query ? asked.map(rewrittenQuery) : asked;
  const hybrid = request.ranking_options?.hybrid_search;
  const searched = await searchStore(
    dependencies,
    indexes,
    serveRequest(context, abortWith(context.request).signal),
    storeId,
    {
      texts,
      limit: request.max_num_results ?? 10,
      threshold: request.ranking_options?.score_threshold ?? 0,
      weights: hybrid ? { embedding: hybrid.embedding_weight, text: hybrid.text_weight } : defaultWeights,
      filter: request.filters ?? undefined,
    },
  );
  if (!searched) throw storeNotFound(storeId);
  const { found, rate, placement } = searched;
  return { response: page(texts, found.map(resultOf)), ...(rate ? { rate } : {}), ...(placement ? { placement } : {}) };
}

export function searchRoute(retrieval: RetrievalDependencies): InferenceRoute {
  return {
    method: "POST",
    path: searchPath,
    handler: async (context, { store }) => searched(retrieval, context, store!),
  };
}

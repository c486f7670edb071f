/**
 * The API's endpoints, each a folder of its own: their routes, in the order they are matched,
 * and their paths. Adding an endpoint is adding its folder and its line here.
 */
import { InferenceApp } from "../http/app.js";
import type { InferenceRoute } from "../http/context.js";
import { endsInRoute } from "../http/router.js";
import { chatPath, chatRoute } from "./chat/chat.js";
import { completionsPath, completionsRoute } from "./completions/completions.js";
import type { EndpointDependencies } from "./dependencies.js";
import { embeddingsPath, embeddingsRoute } from "./embeddings/embeddings.js";
import { filePaths, fileRoutes } from "./files/files.js";
import { modelPaths, modelRoutes } from "./models/models.js";
import { compactPath, compactRoute } from "./responses/compact.js";
import { inputTokensRoute, responsesPaths, responsesRoute, storedResponseRoutes } from "./responses/responses.js";
import { storedCompletionPaths, storedCompletionRoutes } from "./stored/completions.js";
import { conversationPaths, conversationRoutes } from "./stored/conversations.js";
import { fileBatchRoutes, storeFilePaths, storeFileRoutes } from "./vector-stores/files.js";
import { searchPath, searchRoute } from "./vector-stores/search.js";
import { vectorStorePaths, vectorStoreRoutes, type RetrievalDependencies } from "./vector-stores/vector-stores.js";
import { Indexer } from "../pipeline/indexing.js";
import { SearchIndexes } from "../pipeline/store-search.js";

/** The endpoints' paths, below the base URL and any `/v1`: what the worker claims before it knows its base URL. */
const endpointPaths = [
  chatPath,
  completionsPath,
  embeddingsPath,
  ...Object.values(responsesPaths),
  compactPath,
  ...Object.values(storedCompletionPaths),
  ...Object.values(conversationPaths),
  ...Object.values(filePaths),
  ...Object.values(vectorStorePaths),
  ...Object.values(storeFilePaths),
  searchPath,
  ...Object.values(modelPaths),
];

function endpointRoutes(dependencies: EndpointDependencies, retrieval: RetrievalDependencies): InferenceRoute[] {
  return [
    chatRoute(dependencies),
    completionsRoute(dependencies),
    embeddingsRoute(dependencies),
    responsesRoute(dependencies, retrieval.indexes),
    compactRoute(dependencies),
    ...modelRoutes(dependencies),
    ...storedResponseRoutes(dependencies),
    inputTokensRoute(dependencies),
    ...storedCompletionRoutes(dependencies),
    ...conversationRoutes(dependencies),
    ...fileRoutes(dependencies),
    ...vectorStoreRoutes(retrieval),
    ...storeFileRoutes(retrieval),
    ...fileBatchRoutes(retrieval),
    searchRoute(retrieval),
  ];
}

/**
 * The API under `baseUrl`: every endpoint, over the services given, with the background work
 * requests leave running (a vector store's indexing), which `background` resumes after a restart.
 */
export function inferenceApp(baseUrl: string, dependencies: EndpointDependencies): InferenceApp {
  const indexer = new Indexer(dependencies);
  const retrieval = { dependencies, indexer, indexes: new SearchIndexes(dependencies.vectorStores) };
  return new InferenceApp(baseUrl, dependencies, endpointRoutes(dependencies, retrieval), () => indexer.resume());
}

/**
 * Whether `pathname` ends like one of the endpoints, whatever the base URL: a restarted worker
 * must decide at once whether to answer a fetch, before it has read its configuration.
 */
export function endsLikeEndpoint(pathname: string): boolean {
  return endsInRoute(pathname, endpointPaths);
}

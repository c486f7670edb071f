/**
 * The vector stores API (`/v1/vector_stores`): a store of files chunked, embedded and indexed for
 * search, its files and file batches, and its search. The requests as OpenAI bounds them, and
 * what it answers.
 */
import { z } from "zod";
import { dictionary, list } from "./collections.js";
import { metadataValue } from "./chat-request.js";
import { cursorPageOf } from "./shared.js";

const metadata = dictionary(metadataValue, { maxEntries: 16, maxKeyLength: 64 });

/** OpenAI's bounds on a static chunking strategy, in tokens. */
const chunkBounds = { minSize: 100, maxSize: 4096 } as const;

/** `auto`: what OpenAI chunks with when it is given no strategy. */
export const autoChunking = { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } as const;

const staticChunking = z
  .strictObject({
    max_chunk_size_tokens: z.number().int().min(chunkBounds.minSize).max(chunkBounds.maxSize),
    chunk_overlap_tokens: z.number().int().min(0),
  })
  .superRefine((chunking, context) => {
    if (chunking.chunk_overlap_tokens > chunking.max_chunk_size_tokens / 2)
      context.addIssue({
        code: "custom",
        path: ["chunk_overlap_tokens"],
        message: "chunk_overlap_tokens must be at most half of max_chunk_size_tokens",
      });
  });

const chunkingStrategySchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("auto") }),
  z.strictObject({ type: z.literal("static"), static: staticChunking }),
]);

/** A file's attributes, for search filters: at most 16, keys of at most 64 characters, strings of at most 512. */
const attributes = dictionary(z.union([metadataValue, z.number(), z.boolean()]), { maxEntries: 16, maxKeyLength: 64 });

const expiresAfter = z.strictObject({ anchor: z.literal("last_active_at"), days: z.number().int().min(1).max(365) });

/** The most files one request adds: a store's `file_ids`, a batch's. */
const maxFilesPerRequest = 500;

export const vectorStoreCreateSchema = z.strictObject({
  name: z.string().max(256).nullish(),
  description: z.string().max(512).nullish(),
  file_ids: list(z.string().min(1), { max: maxFilesPerRequest }).nullish(),
  chunking_strategy: chunkingStrategySchema.nullish(),
  expires_after: expiresAfter.nullish(),
  metadata: metadata.nullish(),
  // This API's own: the catalogue's embedding model the store's chunks and queries are embedded with.
  embedding_model: z.string().min(1).nullish(),
});

export const vectorStoreUpdateSchema = z.strictObject({
  name: z.string().max(256).nullish(),
  expires_after: expiresAfter.nullish(),
  metadata: metadata.nullish(),
});

export const vectorStoreFileCreateSchema = z.strictObject({
  file_id: z.string().min(1),
  attributes: attributes.nullish(),
  chunking_strategy: chunkingStrategySchema.nullish(),
});

export const vectorStoreFileUpdateSchema = z.strictObject({ attributes: attributes.nullable() });

export const fileBatchCreateSchema = z.strictObject({
  file_ids: list(z.string().min(1), { min: 1, max: maxFilesPerRequest }),
  attributes: attributes.nullish(),
  chunking_strategy: chunkingStrategySchema.nullish(),
});

/** `GET …/files` of a store or a batch: a cursor page, newest first, up to 100, of one status if `filter` names it. */
export const vectorStoreListQuerySchema = z.object({
  after: z.string().min(1).optional(),
  before: z.string().min(1).optional(),
  limit: z.number().int().min(1).max(100).default(20),
  order: z.enum(["asc", "desc"]).default("desc"),
  filter: z.enum(["in_progress", "completed", "failed", "cancelled"]).optional(),
});

const scalar = z.union([z.string(), z.number(), z.boolean()]);

const comparisonFilterSchema = z.strictObject({
  type: z.enum(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]),
  key: z.string(),
  value: z.union([scalar, z.array(z.union([z.string(), z.number()]))]),
});

export type ComparisonFilter = z.infer<typeof comparisonFilterSchema>;
export type SearchFilter = ComparisonFilter | { type: "and" | "or"; filters: SearchFilter[] };

const searchFilterSchema: z.ZodType<SearchFilter> = z.lazy(() =>
  z.union([
    comparisonFilterSchema,
    z.strictObject({ type: z.enum(["and", "or"]), filters: list(searchFilterSchema, { min: 1, max: 64 }) }),
  ]),
);

const rankers = ["none", "auto", "default-2024-11-15"] as const;

const rankingOptions = z.strictObject({
  ranker: z.enum(rankers).nullish(),
  score_threshold: z.number().min(0).max(1).nullish(),
  hybrid_search: z.strictObject({ embedding_weight: z.number().min(0), text_weight: z.number().min(0) }).nullish(),
});

/** What the Responses API's `file_search` tool filters and ranks by, as a search does. */
export const fileSearchFilterSchema = searchFilterSchema;
export const fileSearchRankingSchema = rankingOptions;

export const vectorStoreSearchSchema = z.strictObject({
  query: z.union([z.string().min(1), list(z.string().min(1), { min: 1, max: 16 })]),
  filters: searchFilterSchema.nullish(),
  max_num_results: z.number().int().min(1).max(50).nullish(),
  ranking_options: rankingOptions.nullish(),
  rewrite_query: z.boolean().nullish(),
});

const fileCounts = z.strictObject({
  in_progress: z.number().int(),
  completed: z.number().int(),
  failed: z.number().int(),
  cancelled: z.number().int(),
  total: z.number().int(),
});

export const vectorStoreSchema = z.strictObject({
  id: z.string(),
  object: z.literal("vector_store"),
  created_at: z.number().int(),
  name: z.string(),
  description: z.string().nullable(),
  usage_bytes: z.number().int(),
  file_counts: fileCounts,
  status: z.enum(["expired", "in_progress", "completed"]),
  expires_after: expiresAfter.nullable(),
  expires_at: z.number().int().nullable(),
  last_active_at: z.number().int().nullable(),
  metadata: z.record(z.string(), z.string()),
  embedding_model: z.string(),
});

const lastError = z.strictObject({
  code: z.enum(["server_error", "unsupported_file", "invalid_file"]),
  message: z.string(),
});

const chunkingStrategyObjectSchema = z.strictObject({
  type: z.literal("static"),
  static: z.strictObject({ max_chunk_size_tokens: z.number().int(), chunk_overlap_tokens: z.number().int() }),
});

export const vectorStoreFileSchema = z.strictObject({
  id: z.string(),
  object: z.literal("vector_store.file"),
  created_at: z.number().int(),
  vector_store_id: z.string(),
  usage_bytes: z.number().int(),
  status: z.enum(["in_progress", "completed", "cancelled", "failed"]),
  last_error: lastError.nullable(),
  attributes: z.record(z.string(), scalar),
  chunking_strategy: chunkingStrategyObjectSchema,
  /** This API's own: how far indexing has come, as a progress bar shows it (`chunks` null until the file is chunked). */
  indexing: z.strictObject({
    chunks: z.number().int().nullable(),
    embedded_chunks: z.number().int(),
    embedded_tokens: z.number().int(),
  }),
});

export const fileBatchSchema = z.strictObject({
  id: z.string(),
  object: z.literal("vector_store.files_batch"),
  created_at: z.number().int(),
  vector_store_id: z.string(),
  status: z.enum(["in_progress", "completed", "cancelled", "failed"]),
  file_counts: fileCounts,
});

const searchResultSchema = z.strictObject({
  file_id: z.string(),
  filename: z.string(),
  score: z.number().min(0).max(1),
  attributes: z.record(z.string(), scalar),
  content: z.array(z.strictObject({ type: z.literal("text"), text: z.string() })),
});

export const searchResultsPageSchema = z.strictObject({
  object: z.literal("vector_store.search_results.page"),
  search_query: z.array(z.string()),
  data: z.array(searchResultSchema),
  has_more: z.boolean(),
  next_page: z.null(),
});

/** `GET …/files/{id}/content`: the file's chunks, as the store parsed them. */
export const fileContentPageSchema = z.strictObject({
  object: z.literal("vector_store.file_content.page"),
  data: z.array(z.strictObject({ type: z.literal("text"), text: z.string() })),
  has_more: z.boolean(),
  next_page: z.null(),
});

export const vectorStoreListSchema = cursorPageOf(vectorStoreSchema);
export const vectorStoreFileListSchema = cursorPageOf(vectorStoreFileSchema);

export const vectorStoreDeletedSchema = z.strictObject({
  id: z.string(),
  object: z.literal("vector_store.deleted"),
  deleted: z.literal(true),
});

export const vectorStoreFileDeletedSchema = z.strictObject({
  id: z.string(),
  object: z.literal("vector_store.file.deleted"),
  deleted: z.literal(true),
});

export type VectorStoreObject = z.infer<typeof vectorStoreSchema>;
export type VectorStoreFileObject = z.infer<typeof vectorStoreFileSchema>;
export type FileBatchObject = z.infer<typeof fileBatchSchema>;
export type SearchResult = z.infer<typeof searchResultSchema>;
export type ChunkingStrategy = z.infer<typeof chunkingStrategySchema>;
export type FileAttributes = Record<string, string | number | boolean>;

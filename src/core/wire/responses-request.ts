/**
 * The Responses API's request (`POST /v1/responses`): input items, instructions, function tools
 * and the text format, with OpenAI's names and ranges. A strict object, as the chat request is:
 * an argument we do not know is refused with 400 naming it. The handler (endpoints/responses/responses.ts)
 * serves it as the chat request it amounts to.
 */
import { z } from "zod";
import { dictionary, list } from "./collections.js";
import { functionName } from "./shared.js";
import { jsonSchemaObject, metadataValue, verbosity } from "./chat-request.js";
import { fileSearchFilterSchema, fileSearchRankingSchema } from "./vector-stores.js";

/** A caching hint on a part, as on chat's text parts: taken, not needed. */
const breakpoint = { prompt_cache_breakpoint: z.strictObject({ mode: z.literal("explicit") }).optional() };
/** Parts the hosted API takes for models that read images or files; refused by the handler in OpenAI's words. */
const mediaPart = z.looseObject({ type: z.enum(["input_image", "input_file", "input_audio"]) });
const inputText = z.strictObject({ type: z.literal("input_text"), text: z.string(), ...breakpoint });
/** An earlier reply's text sent back: its annotations and log probabilities are taken, not read. */
const outputText = z.strictObject({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
  ...breakpoint,
});
const refusal = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });
const contentPart = z.discriminatedUnion("type", [inputText, outputText, refusal, mediaPart]);

const itemStatus = z.enum(["in_progress", "completed", "incomplete"]).nullish();

/**
 * What `include` may name, as OpenAI lists it. Only `message.output_text.logprobs` adds anything
 * here; the others name outputs of built-in tools, images and reasoning, which these models and
 * this API do not make.
 */
export const includable = z.enum([
  "code_interpreter_call.outputs",
  "computer_call_output.output.image_url",
  "file_search_call.results",
  "message.input_image.image_url",
  "message.output_text.logprobs",
  "reasoning.encrypted_content",
  "web_search_call.action.sources",
  "web_search_call.results",
]);

const messageItem = z.strictObject({
  type: z.literal("message").optional(),
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: z.union([z.string(), list(contentPart, { min: 1 })]),
  // An earlier reply's own fields, sent back: not read.
  id: z.string().nullish(),
  status: itemStatus,
  phase: z.string().nullish(),
});
/** Who made a call, as the hosted API says of its calls (a client sends its items back as they came): not read. */
const caller = z
  .union([
    z.strictObject({ type: z.literal("direct") }),
    z.strictObject({ type: z.literal("program"), caller_id: z.string() }),
  ])
  .nullish();

const functionCallItem = z.strictObject({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  id: z.string().nullish(),
  status: itemStatus,
  // An earlier call's own fields, sent back: not read.
  async: z.boolean().nullish(),
  caller,
  namespace: z.string().nullish(),
});
const functionCallOutputItem = z.strictObject({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: z.union([z.string(), list(contentPart, { min: 1 })]),
  id: z.string().nullish(),
  status: itemStatus,
  caller,
  name: z.string().nullish(),
  namespace: z.string().nullish(),
});
/** An earlier `file_search` call sent back: its queries are kept, its results taken and not read. */
const fileSearchCallItem = z.strictObject({
  type: z.literal("file_search_call"),
  id: z.string().min(1),
  queries: list(z.string()),
  status: itemStatus,
  results: z.array(z.unknown()).nullish(),
});
const itemReference = z.strictObject({ type: z.literal("item_reference"), id: z.string().min(1) });
/** What `/v1/responses/compact` made of earlier turns: their summary, sealed (OpenAI's limit: 10 MiB). */
const compactionItem = z.strictObject({
  type: z.literal("compaction"),
  id: z.string().nullish(),
  encrypted_content: z.string().max(10_485_760),
});

/**
 * An input item: a message (its `type` may be left out), a call, a call's output, a compaction,
 * or a reference to a stored item.
 */
export const inputItem = z.union([
  messageItem,
  z.discriminatedUnion("type", [
    functionCallItem,
    functionCallOutputItem,
    fileSearchCallItem,
    compactionItem,
    itemReference,
  ]),
]);

const functionTool = z.strictObject({
  type: z.literal("function"),
  name: functionName,
  description: z.string().nullish(),
  parameters: jsonSchemaObject.nullish(),
  strict: z.boolean().nullish(),
});

/** OpenAI's built-in `file_search`: the worker searches the account's vector stores, then the model answers from what it found. */
const fileSearchTool = z.strictObject({
  type: z.literal("file_search"),
  vector_store_ids: list(z.string().min(1), { min: 1, max: 2 }),
  max_num_results: z.number().int().min(1).max(50).nullish(),
  filters: fileSearchFilterSchema.nullish(),
  ranking_options: fileSearchRankingSchema.nullish(),
});

const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), name: z.string() }),
  z.strictObject({ type: z.literal("file_search") }),
  z.strictObject({
    type: z.literal("allowed_tools"),
    mode: z.enum(["auto", "required"]),
    tools: list(z.strictObject({ type: z.literal("function"), name: z.string() }), { min: 1 }),
  }),
]);

const textFormat = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    name: functionName,
    schema: jsonSchemaObject,
    description: z.string().nullish(),
    strict: z.boolean().nullish(),
  }),
]);

export const responseRequestSchema = z.strictObject({
  model: z.string().min(1),
  input: z.union([z.string(), list(inputItem, { min: 1 })]),
  instructions: z.string().nullish(),
  // OpenAI's floor for this endpoint: 16.
  max_output_tokens: z.number().int().min(16).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  // Open Responses has them, as chat does.
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  include: list(includable).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.strictObject({ include_obfuscation: z.boolean().optional() }).nullish(),
  tools: list(z.discriminatedUnion("type", [functionTool, fileSearchTool]), { max: 128 }).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  // Counts calls to built-in tools: file_search, the one here, is called at most once a response.
  max_tool_calls: z.number().int().min(1).nullish(),
  text: z.strictObject({ format: textFormat.optional(), verbosity: verbosity.nullish() }).nullish(),
  truncation: z.enum(["auto", "disabled"]).nullish(),
  store: z.boolean().nullish(),
  metadata: dictionary(metadataValue, { maxEntries: 16, maxKeyLength: 64 }).nullish(),
  user: z.string().optional(),
  safety_identifier: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  prompt_cache_retention: z.enum(["in_memory", "in-memory", "24h"]).nullish(),
  prompt_cache_options: z
    .strictObject({
      mode: z.enum(["implicit", "explicit"]).optional(),
      ttl: z.literal("30m").optional(),
      prewarm: z.boolean().optional(),
    })
    .nullish(),
  service_tier: z.enum(["auto", "default", "flex", "scale", "priority", "fast"]).nullish(),
  // Known to OpenAI, refused for these models in OpenAI's words by the handler.
  reasoning: z.unknown().optional(),
  background: z.boolean().nullish(),
  previous_response_id: z.string().nullish(),
  // The stored conversation the response continues and is added to: its id, or an object with it.
  conversation: z.union([z.string().min(1), z.strictObject({ id: z.string().min(1) })]).nullish(),
  prompt: z.unknown().optional(),
  moderation: z.unknown().optional(),
  context_management: z.unknown().optional(),
  access_programs: z.unknown().optional(),
});

export type ResponseRequest = z.infer<typeof responseRequestSchema>;

/** `POST /v1/responses/input_tokens`: the fields that make a response's input, counted and not answered. */
export const inputTokensRequestSchema = responseRequestSchema.pick({
  model: true,
  input: true,
  instructions: true,
  tools: true,
  tool_choice: true,
  parallel_tool_calls: true,
  text: true,
  truncation: true,
  reasoning: true,
  previous_response_id: true,
  conversation: true,
});
export type ResponseInputItem = z.infer<typeof inputItem>;

/**
 * `POST /v1/responses/compact`: a conversation (its input, or a stored response's chain it
 * continues) to be made shorter, as OpenAI's compaction takes it.
 */
export const compactRequestSchema = z.strictObject({
  model: z.string().min(1),
  input: z.union([z.string(), list(inputItem, { min: 1 })]).nullish(),
  previous_response_id: z.string().nullish(),
  instructions: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  prompt_cache_retention: z.enum(["in_memory", "in-memory", "24h"]).nullish(),
});

/**
 * `GET /v1/responses/{id}/input_items`' query, as OpenAI takes it: a cursor (`after`, an item's
 * id), a page size and an order. `include` names what OpenAI can add to items; these items have
 * nothing to add. Other query parameters are ignored, as OpenAI ignores them.
 */
export const inputItemsQuerySchema = z.object({
  after: z.string().min(1).optional(),
  limit: z.number().int().min(1).max(100).default(20),
  order: z.enum(["asc", "desc"]).default("desc"),
  include: list(includable).optional(),
});
export type InputItemsQuery = z.infer<typeof inputItemsQuerySchema>;

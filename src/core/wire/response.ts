/**
 * The Responses API's answer: the `response` object, its output items (an assistant message of
 * `output_text` parts, function calls), its usage, and the events a stream sends.
 */
import { z } from "zod";
import { cursorPageOf } from "./shared.js";

const logprobAlternative = z.strictObject({ token: z.string(), logprob: z.number(), bytes: z.array(z.number()) });
const outputLogprob = z.strictObject({ ...logprobAlternative.shape, top_logprobs: z.array(logprobAlternative) });

/** A passage of a file that `file_search` found, cited where `index` is in the text. */
const fileCitationSchema = z.strictObject({
  type: z.literal("file_citation"),
  file_id: z.string(),
  filename: z.string(),
  index: z.number().int().min(0),
});

const outputTextSchema = z.strictObject({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(fileCitationSchema),
  logprobs: z.array(outputLogprob),
});

const itemStatus = z.enum(["in_progress", "completed", "incomplete"]);

const messageItemSchema = z.strictObject({
  id: z.string(),
  type: z.literal("message"),
  status: itemStatus,
  role: z.literal("assistant"),
  content: z.array(outputTextSchema),
});

const functionCallItemSchema = z.strictObject({
  id: z.string(),
  type: z.literal("function_call"),
  status: itemStatus,
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
});

/** What `file_search` found, as `include: ["file_search_call.results"]` shows it. */
const fileSearchResultSchema = z.strictObject({
  file_id: z.string(),
  filename: z.string(),
  score: z.number().min(0).max(1),
  attributes: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  text: z.string(),
});

const fileSearchCallItemSchema = z.strictObject({
  id: z.string(),
  type: z.literal("file_search_call"),
  status: z.enum(["in_progress", "searching", "completed", "incomplete", "failed"]),
  queries: z.array(z.string()),
  results: z.array(fileSearchResultSchema).nullable(),
});

const outputItemSchema = z.discriminatedUnion("type", [
  messageItemSchema,
  functionCallItemSchema,
  fileSearchCallItemSchema,
]);

/** A message a response was given, as `GET /v1/responses/{id}/input_items` lists it. */
const inputMessageItemSchema = z.strictObject({
  id: z.string(),
  type: z.literal("message"),
  status: itemStatus,
  role: z.enum(["user", "system", "developer"]),
  content: z.array(z.strictObject({ type: z.literal("input_text"), text: z.string() })),
});
/** An earlier reply a response was given: its text, or what it refused. */
const assistantInputItemSchema = messageItemSchema.extend({
  content: z.array(z.union([outputTextSchema, z.strictObject({ type: z.literal("refusal"), refusal: z.string() })])),
});
const functionCallOutputItemSchema = z.strictObject({
  id: z.string(),
  type: z.literal("function_call_output"),
  status: itemStatus,
  call_id: z.string(),
  output: z.union([z.string(), z.array(z.strictObject({ type: z.literal("input_text"), text: z.string() }))]),
});
/** A compaction (`/v1/responses/compact`): earlier turns' summary, sealed, for a later request to continue from. */
const compactionItemSchema = z.strictObject({
  id: z.string(),
  type: z.literal("compaction"),
  encrypted_content: z.string(),
});
const listedItemSchema = z.union([
  inputMessageItemSchema,
  assistantInputItemSchema,
  functionCallItemSchema,
  functionCallOutputItemSchema,
  fileSearchCallItemSchema,
  compactionItemSchema,
]);

/** `GET /v1/responses/{id}/input_items`: a page of the items a response was given, a cursor page as OpenAI's lists are. */
export const inputItemListSchema = cursorPageOf(listedItemSchema);

const responseUsageSchema = z.strictObject({
  input_tokens: z.number().int().min(0),
  input_tokens_details: z.strictObject({ cached_tokens: z.number().int().min(0) }),
  output_tokens: z.number().int().min(0),
  output_tokens_details: z.strictObject({ reasoning_tokens: z.number().int().min(0) }),
  total_tokens: z.number().int().min(0),
});

export const responseSchema = z.strictObject({
  id: z.string(),
  object: z.literal("response"),
  created_at: z.number().int(),
  /** When it completed (Unix seconds); null until then, and for an incomplete one. */
  completed_at: z.number().int().nullable(),
  status: z.enum(["in_progress", "completed", "incomplete"]),
  background: z.boolean(),
  error: z.null(),
  incomplete_details: z.strictObject({ reason: z.enum(["max_output_tokens", "content_filter"]) }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.number().int().nullable(),
  max_tool_calls: z.number().int().nullable(),
  model: z.string(),
  output: z.array(outputItemSchema),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.string().nullable(),
  prompt_cache_key: z.string().nullable(),
  reasoning: z.strictObject({ effort: z.null(), summary: z.null() }),
  safety_identifier: z.string().nullable(),
  service_tier: z.string(),
  store: z.boolean(),
  temperature: z.number(),
  presence_penalty: z.number(),
  frequency_penalty: z.number(),
  text: z.strictObject({ format: z.record(z.string(), z.unknown()) }),
  tool_choice: z.unknown(),
  tools: z.array(z.record(z.string(), z.unknown())),
  top_logprobs: z.number().int(),
  top_p: z.number(),
  truncation: z.enum(["auto", "disabled"]),
  usage: responseUsageSchema.nullable(),
  user: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
  conversation: z.strictObject({ id: z.string() }).optional(),
});

/**
 * `POST /v1/responses/compact`'s answer: the conversation made shorter, the user's messages kept
 * and the rest standing as one compaction item, with what making it used.
 */
export const compactedResponseSchema = z.strictObject({
  id: z.string(),
  object: z.literal("response.compaction"),
  created_at: z.number().int(),
  output: z.array(z.union([inputMessageItemSchema, compactionItemSchema])),
  usage: responseUsageSchema,
});

const sequenced = { sequence_number: z.number().int().min(0) };
const inItem = { item_id: z.string(), output_index: z.number().int().min(0) };
const inPart = { ...inItem, content_index: z.number().int().min(0) };

/** Every event a streamed response sends, in the order they come for each item. */
export const responseEventSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.enum(["response.created", "response.in_progress", "response.completed", "response.incomplete"]),
    response: responseSchema,
    ...sequenced,
  }),
  z.strictObject({
    type: z.enum(["response.output_item.added", "response.output_item.done"]),
    output_index: z.number().int().min(0),
    item: outputItemSchema,
    ...sequenced,
  }),
  z.strictObject({
    type: z.enum(["response.content_part.added", "response.content_part.done"]),
    ...inPart,
    part: outputTextSchema,
    ...sequenced,
  }),
  z.strictObject({
    type: z.literal("response.output_text.delta"),
    ...inPart,
    delta: z.string(),
    logprobs: z.array(outputLogprob),
    ...sequenced,
  }),
  z.strictObject({
    type: z.literal("response.output_text.done"),
    ...inPart,
    text: z.string(),
    logprobs: z.array(outputLogprob),
    ...sequenced,
  }),
  z.strictObject({
    type: z.literal("response.function_call_arguments.delta"),
    ...inItem,
    delta: z.string(),
    ...sequenced,
  }),
  z.strictObject({
    type: z.literal("response.function_call_arguments.done"),
    ...inItem,
    name: z.string(),
    arguments: z.string(),
    ...sequenced,
  }),
  z.strictObject({
    type: z.enum([
      "response.file_search_call.in_progress",
      "response.file_search_call.searching",
      "response.file_search_call.completed",
    ]),
    ...inItem,
    ...sequenced,
  }),
  z.strictObject({
    type: z.literal("response.output_text.annotation.added"),
    ...inPart,
    annotation_index: z.number().int().min(0),
    annotation: fileCitationSchema,
    ...sequenced,
  }),
  z.strictObject({
    type: z.literal("error"),
    code: z.string().nullable(),
    message: z.string(),
    param: z.string().nullable(),
    ...sequenced,
  }),
]);

export type ResponseObject = z.infer<typeof responseSchema>;
export type ResponseEvent = z.infer<typeof responseEventSchema>;
export type OutputItem = z.infer<typeof outputItemSchema>;
export type OutputText = z.infer<typeof outputTextSchema>;
export type FileCitation = z.infer<typeof fileCitationSchema>;
export type FileSearchCallItem = z.infer<typeof fileSearchCallItemSchema>;
export type OutputLogprob = z.infer<typeof outputLogprob>;
export type ListedItem = z.infer<typeof listedItemSchema>;
export type InputItemList = z.infer<typeof inputItemListSchema>;
export type CompactedResponse = z.infer<typeof compactedResponseSchema>;

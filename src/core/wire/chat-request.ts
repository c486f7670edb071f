/**
 * The chat completions request (`POST /v1/chat/completions`): messages, tools, response
 * formats and every field OpenAI takes. A strict object: an argument we do not know is refused
 * with 400 naming it, as the hosted API does, rather than silently ignored.
 */
import { z } from "zod";
import { characters, dictionary, list } from "./collections.js";
import { assistantContent, content, functionName, sampling, toolCallSchema } from "./shared.js";

/**
 * A participant's `name`: letters, digits, `_` and `-`, as OpenAI requires (its 400 quotes the
 * pattern; a space is the usual mistake).
 */
const participantName = z
  .string()
  .regex(/^[a-zA-Z0-9_-]+$/)
  .optional();

const systemMessage = z.strictObject({
  role: z.enum(["system", "developer"]),
  content,
  name: participantName,
});
const userMessage = z.strictObject({ role: z.literal("user"), content, name: participantName });
/**
 * A tool call given back in an assistant turn. openai-python's `.parse()` returns calls that carry
 * `parsed_arguments` (and a message that carries `parsed`), and its docs append that message to
 * the history as it is: taken, and not read (the arguments and the content say the same).
 */
const toolCallSentBack = z.strictObject({
  ...toolCallSchema.shape,
  function: z.strictObject({ ...toolCallSchema.shape.function.shape, parsed_arguments: z.unknown().optional() }),
});

const assistantMessage = z.strictObject({
  role: z.literal("assistant"),
  content: assistantContent.nullish(),
  name: participantName,
  tool_calls: list(toolCallSentBack).optional(),
  refusal: z.string().nullish(),
  // A reply's own fields, as clients send a reply back: not read.
  parsed: z.unknown().optional(),
  annotations: z.array(z.unknown()).nullish(),
  // OpenAI's audio reply reference and the deprecated call; none here, so only their absence.
  audio: z.null().optional(),
  function_call: z.null().optional(),
});
const toolMessage = z.strictObject({ role: z.literal("tool"), content, tool_call_id: z.string().min(1) });

/** A reply's verbosity, as OpenAI names them. */
export const verbosity = z.enum(["low", "medium", "high"]);

/** A metadata value: at most 512 characters, counted as OpenAI counts them (an emoji is one). */
export const metadataValue = z.string().superRefine((text, context) => {
  if (characters(text) > 512) context.addIssue({ code: "too_big", origin: "string", maximum: 512, inclusive: true });
});

const chatMessageSchema = z.discriminatedUnion("role", [systemMessage, userMessage, assistantMessage, toolMessage]);

/**
 * A JSON Schema object as the client sent it. Not `z.record`, which copies the object key by key:
 * a `__proto__` key would then set the copy's prototype and vanish instead of being refused.
 */
export const jsonSchemaObject = z.custom<Record<string, unknown>>(
  (value) => typeof value === "object" && value !== null && !Array.isArray(value),
  { message: "expected a JSON Schema object" },
);

const toolSchema = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: functionName,
    description: z.string().optional(),
    parameters: jsonSchemaObject.optional(),
    strict: z.boolean().nullish(),
  }),
});

/** A tool by name, as `allowed_tools` lists it: Chat Completions' form, or the Responses API's flat one. */
const toolReference = z.union([
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string() }) }),
  z.strictObject({ type: z.literal("function"), name: z.string() }),
]);

const toolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string() }) }),
  // Calls limited to some of the tools; the handler narrows `tools` to them (endpoints/chat/allowed-tools.ts).
  z.strictObject({
    type: z.literal("allowed_tools"),
    allowed_tools: z.strictObject({ mode: z.enum(["auto", "required"]), tools: list(toolReference, { min: 1 }) }),
  }),
]);

const responseFormatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    json_schema: z.strictObject({
      name: functionName,
      description: z.string().optional(),
      schema: jsonSchemaObject.optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

export const chatCompletionRequestSchema = z.strictObject({
  model: z.string().min(1),
  messages: list(chatMessageSchema, { min: 1 }),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  response_format: responseFormatSchema.nullish(),
  // OpenAI's limits: 1 to 128 functions.
  tools: list(toolSchema, { min: 1, max: 128 }).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  // OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512.
  metadata: dictionary(metadataValue, { maxEntries: 16, maxKeyLength: 64 }).nullish(),
  // Honoured: the completion is kept for the stored-completions endpoints (endpoints/stored/completions.ts).
  store: z.boolean().nullish(),
  service_tier: z.enum(["auto", "default", "flex", "scale", "priority", "fast"]).nullish(),
  prompt_cache_key: z.string().nullish(),
  // Caching hints: taken, and not needed: the device's engines reuse the prompt prefix they last
  // decoded without being asked (usage.prompt_tokens_details.cached_tokens says how much), and
  // an upstream is sent them as they came.
  prompt_cache_options: z
    .strictObject({ mode: z.enum(["implicit", "explicit"]).optional(), ttl: z.literal("30m").optional() })
    .nullish(),
  prompt_cache_retention: z.enum(["in_memory", "in-memory", "24h"]).nullish(),
  safety_identifier: z.string().nullish(),
  modalities: list(z.literal("text")).nullish(),
  prediction: z.strictObject({ type: z.literal("content"), content }).nullish(),
  // How long a reply is: these models take only OpenAI's default, `medium` (the handler says so).
  verbosity: verbosity.nullish(),
  // Known to OpenAI, refused for these models in OpenAI's words by the handler.
  reasoning_effort: z.unknown().optional(),
  audio: z.unknown().optional(),
  web_search_options: z.unknown().optional(),
  moderation: z.unknown().optional(),
  ...sampling,
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/**
 * OpenAI's wire objects, snake_case, as zod schemas. This is the only module that knows
 * the wire shapes; everything past the HTTP boundary uses our own camelCase types.
 *
 * Requests are strict objects: an argument we do not know is refused with 400 naming it,
 * as the hosted API does, rather than silently ignored.
 */
import { z } from "zod";

// ---------------------------------------------------------------- shared pieces

const textPart = z.strictObject({ type: z.literal("text"), text: z.string() });
/** Parts the hosted API takes for models with vision or audio; checked here, refused by the handler with OpenAI's message. */
const mediaPart = z.looseObject({ type: z.enum(["image_url", "input_audio", "file"]) });
const content = z.union([z.string(), z.array(z.union([textPart, mediaPart]))]);

const stopSchema = z.union([z.string(), z.array(z.string()).max(4)]);
// include_obfuscation: accepted; the padding it turns on guards against a network observer
// reading token lengths, and these streams never leave the device.
const streamOptions = z.strictObject({
  include_usage: z.boolean().optional(),
  include_obfuscation: z.boolean().optional(),
});

const functionName = z
  .string()
  .regex(/^[a-zA-Z0-9_-]{1,64}$/, "must be 1-64 characters of a-z, A-Z, 0-9, underscores and dashes");

const toolCallSchema = z.strictObject({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string().min(1), arguments: z.string() }),
});

// ---------------------------------------------------------------- chat completions request

const systemMessage = z.strictObject({
  role: z.enum(["system", "developer"]),
  content,
  name: z.string().optional(),
});
const userMessage = z.strictObject({ role: z.literal("user"), content, name: z.string().optional() });
const assistantMessage = z.strictObject({
  role: z.literal("assistant"),
  content: content.nullish(),
  name: z.string().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  refusal: z.string().nullish(),
});
const toolMessage = z.strictObject({ role: z.literal("tool"), content, tool_call_id: z.string().min(1) });

const chatMessageSchema = z.discriminatedUnion("role", [systemMessage, userMessage, assistantMessage, toolMessage]);

/**
 * A JSON Schema object as the client sent it. Not `z.record`, which copies the object key by key:
 * a `__proto__` key would then set the copy's prototype and vanish instead of being refused.
 */
const jsonSchemaObject = z.custom<Record<string, unknown>>(
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

const toolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string() }) }),
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

/** Sampling fields common to both generation endpoints, with OpenAI's ranges. */
const sampling = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions.nullish(),
  stop: stopSchema.nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  seed: z.number().int().nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  user: z.string().optional(),
  // Token ids (as strings) to a bias in [-100, 100]; ids beyond the vocabulary are refused by the handler.
  logit_bias: z.record(z.string().regex(/^\d+$/, "keys must be token ids"), z.number().min(-100).max(100)).nullish(),
};

export const chatCompletionRequestSchema = z.strictObject({
  model: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  response_format: responseFormatSchema.nullish(),
  tools: z.array(toolSchema).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  // OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512.
  metadata: z
    .record(
      z.string().max(64, "keys must be at most 64 characters"),
      z.string().max(512, "values must be at most 512 characters"),
    )
    .refine((value) => Object.keys(value).length <= 16, "at most 16 key-value pairs")
    .nullish(),
  // Accepted; this API keeps no completions for later retrieval (there is no stored-completions endpoint).
  store: z.boolean().nullish(),
  service_tier: z.enum(["auto", "default", "flex", "scale", "priority"]).nullish(),
  prompt_cache_key: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  modalities: z.array(z.literal("text")).nullish(),
  prediction: z.strictObject({ type: z.literal("content"), content }).nullish(),
  // Known to OpenAI, refused for these models in OpenAI's words by the handler.
  reasoning_effort: z.unknown().optional(),
  audio: z.unknown().optional(),
  verbosity: z.unknown().optional(),
  web_search_options: z.unknown().optional(),
  ...sampling,
});

// ---------------------------------------------------------------- legacy completions request

export const completionRequestSchema = z.strictObject({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1)]),
  max_tokens: z.number().int().min(1).nullish(),
  echo: z.boolean().nullish(),
  // Known to OpenAI, refused for these models in OpenAI's words by the handler (insertion needs a fill-in-the-middle model).
  suffix: z.string().nullish(),
  best_of: z.number().int().min(1).max(20).nullish(),
  // The legacy form: how many alternatives to list per token, up to 5.
  logprobs: z.union([z.literal(false), z.number().int().min(0).max(5)]).nullish(),
  ...sampling,
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
export type CompletionRequest = z.infer<typeof completionRequestSchema>;
export type ChatMessage = z.infer<typeof chatMessageSchema>;

// ---------------------------------------------------------------- responses

const finishReasonSchema = z.enum(["stop", "length", "tool_calls", "content_filter", "function_call"]);

const usageSchema = z.strictObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
  /** Present when part of the prompt was a prefix the engine already held (its KV cache); those tokens are in `prompt_tokens` too. */
  prompt_tokens_details: z.strictObject({ cached_tokens: z.number().int().min(0) }).optional(),
});

/** One generated token's log probability, and the most likely alternatives at its position. */
const alternativeSchema = z.strictObject({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int()).nullable(),
});
const tokenLogprobSchema = z.strictObject({
  ...alternativeSchema.shape,
  top_logprobs: z.array(alternativeSchema),
});
/** A chat choice's `logprobs` when asked for: its content tokens (no refusals here). */
const chatLogprobsSchema = z.strictObject({
  content: z.array(tokenLogprobSchema).nullable(),
  refusal: z.array(tokenLogprobSchema).nullable(),
});
/** A legacy completion choice's `logprobs`: parallel lists, the alternatives as token → logprob. */
const legacyLogprobsSchema = z.strictObject({
  tokens: z.array(z.string()),
  token_logprobs: z.array(z.number()),
  top_logprobs: z.array(z.record(z.string(), z.number())),
  text_offset: z.array(z.number().int()),
});

/** What every generation response and chunk carries besides its choices. */
const envelope = {
  id: z.string(),
  created: z.number().int(),
  model: z.string(),
  system_fingerprint: z.string().nullable(),
};

export const chatCompletionSchema = z.strictObject({
  ...envelope,
  service_tier: z.string().optional(),
  object: z.literal("chat.completion"),
  choices: z.array(
    z.strictObject({
      index: z.number().int(),
      message: z.strictObject({
        role: z.literal("assistant"),
        content: z.string().nullable(),
        refusal: z.null(),
        tool_calls: z.array(toolCallSchema).optional(),
        /** The deprecated form, for requests that used `functions`. */
        function_call: z.strictObject({ name: z.string(), arguments: z.string() }).optional(),
      }),
      logprobs: chatLogprobsSchema.nullable(),
      finish_reason: finishReasonSchema,
    }),
  ),
  usage: usageSchema,
});

const toolCallDeltaSchema = z.strictObject({
  index: z.number().int(),
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.strictObject({ name: z.string().optional(), arguments: z.string().optional() }).optional(),
});

export const chatCompletionChunkSchema = z.strictObject({
  ...envelope,
  service_tier: z.string().optional(),
  object: z.literal("chat.completion.chunk"),
  choices: z.array(
    z.strictObject({
      index: z.number().int(),
      delta: z.strictObject({
        role: z.literal("assistant").optional(),
        content: z.string().nullable().optional(),
        refusal: z.null().optional(),
        tool_calls: z.array(toolCallDeltaSchema).optional(),
        function_call: z.strictObject({ name: z.string().optional(), arguments: z.string().optional() }).optional(),
      }),
      logprobs: chatLogprobsSchema.nullable(),
      finish_reason: finishReasonSchema.nullable(),
    }),
  ),
  usage: usageSchema.nullable().optional(),
});

export const textCompletionSchema = z.strictObject({
  ...envelope,
  object: z.literal("text_completion"),
  choices: z.array(
    z.strictObject({
      index: z.number().int(),
      text: z.string(),
      logprobs: legacyLogprobsSchema.nullable(),
      finish_reason: finishReasonSchema.nullable(),
    }),
  ),
  usage: usageSchema.nullable().optional(),
});

export const modelSchema = z.strictObject({
  id: z.string(),
  object: z.literal("model"),
  created: z.number().int(),
  owned_by: z.string(),
});

export const modelListSchema = z.strictObject({ object: z.literal("list"), data: z.array(modelSchema) });

export const modelInfoSchema = z.strictObject({
  id: z.string(),
  object: z.literal("model.info"),
  family: z.string(),
  context_window: z.number().int(),
  pricing: z.strictObject({
    currency: z.literal("USD"),
    input_per_1m_tokens: z.number(),
    output_per_1m_tokens: z.number(),
    input_nano_usd_per_token: z.number().int(),
    output_nano_usd_per_token: z.number().int(),
  }),
  /** The engine that serves the model on this device, and why. */
  engine: z.string(),
  engine_reason: z.string(),
  build: z
    .strictObject({
      /** `mlc` (web-llm) or `gguf` (llama.cpp). */
      format: z.enum(["mlc", "gguf"]),
      model_id: z.string(),
      model_url: z.string(),
      /** The compiled model library; null for a GGUF build. */
      model_lib_url: z.string().nullable(),
      quantization: z.string(),
      required_features: z.array(z.string()),
      estimated_memory_mb: z.number(),
      /** The weights' download size in MB; null where the catalogue does not say. */
      download_mb: z.number().nullable(),
    })
    .nullable(),
  builds: z.array(z.string()),
  gguf_builds: z.array(z.string()),
  downloaded: z.boolean(),
  loaded: z.boolean(),
  /** llama.cpp's CPU threads for the loaded model; null when it is not loaded there. */
  threads: z.number().int().nullable(),
  runnable: z.strictObject({ ok: z.boolean(), reason: z.string().nullable() }),
  /** Where a request for this model goes now, and why; the same as the `X-Inference-Route` headers. */
  routing: z.strictObject({
    policy: z.enum(["local", "remote", "auto"]),
    target: z.enum(["local", "remote"]),
    reason: z.string(),
    upstreams: z.array(z.string()),
  }),
  /**
   * Where a reply is generated now: this device's engine, or the upstreams' hosts in failover
   * order; the same as each response's `X-Inference-Generated-By` (which names the one used).
   */
  generated_by: z.strictObject({
    where: z.enum(["device", "upstream"]),
    engine: z.string().nullable(),
    hosts: z.array(z.string()),
  }),
});

/**
 * What an upstream engine sends, read loosely: these servers add fields of their own, which pass
 * through untouched. Only what forwarding reads is checked.
 */
const upstreamMessageSchema = z.looseObject({
  content: z.string().nullish(),
  tool_calls: z
    .array(
      z.looseObject({
        function: z.looseObject({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
      }),
    )
    .nullish(),
});
const upstreamChoiceSchema = z.looseObject({
  index: z.number().int().nullish(),
  text: z.string().nullish(),
  delta: upstreamMessageSchema.nullish(),
  message: upstreamMessageSchema.nullish(),
  logprobs: z.unknown().optional(),
});
const upstreamUsageSchema = z.looseObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0).optional(),
});
export const upstreamChunkSchema = z.looseObject({
  id: z.string().optional(),
  object: z.string().optional(),
  created: z.number().optional(),
  system_fingerprint: z.string().nullish(),
  choices: z.array(upstreamChoiceSchema).default([]),
  usage: upstreamUsageSchema.nullish(),
});
export const upstreamCompletionSchema = z.looseObject({
  choices: z.array(upstreamChoiceSchema),
  usage: upstreamUsageSchema.nullish(),
});
export type UpstreamChoice = z.infer<typeof upstreamChoiceSchema>;
export type UpstreamUsage = z.infer<typeof upstreamUsageSchema>;

export const errorBodySchema = z.strictObject({
  error: z.strictObject({
    message: z.string(),
    type: z.string(),
    code: z.string().nullable(),
    param: z.string().nullable(),
  }),
});

export type Usage = z.infer<typeof usageSchema>;
export type TokenLogprobWire = z.infer<typeof tokenLogprobSchema>;
export type LegacyLogprobs = z.infer<typeof legacyLogprobsSchema>;
export type ChatCompletion = z.infer<typeof chatCompletionSchema>;
export type ChatCompletionChunk = z.infer<typeof chatCompletionChunkSchema>;
export type TextCompletion = z.infer<typeof textCompletionSchema>;
export type ModelObject = z.infer<typeof modelSchema>;
export type ModelInfo = z.infer<typeof modelInfoSchema>;

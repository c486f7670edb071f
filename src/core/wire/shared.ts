/**
 * Pieces OpenAI's wire objects share: content parts, stop sequences, stream options, tool calls,
 * the sampling fields, finish reasons, usage, log probabilities, and the envelope of every
 * generation response.
 *
 * This folder (one module per OpenAI object) is the only place that knows the wire shapes, in
 * snake_case; everything past the HTTP boundary uses our own camelCase types.
 */
import { z } from "zod";
import { dictionary, list } from "./collections.js";

/** A text part; `prompt_cache_breakpoint` is a caching hint, taken and not needed (see `prompt_cache_options`). */
const textPart = z.strictObject({
  type: z.literal("text"),
  text: z.string(),
  prompt_cache_breakpoint: z.strictObject({ mode: z.literal("explicit") }).optional(),
});
/** Parts the hosted API takes for models with vision or audio; checked here, refused by the handler with OpenAI's message. */
const mediaPart = z.looseObject({ type: z.enum(["image_url", "input_audio", "file"]) });
/** An assistant turn's refusal, as OpenAI returns it and clients send back in the history. */
const refusalPart = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });
// OpenAI's content arrays hold one part at least: `[]` is its `empty_array` refusal.
export const content = z.union([z.string(), list(z.discriminatedUnion("type", [textPart, mediaPart]), { min: 1 })]);
export const assistantContent = z.union([
  z.string(),
  list(z.discriminatedUnion("type", [textPart, refusalPart, mediaPart]), { min: 1 }),
]);

const stopSchema = z.union([z.string(), list(z.string(), { max: 4 })]);
// include_obfuscation: accepted; the padding it turns on guards against a network observer
// reading token lengths, and these streams never leave the device.
const streamOptions = z.strictObject({
  include_usage: z.boolean().optional(),
  include_obfuscation: z.boolean().optional(),
});

/**
 * OpenAI's rule for function and schema names: the pattern, then at most 64 characters (the
 * pattern first, so a name the length refuses is ASCII, its length in characters what zod counts).
 */
export const functionName = z
  .string()
  .regex(/^[a-zA-Z0-9_-]+$/)
  .max(64);

export const toolCallSchema = z.strictObject({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string().min(1), arguments: z.string() }),
});

const notTokenId = (key: string) => !/^\d+$/.test(key);

/** `logit_bias`'s keys: one that is not a token id (`__proto__` too) is refused in OpenAI's words, whole. */
const tokenIdKeys = z.custom<unknown>(
  (value) => typeof value !== "object" || value === null || !Object.keys(value).some(notTokenId),
  {
    error: (issue) =>
      `Invalid key in 'logit_bias': ${String(Object.keys(issue.input as object).find(notTokenId)).slice(0, 100)}. ` +
      "You should only be submitting non-negative integers.",
    params: { whole: true },
  },
);

/**
 * A seed: OpenAI's are signed 64-bit integers, past what a double holds exactly (zod's `int()`
 * stops at 2⁵³). The bounds are checked on the doubles the ends parse to (2⁶³ − 1 parses as 2⁶³),
 * and named as OpenAI documents them.
 */
const seedSchema = z.number().superRefine((value, context) => {
  if (!Number.isInteger(value)) context.addIssue({ code: "invalid_type", expected: "int", input: value });
  else if (value > 2 ** 63)
    context.addIssue({
      code: "too_big",
      origin: "number",
      maximum: 9223372036854775807n,
      inclusive: true,
      input: value,
    });
  else if (value < -(2 ** 63))
    context.addIssue({
      code: "too_small",
      origin: "number",
      minimum: -9223372036854775808n,
      inclusive: true,
      input: value,
    });
});

/** Sampling fields common to both generation endpoints, with OpenAI's ranges. */
export const sampling = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions.nullish(),
  stop: stopSchema.nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  seed: seedSchema.nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  user: z.string().optional(),
  // Token ids (as strings) to a bias in [-100, 100]; ids beyond the vocabulary are refused by the handler.
  // OpenAI biases at most 1,024 tokens a request.
  logit_bias: tokenIdKeys.pipe(dictionary(z.number().min(-100).max(100), { maxEntries: 1024 })).nullish(),
};

export const finishReasonSchema = z.enum(["stop", "length", "tool_calls", "content_filter", "function_call"]);

export const usageSchema = z.strictObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
  /**
   * `cached_tokens`: the part of the prompt that was a prefix the engine already held (its KV
   * cache); those tokens are in `prompt_tokens` too. A legacy completion has it only when some were.
   */
  prompt_tokens_details: z
    .strictObject({ cached_tokens: z.number().int().min(0), audio_tokens: z.literal(0).optional() })
    .optional(),
  /** A chat completion's: none of these kinds of token is produced here. */
  completion_tokens_details: z
    .strictObject({
      reasoning_tokens: z.literal(0),
      audio_tokens: z.literal(0),
      accepted_prediction_tokens: z.literal(0),
      rejected_prediction_tokens: z.literal(0),
    })
    .optional(),
});

/**
 * A chat completion's usage as OpenAI writes it, with both token details, zero for the kinds of
 * token this API has none of (audio, reasoning, predicted output): code that reads
 * `usage.prompt_tokens_details.cached_tokens`, as OpenAI's prompt-caching guide does, works here.
 */
export function withTokenDetails<Counts extends Usage>(usage: Counts): Counts {
  return {
    ...usage,
    prompt_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

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
export const chatLogprobsSchema = z.strictObject({
  content: z.array(tokenLogprobSchema).nullable(),
  refusal: z.array(tokenLogprobSchema).nullable(),
});
/** A legacy completion choice's `logprobs`: parallel lists, the alternatives as token → logprob. */
export const legacyLogprobsSchema = z.strictObject({
  tokens: z.array(z.string()),
  token_logprobs: z.array(z.number()),
  top_logprobs: z.array(z.record(z.string(), z.number())),
  text_offset: z.array(z.number().int()),
});

/**
 * Tokens in the legacy form; `offset` is where their text starts in the choice's text (after an
 * echoed prompt, after the pieces streamed before).
 */
export function legacyLogprobsOf(
  tokens: readonly { token: string; logprob: number; alternatives: readonly { token: string; logprob: number }[] }[],
  offset: number,
): LegacyLogprobs {
  const textOffset: number[] = [];
  let position = offset;
  for (const token of tokens) {
    textOffset.push(position);
    position += token.token.length;
  }
  return {
    tokens: tokens.map((token) => token.token),
    token_logprobs: tokens.map((token) => token.logprob),
    top_logprobs: tokens.map((token) =>
      Object.fromEntries(token.alternatives.map((alternative) => [alternative.token, alternative.logprob])),
    ),
    text_offset: textOffset,
  };
}

/** What every generation response and chunk carries besides its choices. */
export const envelope = {
  id: z.string(),
  created: z.number().int(),
  model: z.string(),
  system_fingerprint: z.string().nullable(),
};

export type Usage = z.infer<typeof usageSchema>;
export type TokenLogprobWire = z.infer<typeof tokenLogprobSchema>;
export type LegacyLogprobs = z.infer<typeof legacyLogprobsSchema>;

/**
 * The items of OpenAI's four forms of a prompt or an input (a string, strings, token ids, or
 * lists of token ids), one per prompt, and whether it was one item sent bare (a string, or ids).
 */
export function itemsOfFourForms(value: string | string[] | number[] | number[][]): {
  items: (string | number[])[];
  single: boolean;
} {
  if (typeof value === "string") return { items: [value], single: true };
  return typeof value[0] === "number"
    ? { items: [value as number[]], single: true }
    : { items: value as string[] | number[][], single: false };
}

/** A cursor page of `item`s, as OpenAI's list endpoints answer. */
export const cursorPageOf = <Item extends z.ZodType>(item: Item) =>
  z.strictObject({
    object: z.literal("list"),
    data: z.array(item),
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
    has_more: z.boolean(),
  });

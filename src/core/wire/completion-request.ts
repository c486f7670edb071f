/**
 * The legacy completions request (`POST /v1/completions`), strict as the chat request is.
 */
import { z } from "zod";
import { list } from "./collections.js";
import { sampling } from "./shared.js";

/** The most prompts one request may batch. */
const maxPrompts = 2048;

/** A prompt as token ids of the model's tokenizer (checked against its vocabulary by the handler). */
const tokenIds = list(z.number().int(), { min: 1 });

export const completionRequestSchema = z.strictObject({
  model: z.string().min(1),
  // OpenAI's four forms: a string, a list of strings, token ids, or a list of token-id lists.
  // Each prompt is a generation (times n, or best_of); OpenAI's batch bound for arrays of inputs.
  prompt: z.union([
    z.string(),
    list(z.string(), { min: 1, max: maxPrompts }),
    tokenIds,
    list(tokenIds, { min: 1, max: maxPrompts }),
  ]),
  max_tokens: z.number().int().min(1).nullish(),
  echo: z.boolean().nullish(),
  // Known to OpenAI, refused for these models in OpenAI's words by the handler (insertion needs a fill-in-the-middle model).
  suffix: z.string().nullish(),
  best_of: z.number().int().min(1).max(20).nullish(),
  // The legacy form: how many alternatives to list per token, up to 5.
  logprobs: z.union([z.literal(false), z.number().int().min(0).max(5)]).nullish(),
  ...sampling,
});

export type CompletionRequest = z.infer<typeof completionRequestSchema>;

/**
 * The legacy completions request (`POST /v1/completions`), strict as the chat request is.
 */
import { z } from "zod";
import { sampling } from "./shared.js";

/** The most prompts one request may batch. */
const maxPrompts = 2048;

/**
 * OpenAI's token-id forms of `prompt` (`[1, 2]`, `[[1, 2], [3]]`), recognised to be refused with
 * the reason: a prompt reaches the engines as text, tokenized by this API with the model's own
 * tokenizer, so control tokens are never taken from a caller.
 */
const tokenIdPrompt = z.array(z.union([z.number().int(), z.array(z.number().int())])).pipe(
  z.custom<never>(() => false, {
    error:
      "Invalid value for 'prompt': token-id prompts are not supported; this API tokenizes each prompt itself, " +
      "with the model's own tokenizer. Send the prompt as text: a string, or an array of strings.",
    params: { whole: true },
  }),
);

export const completionRequestSchema = z.strictObject({
  model: z.string().min(1),
  // Each prompt is a generation (times n, or best_of); OpenAI's batch bound for arrays of inputs.
  prompt: z.union([z.string(), z.array(z.string()).min(1).max(maxPrompts), tokenIdPrompt]),
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

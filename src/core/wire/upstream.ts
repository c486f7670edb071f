import { z } from "zod";
import { list } from "./collections.js";

/**
 * What an upstream engine sends, read loosely: these servers add fields of their own, which pass
 * through untouched. Only what forwarding reads is checked.
 */
const upstreamMessageSchema = z.looseObject({
  content: z.string().nullish(),
  tool_calls: z
    .array(
      z.looseObject({
        index: z.number().int().min(0).nullish(),
        id: z.string().nullish(),
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
  choices: list(upstreamChoiceSchema).default([]),
  usage: upstreamUsageSchema.nullish(),
});
export const upstreamCompletionSchema = z.looseObject({
  choices: list(upstreamChoiceSchema),
  usage: upstreamUsageSchema.nullish(),
});
/**
 * A legacy completion's `logprobs` in the chat form, as llama-server sends them: read to be
 * written in the legacy form. Only the tokens and their log probabilities are read.
 */
export const upstreamChatLogprobsSchema = z.looseObject({
  content: z.array(
    z.looseObject({
      token: z.string(),
      logprob: z.number(),
      top_logprobs: z.array(z.looseObject({ token: z.string(), logprob: z.number() })).default([]),
    }),
  ),
});
export type UpstreamChoice = z.infer<typeof upstreamChoiceSchema>;
export type UpstreamUsage = z.infer<typeof upstreamUsageSchema>;

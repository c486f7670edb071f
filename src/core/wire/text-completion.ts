/**
 * The legacy completion (`text_completion`), whole or as a streamed chunk.
 */
import { z } from "zod";
import { envelope, finishReasonSchema, legacyLogprobsSchema, usageSchema } from "./shared.js";

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

export type TextCompletion = z.infer<typeof textCompletionSchema>;

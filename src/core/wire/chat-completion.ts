/**
 * The chat completion (`chat.completion`) and its streamed chunk (`chat.completion.chunk`).
 */
import { z } from "zod";
import { chatLogprobsSchema, envelope, finishReasonSchema, toolCallSchema, usageSchema } from "./shared.js";

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

export type ChatCompletion = z.infer<typeof chatCompletionSchema>;
export type ChatCompletionChunk = z.infer<typeof chatCompletionChunkSchema>;

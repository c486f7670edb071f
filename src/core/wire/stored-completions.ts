/**
 * The stored chat completions endpoints (`store: true` on a chat request): their queries, the
 * metadata update, and what they answer: a completion with its metadata, a cursor page of
 * completions or of a completion's messages, and the deletion.
 */
import { z } from "zod";
import { dictionary } from "./collections.js";
import { chatCompletionSchema } from "./chat-completion.js";
import { metadataValue } from "./chat-request.js";
import { cursorPageOf, toolCallSchema } from "./shared.js";

const metadata = dictionary(metadataValue, { maxEntries: 16, maxKeyLength: 64 });

/** A cursor page's fields, as OpenAI's list queries take them; other query parameters are ignored. */
const pageQuery = {
  after: z.string().min(1).optional(),
  limit: z.number().int().min(1).max(100).default(20),
  order: z.enum(["asc", "desc"]).default("asc"),
};

/** `GET /v1/chat/completions`: an account's stored completions, by `model` and `metadata[key]=value`. */
export const completionsQuerySchema = z.object({
  ...pageQuery,
  model: z.string().min(1).optional(),
  metadata: metadata.default({}),
});

/** `GET /v1/chat/completions/{id}/messages`. */
export const completionMessagesQuerySchema = z.object(pageQuery);

/** `POST /v1/chat/completions/{id}`: the completion's metadata, replaced. */
export const completionUpdateSchema = z.strictObject({ metadata: metadata.nullable() });

/** A stored completion as these endpoints answer it: as it was answered, with its metadata. */
export const storedCompletionSchema = chatCompletionSchema.extend({ metadata: z.record(z.string(), z.string()) });

/** A message of the request that made a stored completion; `{completion id}-{index}` is its id. */
const storedMessageSchema = z.strictObject({
  id: z.string(),
  role: z.enum(["developer", "system", "user", "assistant", "tool", "function"]),
  content: z.string().nullable(),
  content_parts: z.array(z.record(z.string(), z.unknown())).nullable(),
  name: z.string().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  tool_call_id: z.string().optional(),
});

export const storedCompletionListSchema = cursorPageOf(storedCompletionSchema);
export const storedMessageListSchema = cursorPageOf(storedMessageSchema);

export const completionDeletedSchema = z.strictObject({
  object: z.literal("chat.completion.deleted"),
  id: z.string(),
  deleted: z.literal(true),
});

export type StoredMessage = z.infer<typeof storedMessageSchema>;

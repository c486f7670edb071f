/**
 * The Conversations API (`/v1/conversations`): a conversation's items kept for a Responses
 * request to continue (`conversation`), with its metadata. Its requests, and what it answers: the
 * conversation, its deletion, and pages of its items (the items `input_items` lists, by the same
 * schema).
 */
import { z } from "zod";
import { dictionary, list } from "./collections.js";
import { metadataValue } from "./chat-request.js";
import { includable, inputItem } from "./responses-request.js";

const metadata = dictionary(metadataValue, { maxEntries: 16, maxKeyLength: 64 });
/** OpenAI's bound on the items one request adds to a conversation. */
const items = list(inputItem, { max: 20 });

/** `POST /v1/conversations`: its first items and its metadata, both optional. */
export const conversationCreateSchema = z.strictObject({
  items: items.nullish(),
  metadata: metadata.nullish(),
});

/** `POST /v1/conversations/{id}`: its metadata, replaced. */
export const conversationUpdateSchema = z.strictObject({ metadata: metadata.nullable() });

/** `POST /v1/conversations/{id}/items`: items added at its end. */
export const conversationItemsCreateSchema = z.strictObject({ items: list(inputItem, { min: 1, max: 20 }) });

/** `include` in the query of the item endpoints: what OpenAI can add to items; these have nothing to add. */
export const conversationItemQuerySchema = z.object({ include: list(includable).optional() });

export const conversationSchema = z.strictObject({
  id: z.string(),
  object: z.literal("conversation"),
  created_at: z.number().int(),
  metadata: z.record(z.string(), z.string()),
});

export const conversationDeletedSchema = z.strictObject({
  id: z.string(),
  object: z.literal("conversation.deleted"),
  deleted: z.literal(true),
});

export type Conversation = z.infer<typeof conversationSchema>;

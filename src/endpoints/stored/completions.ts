/**
 * OpenAI's stored chat completions: a chat request with `store: true` is kept for its account as
 * it was answered (a stream's chunks put together), with its messages and metadata, and these
 * endpoints list, read, update and delete what was kept: `GET /v1/chat/completions`,
 * `GET`, `POST` (metadata) and `DELETE /v1/chat/completions/{id}`, and
 * `GET /v1/chat/completions/{id}/messages`.
 */
import { BadRequestError, NotFoundError, quoted } from "../../core/errors/api.js";
import type { StoredCompletionRecord } from "../../accounts/database.js";
import type { ChatCompletionChunk } from "../../core/wire/chat-completion.js";
import {
  completionMessagesQuerySchema,
  completionsQuerySchema,
  completionUpdateSchema,
  type StoredMessage,
} from "../../core/wire/stored-completions.js";
import { CompletionAssembly } from "../chat/chunk-assembly.js";
import type { InferenceRoute } from "../../http/context.js";
import type { EndpointDependencies } from "../dependencies.js";
import { jsonResponse } from "../../http/json-response.js";
import { cursorPage, listQueryOf, pageOf } from "../../http/list-query.js";
import type { Reshape } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";

export const storedCompletionPaths = {
  list: /^\/chat\/completions\/?$/,
  one: /^\/chat\/completions\/(?<id>[^/]+)\/?$/,
  messages: /^\/chat\/completions\/(?<id>[^/]+)\/messages\/?$/,
};

/** Keeps a completion; one that cannot be kept (the storage full) is logged, the answer already given. */
async function kept(save: (completion: unknown) => Promise<void>, completion: unknown): Promise<void> {
  await save(completion).catch((error: unknown) =>
    console.error("[webgpu-inference] a chat completion with store: true could not be kept", error),
  );
}

/** A chunk as a client that did not ask for usage gets it: no `usage` on it, and no usage chunk. */
function withoutUsage(chunk: ChatCompletionChunk): ChatCompletionChunk | null {
  if (chunk.choices.length === 0 && chunk.usage) return null;
  const { usage: _usage, ...rest } = chunk;
  return rest;
}

/**
 * A stored chat request's answer, written as it is and kept once it is whole, under `id`: an
 * upstream's own ids need not be unique, and a kept completion must not replace another. A
 * stream is asked for its usage so that what is kept has it; `usageAsked` says whether the
 * client sees it.
 */
export function storingReshape(
  save: (completion: unknown) => Promise<void>,
  { id, usageAsked }: { id: string; usageAsked: boolean },
): Reshape {
  return {
    whole: async (body) => {
      const completion = { ...(body as object), id };
      await kept(save, completion);
      return completion;
    },
    chunks: async function* (events) {
      const assembly = new CompletionAssembly();
      for await (const event of events) {
        const chunk = { ...(event as ChatCompletionChunk), id };
        assembly.add(chunk);
        const shown = usageAsked ? chunk : withoutUsage(chunk);
        if (shown) yield shown;
      }
      const completion = assembly.completion();
      if (completion) await kept(save, completion);
    },
  };
}

/** A stored completion as the endpoints answer it: as it was answered, with its metadata. */
const answered = (record: StoredCompletionRecord) => ({
  ...(record.completion as { id: string }),
  metadata: record.metadata,
});

const notFound = (id: string) => new NotFoundError(`Chat completion with id '${quoted(id)}' not found.`);

/**
 * A request's message as it is kept: what the listing reads (its role, content, name, calls and
 * the call it answers). What the SDKs send back of an earlier reply (`parsed`, `annotations`,
 * `refusal` beside content) is not read, so not stored.
 */
export function keptMessage(message: object): Record<string, unknown> {
  const fields = ["role", "content", "name", "tool_calls", "tool_call_id"] as const;
  const source = message as Record<string, unknown>;
  const kept = Object.fromEntries(
    fields.filter((field) => source[field] != null).map((field) => [field, source[field]]),
  );
  if (Array.isArray(kept.content))
    kept.content = (kept.content as Record<string, unknown>[]).map((part) =>
      part.type === "refusal" ? { type: "refusal", refusal: part.refusal } : { type: part.type, text: part.text },
    );
  return kept;
}

/** A request message as listed: its text whole, and its parts when it was sent in parts. */
function listedMessage(message: Record<string, unknown>, id: string): StoredMessage {
  const parts = Array.isArray(message.content) ? (message.content as Record<string, unknown>[]) : null;
  const text = (part: Record<string, unknown>) => String(part.text ?? part.refusal ?? "");
  const content = typeof message.content === "string" ? message.content : parts ? parts.map(text).join("") : null;
  const optional = ["name", "tool_calls", "tool_call_id"].filter((field) => message[field] != null);
  return {
    id,
    role: message.role as StoredMessage["role"],
    content,
    content_parts: parts,
    ...Object.fromEntries(optional.map((field) => [field, message[field]])),
  };
}

const answer = (body: unknown) => ({ response: jsonResponse(body) });

/** `GET /v1/chat/completions`: a page of the account's completions, by model and metadata. */
async function listed(dependencies: EndpointDependencies, accountId: string, url: URL) {
  const query = parseWith(completionsQuerySchema, listQueryOf(url));
  const page = await dependencies.completions.page(accountId, query);
  if (!page)
    throw new BadRequestError(
      `Invalid 'after': there is no stored chat completion with id '${quoted(query.after ?? "")}'.`,
      { param: "after", code: "invalid_value" },
    );
  return answer(pageOf(page.records.map(answered), page.hasMore));
}

/** `GET /v1/chat/completions/{id}/messages`: a page of the messages of the request that made it. */
function messagesPage(record: StoredCompletionRecord, url: URL) {
  const query = parseWith(completionMessagesQuerySchema, listQueryOf(url));
  const messages = (record.messages as Record<string, unknown>[]).map((message, index) =>
    listedMessage(message, `${record.id}-${index}`),
  );
  const missing = (after: string) =>
    new BadRequestError(
      `Invalid 'after': chat completion '${quoted(record.id)}' has no message with id '${quoted(after)}'.`,
      { param: "after", code: "invalid_value" },
    );
  return answer(cursorPage(messages, query, missing));
}

/** The stored-completions endpoints, each over the key's account's completions only. */
export function storedCompletionRoutes(dependencies: EndpointDependencies): InferenceRoute[] {
  const stored = dependencies.completions;
  const found = async (accountId: string, id: string) => {
    const record = await stored.completion(accountId, id);
    if (!record) throw notFound(id);
    return record;
  };
  return [
    {
      method: "GET",
      path: storedCompletionPaths.list,
      handler: ({ key, url }) => listed(dependencies, key.accountId, url),
    },
    {
      method: "GET",
      path: storedCompletionPaths.one,
      handler: async ({ key }, { id = "" }) => answer(answered(await found(key.accountId, id))),
    },
    {
      method: "GET",
      path: storedCompletionPaths.messages,
      handler: async ({ key, url }, { id = "" }) => messagesPage(await found(key.accountId, id), url),
    },
    {
      method: "POST",
      path: storedCompletionPaths.one,
      handler: async ({ key, body }, { id = "" }) => {
        const { metadata } = parseWith(completionUpdateSchema, await readJson(body));
        const record = await stored.updateMetadata(key.accountId, id, metadata ?? {});
        if (!record) throw notFound(id);
        return answer(answered(record));
      },
    },
    {
      method: "DELETE",
      path: storedCompletionPaths.one,
      handler: async ({ key }, { id = "" }) => {
        if (!(await stored.remove(key.accountId, id))) throw notFound(id);
        return answer({ object: "chat.completion.deleted", id, deleted: true });
      },
    },
  ];
}

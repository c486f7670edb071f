/**
 * OpenAI's Conversations API: a conversation is created (`POST /v1/conversations`), read, its
 * metadata replaced and deleted (`GET`, `POST`, `DELETE /v1/conversations/{id}`); items are added
 * to it and listed (`POST`, `GET …/items`), read and deleted one at a time (`GET`, `DELETE
 * …/items/{item_id}`). A Responses request's `conversation` answers over its items, and adds its
 * input and output to them once it finishes. Every item has an id unique in its conversation (a
 * cursor and a deletion name one item). Each conversation is the key's account's own.
 */
import { BadRequestError, NotFoundError, quoted } from "../../core/errors/api.js";
import type { ConversationRecord } from "../../accounts/database.js";
import {
  conversationCreateSchema,
  conversationItemQuerySchema,
  conversationItemsCreateSchema,
  conversationUpdateSchema,
  type Conversation,
} from "../../core/wire/conversations.js";
import { inputItemsQuerySchema, type ResponseInputItem } from "../../core/wire/responses-request.js";
import type { InferenceRoute } from "../../http/context.js";
import type { EndpointDependencies } from "../dependencies.js";
import { resolvedItems } from "./item-references.js";
import { jsonResponse } from "../../http/json-response.js";
import { listQueryOf, pageOf } from "../../http/list-query.js";
import { refuseMedia, type ConversationItem } from "../responses/input.js";
import { keptItem, listedItem, newItemId, type Identified } from "../responses/items.js";
import { parseWith, readJson } from "../../http/validate.js";

export const conversationPaths = {
  create: /^\/conversations\/?$/,
  one: /^\/conversations\/(?<id>[^/]+)\/?$/,
  items: /^\/conversations\/(?<id>[^/]+)\/items\/?$/,
  item: /^\/conversations\/(?<id>[^/]+)\/items\/(?<item>[^/]+)\/?$/,
};

export function conversationNotFound(id: string, param: string | null = null): NotFoundError {
  return new NotFoundError(`Conversation with id '${quoted(id)}' not found.`, { param });
}

function itemNotFound(id: string): NotFoundError {
  return new NotFoundError(`Item with id '${quoted(id)}' not found.`);
}

const answer = (body: unknown) => ({ response: jsonResponse(body) });

function conversationOf(record: Pick<ConversationRecord, "id" | "createdAt" | "metadata">): Conversation {
  const { id, metadata } = record;
  return { id, object: "conversation", created_at: Math.floor(record.createdAt / 1000), metadata };
}

/** A new id for an item whose own is missing or taken. */
const freshId = (dependencies: EndpointDependencies) => (item: object) =>
  newItemId(item as ConversationItem, dependencies.newId);

/**
 * Adds items at the end of the account's conversation `id`, each keeping its own id unless the
 * conversation (or an item before it) has it; the items as added. Not found when it is not there.
 */
export async function addedItems(
  dependencies: EndpointDependencies,
  accountId: string,
  id: string,
  items: readonly ConversationItem[],
): Promise<Identified[]> {
  const added = await dependencies.conversations.append(accountId, id, items, freshId(dependencies));
  if (!added) throw conversationNotFound(id);
  return added as Identified[];
}

/**
 * A request's items as a conversation keeps them: text only, each reference replaced by the item
 * it names, and only the fields that are read back.
 */
async function checkedItems(
  dependencies: EndpointDependencies,
  accountId: string,
  items: readonly ResponseInputItem[],
) {
  refuseMedia(items, "items", "every model here");
  return (await resolvedItems(items, accountId, dependencies.responses, "items")).map(keptItem);
}

/** The `include` a query may name: checked, and adding nothing (see core/wire/conversations.ts). */
function checkInclude(url: URL): void {
  const { include } = listQueryOf(url);
  parseWith(conversationItemQuerySchema, include === undefined ? {} : { include });
}

/** `POST /v1/conversations`. */
async function created(dependencies: EndpointDependencies, accountId: string, body: unknown) {
  const request = parseWith(conversationCreateSchema, body);
  const items = await checkedItems(dependencies, accountId, request.items ?? []);
  const record = {
    id: dependencies.newId("conv_"),
    accountId,
    createdAt: dependencies.clock(),
    metadata: request.metadata ?? {},
  };
  await dependencies.conversations.create(record, items, freshId(dependencies));
  return answer(conversationOf(record));
}

/** `GET /v1/conversations/{id}/items`: a page of its items, newest first unless `order` says otherwise. */
async function itemsPage(dependencies: EndpointDependencies, record: ConversationRecord, url: URL) {
  const query = parseWith(inputItemsQuerySchema, listQueryOf(url));
  const page = await dependencies.conversations.page(record.accountId, record.id, query);
  if (!page)
    throw new BadRequestError(
      `Invalid 'after': conversation '${quoted(record.id)}' has no item with id '${quoted(query.after ?? "")}'.`,
      { param: "after", code: "invalid_value" },
    );
  return answer(pageOf((page.items as Identified[]).map(listedItem), page.hasMore));
}

/** The conversation endpoints, each over the key's account's conversations only. */
export function conversationRoutes(dependencies: EndpointDependencies): InferenceRoute[] {
  const conversations = dependencies.conversations;
  const found = async (accountId: string, id: string) => {
    const record = await conversations.conversation(accountId, id);
    if (!record) throw conversationNotFound(id);
    return record;
  };
  return [
    {
      method: "POST",
      path: conversationPaths.create,
      handler: async ({ key, body }) => created(dependencies, key.accountId, await readJson(body)),
    },
    {
      method: "GET",
      path: conversationPaths.one,
      handler: async ({ key }, { id = "" }) => answer(conversationOf(await found(key.accountId, id))),
    },
    {
      method: "POST",
      path: conversationPaths.one,
      handler: async ({ key, body }, { id = "" }) => {
        const { metadata } = parseWith(conversationUpdateSchema, await readJson(body));
        const record = await conversations.updateMetadata(key.accountId, id, metadata ?? {});
        if (!record) throw conversationNotFound(id);
        return answer(conversationOf(record));
      },
    },
    {
      method: "DELETE",
      path: conversationPaths.one,
      handler: async ({ key }, { id = "" }) => {
        if (!(await conversations.remove(key.accountId, id))) throw conversationNotFound(id);
        return answer({ id, object: "conversation.deleted", deleted: true });
      },
    },
    ...itemRoutes(dependencies, found),
  ];
}

function itemRoutes(
  dependencies: EndpointDependencies,
  found: (accountId: string, id: string) => Promise<ConversationRecord>,
): InferenceRoute[] {
  return [
    {
      method: "POST",
      path: conversationPaths.items,
      handler: async ({ key, body, url }, { id = "" }) => {
        checkInclude(url);
        const request = parseWith(conversationItemsCreateSchema, await readJson(body));
        await found(key.accountId, id);
        const items = await checkedItems(dependencies, key.accountId, request.items);
        const added = await addedItems(dependencies, key.accountId, id, items);
        return answer(pageOf(added.map(listedItem), false));
      },
    },
    {
      method: "GET",
      path: conversationPaths.items,
      handler: async ({ key, url }, { id = "" }) => itemsPage(dependencies, await found(key.accountId, id), url),
    },
    {
      method: "GET",
      path: conversationPaths.item,
      handler: async ({ key, url }, { id = "", item = "" }) => {
        checkInclude(url);
        await found(key.accountId, id);
        const kept = await dependencies.conversations.item(key.accountId, id, item);
        if (!kept) throw itemNotFound(item);
        return answer(listedItem(kept as Identified));
      },
    },
    {
      method: "DELETE",
      path: conversationPaths.item,
      handler: async ({ key }, { id = "", item = "" }) => {
        await found(key.accountId, id);
        const record = await dependencies.conversations.removeItem(key.accountId, id, item);
        if (!record) throw itemNotFound(item);
        return answer(conversationOf(record));
      },
    },
  ];
}

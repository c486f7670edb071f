/**
 * The Conversations API's conversations, in the origin's database: each one's items in order,
 * which a Responses request with `conversation` continues and adds its input and output to. Each
 * is the account's own: another account's id is not found. Kept until deleted, as OpenAI keeps
 * them. An item is a record of its own, found by its place or its id, so adding, reading a page
 * and deleting one item touch only those items, however long the conversation. Every change is
 * one transaction, so two requests adding to one conversation at once both land, one after the
 * other, and ids stay unique in the conversation.
 */
import type { ConversationItemRecord, ConversationRecord, PolicyDatabase } from "../policy/store.js";

type Item = ConversationItemRecord["item"];

/** An item to add: its own id, if it has one, is kept unless the conversation (or an item before it) has it. */
export type NewItem = { id?: string | null | undefined } & object;

/** Which of a conversation's items a page holds: those after `after`, in `order`. */
export interface ItemsQuery {
  after?: string | undefined;
  limit: number;
  order: "asc" | "desc";
}

const allOf = (id: string) => IDBKeyRange.bound([id, -Infinity], [id, Infinity]);

export class Conversations {
  readonly #database: Promise<PolicyDatabase>;

  constructor(options: { database: PolicyDatabase | Promise<PolicyDatabase> }) {
    this.#database = Promise.resolve(options.database);
  }

  /** Stores a new conversation with its first items, in one transaction. */
  async create(
    record: Omit<ConversationRecord, "nextPlace">,
    items: readonly NewItem[],
    freshId: (item: NewItem) => string,
  ): Promise<void> {
    const transaction = writingTransaction(await this.#database);
    await addTo(transaction, { ...record, nextPlace: 0 }, items, freshId);
    await transaction.done;
  }

  /** The account's conversation `id`; undefined otherwise. */
  async conversation(accountId: string, id: string): Promise<ConversationRecord | undefined> {
    return ownedBy(await (await this.#database).get("conversations", id), accountId);
  }

  /** All the items of the account's conversation `id`, in order; undefined when it is not found. */
  async items(accountId: string, id: string): Promise<Item[] | undefined> {
    const transaction = (await this.#database).transaction(["conversations", "conversationItems"]);
    if (!ownedBy(await transaction.objectStore("conversations").get(id), accountId)) return undefined;
    return (await transaction.objectStore("conversationItems").getAll(allOf(id))).map((record) => record.item);
  }

  /** The conversation's item `itemId`; undefined when either is not found. */
  async item(accountId: string, id: string, itemId: string): Promise<Item | undefined> {
    const transaction = (await this.#database).transaction(["conversations", "conversationItems"]);
    if (!ownedBy(await transaction.objectStore("conversations").get(id), accountId)) return undefined;
    return (await transaction.objectStore("conversationItems").index("id").get([id, itemId]))?.item;
  }

  /**
   * A page of the conversation's items, and whether more follow; undefined when it is not found,
   * or `after` names none of its items.
   */
  async page(
    accountId: string,
    id: string,
    query: ItemsQuery,
  ): Promise<{ items: Item[]; hasMore: boolean } | undefined> {
    const transaction = (await this.#database).transaction(["conversations", "conversationItems"]);
    if (!ownedBy(await transaction.objectStore("conversations").get(id), accountId)) return undefined;
    const store = transaction.objectStore("conversationItems");
    let range = allOf(id);
    if (query.after !== undefined) {
      const after = await store.index("id").getKey([id, query.after]);
      if (!after) return undefined;
      range =
        query.order === "asc"
          ? IDBKeyRange.bound(after, [id, Infinity], true)
          : IDBKeyRange.bound([id, -Infinity], after, false, true);
    }
    const items: Item[] = [];
    let cursor = await store.openCursor(range, query.order === "asc" ? "next" : "prev");
    for (; cursor && items.length <= query.limit; cursor = await cursor.continue()) items.push(cursor.value.item);
    return { items: items.slice(0, query.limit), hasMore: items.length > query.limit };
  }

  /** Adds items at the conversation's end, in one transaction; the items as added, or undefined when it is not found. */
  async append(accountId: string, id: string, items: readonly NewItem[], freshId: (item: NewItem) => string) {
    const transaction = writingTransaction(await this.#database);
    const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
    const added = record && (await addTo(transaction, record, items, freshId));
    await transaction.done;
    return added;
  }

  /** Replaces the conversation's metadata; the conversation as it now is, or undefined when it is not found. */
  async updateMetadata(accountId: string, id: string, metadata: Record<string, string>) {
    const transaction = (await this.#database).transaction("conversations", "readwrite");
    const record = ownedBy(await transaction.store.get(id), accountId);
    const updated = record && { ...record, metadata };
    if (updated) await transaction.store.put(updated);
    await transaction.done;
    return updated;
  }

  /** Deletes an item of the conversation; the conversation, or undefined when either is not found. */
  async removeItem(accountId: string, id: string, itemId: string): Promise<ConversationRecord | undefined> {
    const transaction = writingTransaction(await this.#database);
    const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
    const items = transaction.objectStore("conversationItems");
    const key = record && (await items.index("id").getKey([id, itemId]));
    if (key) await items.delete(key);
    await transaction.done;
    return key && record;
  }

  /** Deletes the account's conversation `id` and its items; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    const transaction = writingTransaction(await this.#database);
    const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
    if (record) {
      await transaction.objectStore("conversations").delete(id);
      await transaction.objectStore("conversationItems").delete(allOf(id));
    }
    await transaction.done;
    return record !== undefined;
  }
}

/** Puts `items` at the end of the conversation `record`, in the transaction given, with their ids; the items as added. */
async function addTo(
  transaction: ReturnType<typeof writingTransaction>,
  record: ConversationRecord,
  items: readonly NewItem[],
  freshId: (item: NewItem) => string,
): Promise<Item[]> {
  const store = transaction.objectStore("conversationItems");
  // Requests of one transaction run in order: each item's lookup, then each put, are issued together.
  const held = await Promise.all(
    items.map((item) => (item.id == null ? undefined : store.index("id").getKey([record.id, item.id]))),
  );
  const taken = new Set<string>();
  const added = items.map((item, index): Item => {
    const own = item.id ?? undefined;
    const id = own !== undefined && !taken.has(own) && !held[index] ? own : freshId(item);
    taken.add(id);
    return { ...item, id };
  });
  const place = record.nextPlace;
  await Promise.all([
    ...added.map((item, offset) => store.put({ conversationId: record.id, place: place + offset, item })),
    transaction.objectStore("conversations").put({ ...record, nextPlace: place + added.length }),
  ]);
  return added;
}

/** A transaction that changes a conversation and its items together. */
function writingTransaction(database: PolicyDatabase) {
  return database.transaction(["conversations", "conversationItems"], "readwrite");
}

function ownedBy(record: ConversationRecord | undefined, accountId: string): ConversationRecord | undefined {
  return record?.accountId === accountId ? record : undefined;
}

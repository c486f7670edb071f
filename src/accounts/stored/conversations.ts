/**
 * The Conversations API's conversations, in the origin's database: each one's items in order,
 * which a Responses request with `conversation` continues and adds its input and output to. Each
 * is the account's own: another account's id is not found. Kept until deleted, as OpenAI keeps
 * them. An item is a record of its own, found by its place or its id, so adding, reading a page
 * and deleting one item touch only those items, however long the conversation. Every change is
 * one transaction, which counts it against the account's storage quota, so two requests adding
 * to one conversation at once both land, one after the other, ids stay unique in the
 * conversation, and a change past the quota writes nothing.
 */
import { jsonBytes } from "../json-bytes.js";
import { countStored, type AccountStorage } from "../storage.js";
import type { ConversationItemRecord, ConversationRecord, AccountsDatabase } from "../database.js";
import { committed } from "./kept-records.js";

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

/** Items read back from the end per transaction: a reader may pause between batches. */
const itemsPerBatch = 64;

/** The size of a conversation's own record, without its items. */
const ownBytes = (record: ConversationRecord) => jsonBytes({ ...record, bytes: 0, items: 0 });

export class Conversations {
  readonly #database: Promise<AccountsDatabase>;
  readonly #storage: AccountStorage;

  constructor(options: { database: AccountsDatabase | Promise<AccountsDatabase>; storage: AccountStorage }) {
    this.#database = Promise.resolve(options.database);
    this.#storage = options.storage;
  }

  /** Stores a new conversation with its first items, in one transaction. */
  async create(
    record: Omit<ConversationRecord, "nextPlace" | "bytes" | "items">,
    items: readonly NewItem[],
    freshId: (item: NewItem) => string,
  ): Promise<void> {
    const conversation: ConversationRecord = { ...record, nextPlace: 0, bytes: 0, items: 1 };
    conversation.bytes = ownBytes(conversation);
    await this.#storage.ensureOriginRoom(conversation.bytes + jsonBytes(items));
    const transaction = writingTransaction(await this.#database);
    await committed(transaction, async () => {
      await countStored(transaction.objectStore("storage"), record.accountId, "conversations", {
        bytes: conversation.bytes,
        items: 1,
      });
      await addTo(transaction, conversation, items, freshId);
    });
  }

  /** The account's conversation `id`; undefined otherwise. */
  async conversation(accountId: string, id: string): Promise<ConversationRecord | undefined> {
    return ownedBy(await (await this.#database).get("conversations", id), accountId);
  }

  /**
   * The items of the account's conversation `id`, newest first, read a batch at a time as the
   * caller asks for more (a request reads only as far back as its context window holds);
   * undefined when it is not found.
   */
  async itemsFromEnd(accountId: string, id: string): Promise<AsyncGenerator<Item> | undefined> {
    const database = await this.#database;
    if (!(await this.conversation(accountId, id))) return undefined;
    return (async function* () {
      let upper: [string, number] = [id, Infinity];
      for (;;) {
        const batch: ConversationItemRecord[] = [];
        const store = database.transaction("conversationItems").store;
        const range = IDBKeyRange.bound([id, -Infinity], upper, false, true);
        for (let cursor = await store.openCursor(range, "prev"); cursor; cursor = await cursor.continue()) {
          batch.push(cursor.value);
          if (batch.length === itemsPerBatch) break;
        }
        for (const record of batch) yield record.item;
        if (batch.length < itemsPerBatch) return;
        upper = [id, batch.at(-1)!.place];
      }
    })();
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
    await this.#storage.ensureOriginRoom(jsonBytes(items));
    const transaction = writingTransaction(await this.#database);
    return committed(transaction, async () => {
      const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
      return record && (await addTo(transaction, record, items, freshId));
    });
  }

  /** Replaces the conversation's metadata; the conversation as it now is, or undefined when it is not found. */
  async updateMetadata(accountId: string, id: string, metadata: Record<string, string>) {
    const transaction = writingTransaction(await this.#database);
    return committed(transaction, async () => {
      const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
      if (!record) return undefined;
      const updated = { ...record, metadata };
      const change = ownBytes(updated) - ownBytes(record);
      await countStored(transaction.objectStore("storage"), accountId, "conversations", { bytes: change, items: 0 });
      updated.bytes += change;
      await transaction.objectStore("conversations").put(updated);
      return updated;
    });
  }

  /** Deletes an item of the conversation; the conversation, or undefined when either is not found. */
  async removeItem(accountId: string, id: string, itemId: string): Promise<ConversationRecord | undefined> {
    const transaction = writingTransaction(await this.#database);
    return committed(transaction, async () => {
      const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
      const items = transaction.objectStore("conversationItems");
      const key = record && (await items.index("id").getKey([id, itemId]));
      if (!record || !key) return undefined;
      const removed = (await items.get(key))!;
      await items.delete(key);
      await countStored(transaction.objectStore("storage"), accountId, "conversations", {
        bytes: -removed.bytes,
        items: -1,
      });
      const updated = { ...record, bytes: record.bytes - removed.bytes, items: record.items - 1 };
      await transaction.objectStore("conversations").put(updated);
      return updated;
    });
  }

  /** Deletes the account's conversation `id` and its items, their space given back; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    const transaction = writingTransaction(await this.#database);
    return committed(transaction, async () => {
      const record = ownedBy(await transaction.objectStore("conversations").get(id), accountId);
      if (!record) return false;
      await transaction.objectStore("conversations").delete(id);
      await transaction.objectStore("conversationItems").delete(allOf(id));
      await countStored(transaction.objectStore("storage"), accountId, "conversations", {
        bytes: -record.bytes,
        items: -record.items,
      });
      return true;
    });
  }
}

/**
 * Puts `items` at the end of the conversation `record`, in the transaction given, with their ids,
 * counted against the account's quota; the items as added.
 */
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
  const stored = added.map((item, offset): ConversationItemRecord => {
    const entry = { conversationId: record.id, place: place + offset, item, bytes: 0 };
    entry.bytes = jsonBytes(entry);
    return entry;
  });
  const bytes = stored.reduce((sum, entry) => sum + entry.bytes, 0);
  await countStored(transaction.objectStore("storage"), record.accountId, "conversations", {
    bytes,
    items: stored.length,
  });
  const updated = {
    ...record,
    nextPlace: place + added.length,
    bytes: record.bytes + bytes,
    items: record.items + stored.length,
  };
  await Promise.all([
    ...stored.map((entry) => store.put(entry)),
    transaction.objectStore("conversations").put(updated),
  ]);
  return added;
}

/** A transaction that changes a conversation, its items and its account's usage together. */
function writingTransaction(database: AccountsDatabase) {
  return database.transaction(["conversations", "conversationItems", "storage"], "readwrite");
}

function ownedBy(record: ConversationRecord | undefined, accountId: string): ConversationRecord | undefined {
  return record?.accountId === accountId ? record : undefined;
}

/**
 * Chat completions created with `store: true`, in the origin's database, for the stored
 * completions endpoints: listed (by model and metadata), read back with their messages, their
 * metadata replaced, deleted. Each is the account's own: another account's id is not found, and
 * each counts against the account's storage quota. Kept 30 days, as stored responses are; each
 * save deletes a few of the expired ones, so the work per request stays bounded.
 *
 * A page reads the `listing` index (store.ts: `listingKeys`): the keys of the most selective
 * filter, in order, each checked against the other filters by key, and then only the records on
 * the page. No record outside the page is read, however many the account has.
 */
import { jsonBytes } from "../json-bytes.js";
import { countStored } from "../storage.js";
import { listingFilters, listingKeys, type StoredCompletionRecord } from "../database.js";
import { committed, deleteExpired, keptMs, KeptRecordStore, removeKept, visible } from "./kept-records.js";

/** Which of an account's completions a page holds: those after `after`, in `order`, that match. */
export interface CompletionsQuery {
  after?: string;
  limit: number;
  order: "asc" | "desc";
  model?: string;
  metadata: Record<string, string>;
}

type NewCompletion = Omit<StoredCompletionRecord, "createdAt" | "listing" | "bytes">;

/** The record with its listing keys and size, as stored. */
function sized(record: Omit<StoredCompletionRecord, "listing" | "bytes">): StoredCompletionRecord {
  const stored = { ...record, listing: listingKeys(record), bytes: 0 };
  stored.bytes = jsonBytes(stored);
  return stored;
}

export class StoredCompletions extends KeptRecordStore {
  /** Stores a completion, counted against its account's quota, in one transaction with the expired ones' deletion. */
  async save(record: NewCompletion): Promise<void> {
    const now = this.clock();
    const stored = sized({ ...record, createdAt: now });
    await this.storage.ensureOriginRoom(stored.bytes);
    const transaction = (await this.database).transaction(["completions", "storage"], "readwrite");
    await committed(transaction, async () => {
      const usage = transaction.objectStore("storage");
      await countStored(usage, record.accountId, "completions", { bytes: stored.bytes, items: 1 });
      await transaction.objectStore("completions").put(stored);
      await deleteExpired(transaction.objectStore("completions").index("createdAt"), usage, "completions", now);
    });
  }

  /** The account's completion `id`, unexpired; undefined otherwise. */
  async completion(accountId: string, id: string): Promise<StoredCompletionRecord | undefined> {
    return this.#visible(await (await this.database).get("completions", id), accountId);
  }

  /**
   * A page of the account's completions that match the query, and whether more follow; undefined
   * when `after` names none of the account's completions.
   */
  async page(
    accountId: string,
    query: CompletionsQuery,
  ): Promise<{ records: StoredCompletionRecord[]; hasMore: boolean } | undefined> {
    const transaction = (await this.database).transaction("completions");
    const listing = transaction.store.index("listing");
    const filters = listingFilters(query.model, query.metadata);
    const bound = (filter: string) => IDBKeyRange.bound([accountId, filter], [accountId, filter, Infinity]);
    // The filter with the fewest keys leads; the others are checked by key.
    const counts = await Promise.all(filters.map((filter) => listing.count(bound(filter))));
    const order = filters.map((filter, index) => ({ filter, count: counts[index]! })).sort((a, b) => a.count - b.count);
    const [lead = "", ...rest] = order.map((entry) => entry.filter);
    let range: IDBKeyRange;
    // Unexpired only: made after the keeping period began (times are whole milliseconds).
    const lower = [accountId, lead, Math.floor(this.clock() - keptMs) + 1];
    const upper = [accountId, lead, Infinity];
    if (query.after !== undefined) {
      const after = this.#visible(await transaction.store.get(query.after), accountId);
      if (!after) return undefined;
      const at = [accountId, lead, after.createdAt, after.id];
      range = query.order === "asc" ? IDBKeyRange.bound(at, upper, true) : IDBKeyRange.bound(lower, at, false, true);
    } else range = IDBKeyRange.bound(lower, upper);
    const ids: string[] = [];
    let cursor = await listing.openKeyCursor(range, query.order === "asc" ? "next" : "prev");
    for (; cursor && ids.length <= query.limit; cursor = await cursor.continue()) {
      const [, , createdAt, id] = cursor.key;
      const others = await Promise.all(rest.map((filter) => listing.getKey([accountId, filter, createdAt, id])));
      if (others.every((key) => key !== undefined)) ids.push(id);
    }
    const records = await Promise.all(ids.slice(0, query.limit).map((id) => transaction.store.get(id)));
    return { records: records as StoredCompletionRecord[], hasMore: ids.length > query.limit };
  }

  /** Replaces the account's completion's metadata; the record as it now is, or undefined when not found. */
  async updateMetadata(
    accountId: string,
    id: string,
    metadata: Record<string, string>,
  ): Promise<StoredCompletionRecord | undefined> {
    const transaction = (await this.database).transaction(["completions", "storage"], "readwrite");
    return committed(transaction, async () => {
      const record = this.#visible(await transaction.objectStore("completions").get(id), accountId);
      if (!record) return undefined;
      const updated = sized({ ...record, metadata });
      await countStored(transaction.objectStore("storage"), accountId, "completions", {
        bytes: updated.bytes - record.bytes,
        items: 0,
      });
      await transaction.objectStore("completions").put(updated);
      return updated;
    });
  }

  /** Deletes the account's completion `id`; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    return removeKept(await this.database, "completions", accountId, id, this.clock());
  }

  #visible(record: StoredCompletionRecord | undefined, accountId: string): StoredCompletionRecord | undefined {
    return visible(record, accountId, this.clock());
  }
}

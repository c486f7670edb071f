/**
 * Chat completions created with `store: true`, in the origin's database, for the stored
 * completions endpoints: listed (by model and metadata), read back with their messages, their
 * metadata replaced, deleted. Each is the account's own: another account's id is not found.
 * Kept 30 days, as stored responses are; each save deletes a few of the expired ones, so the work
 * per request stays bounded.
 */
import { deleteExpired, removeKept, visible } from "./kept-records.js";
import type { PolicyDatabase, StoredCompletionRecord } from "../policy/store.js";

/** Which of an account's completions a page holds: those after `after`, in `order`, that match. */
export interface CompletionsQuery {
  after?: string;
  limit: number;
  order: "asc" | "desc";
  model?: string;
  metadata: Record<string, string>;
}

export class StoredCompletions {
  readonly #database: Promise<PolicyDatabase>;
  readonly #clock: () => number;

  constructor(options: { database: PolicyDatabase | Promise<PolicyDatabase>; clock: () => number }) {
    this.#database = Promise.resolve(options.database);
    this.#clock = options.clock;
  }

  /** Stores a completion, in one transaction with the expired ones' deletion. */
  async save(record: Omit<StoredCompletionRecord, "createdAt">): Promise<void> {
    const now = this.#clock();
    const transaction = (await this.#database).transaction("completions", "readwrite");
    await transaction.store.put({ ...record, createdAt: now });
    await deleteExpired(transaction.store.index("createdAt"), now);
    await transaction.done;
  }

  /** The account's completion `id`, unexpired; undefined otherwise. */
  async completion(accountId: string, id: string): Promise<StoredCompletionRecord | undefined> {
    return this.#visible(await (await this.#database).get("completions", id), accountId);
  }

  /**
   * A page of the account's completions that match the query, and whether more follow; undefined
   * when `after` names none of the account's completions.
   */
  async page(
    accountId: string,
    query: CompletionsQuery,
  ): Promise<{ records: StoredCompletionRecord[]; hasMore: boolean } | undefined> {
    const store = (await this.#database).transaction("completions").store;
    let lower: unknown[] = [accountId];
    let upper: unknown[] = [accountId, Infinity];
    if (query.after !== undefined) {
      const after = this.#visible(await store.get(query.after), accountId);
      if (!after) return undefined;
      if (query.order === "asc") lower = [accountId, after.createdAt, after.id];
      else upper = [accountId, after.createdAt, after.id];
    }
    const range = IDBKeyRange.bound(lower, upper, query.after !== undefined && query.order === "asc", true);
    const records: StoredCompletionRecord[] = [];
    let cursor = await store.index("account").openCursor(range, query.order === "asc" ? "next" : "prev");
    for (; cursor && records.length <= query.limit; cursor = await cursor.continue())
      if (this.#visible(cursor.value, accountId) && matches(cursor.value, query)) records.push(cursor.value);
    return { records: records.slice(0, query.limit), hasMore: records.length > query.limit };
  }

  /** Replaces the account's completion's metadata; the record as it now is, or undefined when not found. */
  async updateMetadata(
    accountId: string,
    id: string,
    metadata: Record<string, string>,
  ): Promise<StoredCompletionRecord | undefined> {
    const transaction = (await this.#database).transaction("completions", "readwrite");
    const record = this.#visible(await transaction.store.get(id), accountId);
    const updated = record && { ...record, metadata };
    if (updated) await transaction.store.put(updated);
    await transaction.done;
    return updated;
  }

  /** Deletes the account's completion `id`; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    return removeKept(await this.#database, "completions", accountId, id, this.#clock());
  }

  #visible(record: StoredCompletionRecord | undefined, accountId: string): StoredCompletionRecord | undefined {
    return visible(record, accountId, this.#clock());
  }
}

function matches(record: StoredCompletionRecord, query: CompletionsQuery): boolean {
  if (query.model !== undefined && record.model !== query.model) return false;
  return Object.entries(query.metadata).every(([key, value]) => record.metadata[key] === value);
}

/**
 * What stored responses and stored chat completions share: each is its account's own, counted
 * against its storage quota, and kept 30 days, as OpenAI keeps them; each save deletes a few of
 * the expired ones (giving their space back to their accounts), so the work per request stays bounded.
 */
import { countStored, type AccountStorage } from "../storage.js";
import type { AccountsDatabase, StorageUsageRecord, StoredKind } from "../database.js";

export const keptMs = 30 * 24 * 60 * 60 * 1000;

/**
 * A store of records kept for `keptMs`: the database, the clock their age is read by, and the
 * quota each write and deletion is counted against.
 */
export abstract class KeptRecordStore {
  protected readonly database: Promise<AccountsDatabase>;
  protected readonly clock: () => number;
  protected readonly storage: AccountStorage;

  constructor(options: {
    database: AccountsDatabase | Promise<AccountsDatabase>;
    clock: () => number;
    storage: AccountStorage;
  }) {
    this.database = Promise.resolve(options.database);
    this.clock = options.clock;
    this.storage = options.storage;
  }
}
/** Expired records deleted per save: enough to keep up with any rate of saves. */
const expiredPerSave = 4;

/** A cursor over an index, as idb's cursors are, for what deleting needs of one. */
interface DeletingCursor<Value> {
  value: Value;
  delete(): Promise<void>;
  continue(): Promise<DeletingCursor<Value> | null>;
}

/** The `storage` store of the transaction. */
interface UsageStore {
  get(key: string): Promise<StorageUsageRecord | undefined>;
  put(value: StorageUsageRecord): Promise<unknown>;
}

/**
 * Deletes a few records from `cursor` on, in its transaction, each one's space given back to its
 * account in `usage` (of the same transaction); `alsoDelete` removes what a record keeps in
 * another store of it.
 */
export async function deleteFew<Value extends { accountId: string; bytes: number }>(
  cursor: DeletingCursor<Value> | null,
  usage: UsageStore,
  kind: StoredKind,
  alsoDelete?: (record: Value) => Promise<unknown>,
): Promise<void> {
  for (let deleted = 0; cursor && deleted < expiredPerSave; deleted++) {
    const record = cursor.value;
    await Promise.all([cursor.delete(), alsoDelete?.(record)]);
    await countStored(usage, record.accountId, kind, { bytes: -record.bytes, items: -1 });
    cursor = await cursor.continue();
  }
}

/** Deletes a few records made before the keeping period, through their `createdAt` index (`deleteFew`). */
export async function deleteExpired<Value extends { accountId: string; bytes: number }>(
  index: { openCursor(range: IDBKeyRange): Promise<DeletingCursor<Value> | null> },
  usage: UsageStore,
  kind: "responses" | "completions",
  now: number,
): Promise<void> {
  await deleteFew(await index.openCursor(IDBKeyRange.upperBound(now - keptMs, true)), usage, kind);
}

/** The record, when it is the account's and unexpired; undefined otherwise. */
export function visible<Kept extends { accountId: string; createdAt: number }>(
  record: Kept | undefined,
  accountId: string,
  now: number,
): Kept | undefined {
  if (!record || record.accountId !== accountId || record.createdAt <= now - keptMs) return undefined;
  return record;
}

/** Deletes the account's unexpired record `id` from `storeName`, its space given back, in one transaction; whether there was one. */
export async function removeKept(
  database: AccountsDatabase,
  storeName: "responses" | "completions",
  accountId: string,
  id: string,
  now: number,
): Promise<boolean> {
  const transaction = database.transaction([storeName, "storage"], "readwrite");
  const store = transaction.objectStore(storeName);
  const record = visible(await store.get(id), accountId, now);
  if (record) {
    await store.delete(id);
    await countStored(transaction.objectStore("storage"), accountId, storeName, {
      bytes: -record.bytes,
      items: -1,
    });
  }
  await transaction.done;
  return record !== undefined;
}

/**
 * Runs `work` in `transaction` and waits for it to commit; a failure (a quota refused, say)
 * aborts it, so nothing of it is written.
 */
export async function committed<Result>(
  transaction: { abort(): void; done: Promise<void> },
  work: () => Promise<Result>,
): Promise<Result> {
  try {
    const result = await work();
    await transaction.done;
    return result;
  } catch (error) {
    transaction.done.catch(() => undefined);
    try {
      transaction.abort();
    } catch {
      // Already finished.
    }
    throw error;
  }
}

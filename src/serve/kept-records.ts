/**
 * What stored responses and stored chat completions share: each is its account's own, and kept
 * 30 days, as OpenAI keeps them; each save deletes a few of the expired ones, so the work per
 * request stays bounded.
 */
import type { PolicyDatabase } from "../policy/store.js";

const keptMs = 30 * 24 * 60 * 60 * 1000;
/** Expired records deleted per save: enough to keep up with any rate of saves. */
const expiredPerSave = 4;

/** A cursor over a `createdAt` index, as idb's cursors are, for what deleting needs of one. */
interface DeletingCursor {
  delete(): Promise<void>;
  continue(): Promise<DeletingCursor | null>;
}

/** Deletes a few records made before the keeping period, in the transaction the index belongs to. */
export async function deleteExpired(
  index: { openCursor(range: IDBKeyRange): Promise<DeletingCursor | null> },
  now: number,
): Promise<void> {
  let cursor = await index.openCursor(IDBKeyRange.upperBound(now - keptMs, true));
  for (let deleted = 0; cursor && deleted < expiredPerSave; deleted++) {
    await cursor.delete();
    cursor = await cursor.continue();
  }
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

/** Deletes the account's unexpired record `id` from `storeName`, in one transaction; whether there was one. */
export async function removeKept(
  database: PolicyDatabase,
  storeName: "responses" | "completions",
  accountId: string,
  id: string,
  now: number,
): Promise<boolean> {
  const transaction = database.transaction(storeName, "readwrite");
  const record = visible(await transaction.store.get(id), accountId, now);
  if (record) await transaction.store.delete(id);
  await transaction.done;
  return record !== undefined;
}

/**
 * Each account's stored data (stored responses, stored chat completions, conversations and their
 * items, files, vector stores), bounded: a quota of bytes and items per account, counted in the transaction of every
 * write and deletion, so a write past it changes nothing; and room kept free in the origin's
 * storage, so stored data can never stop admission from writing a reservation.
 *
 * Stored data is not billed: it costs an account its quota, not its balance.
 */
import { InsufficientStorageError, PermissionDeniedError } from "../core/errors/api.js";
import { SetupError } from "../core/errors/setup.js";
import { megabytes, roomShortfall, type StorageEstimator } from "../core/storage-room.js";
import {
  emptyKinds,
  type AccountsDatabase,
  type StorageAmount,
  type StorageUsageRecord,
  type StoredKind,
} from "./database.js";

/** What an account may store unless the admin sets another quota (`setStorageQuota`). */
const defaultStorageQuota: StorageAmount = { bytes: 100_000_000, items: 100_000 };

/** The `storage` store, as a transaction opens it. */
interface UsageStore {
  get(key: string): Promise<StorageUsageRecord | undefined>;
  put(value: StorageUsageRecord): Promise<unknown>;
}

/** An account's usage as `storageUsage` answers it: totals, quota, and a line per kind of record. */
export interface StorageReport extends StorageAmount {
  quota: StorageAmount;
  kinds: Record<StoredKind, StorageAmount>;
}

function totalOf(kinds: Record<StoredKind, StorageAmount>): StorageAmount {
  const lines = Object.values(kinds);
  return {
    bytes: lines.reduce((sum, line) => sum + line.bytes, 0),
    items: lines.reduce((sum, line) => sum + line.items, 0),
  };
}

function reportOf(record: StorageUsageRecord | undefined): StorageReport {
  // A record written before a kind existed has no line for it.
  const kinds = { ...emptyKinds(), ...record?.kinds };
  return { ...totalOf(kinds), quota: record?.quota ?? defaultStorageQuota, kinds };
}

function quotaExceeded(report: StorageReport, change: StorageAmount): PermissionDeniedError {
  return new PermissionDeniedError(
    `This account's stored data would pass its storage quota: it stores ${megabytes(report.bytes)} of ${megabytes(report.quota.bytes)} ` +
      `(${report.items} of ${report.quota.items} items), and this request would add ${megabytes(Math.max(0, change.bytes))} ` +
      `(${Math.max(0, change.items)} items). Nothing was stored. Delete stored responses, chat completions, conversations, files or vector stores ` +
      "(DELETE /v1/responses/{id}, /v1/chat/completions/{id}, /v1/conversations/{id}, /v1/files/{id}, /v1/vector_stores/{id}), or ask for a larger quota (admin.setStorageQuota).",
    { code: "storage_quota_exceeded" },
  );
}

/**
 * Adds `change` to the account's usage of `kind`, in the caller's read-write transaction; 403,
 * before anything is written, when it would take the account past its quota. A change that
 * frees space is always taken.
 */
export async function countStored(
  store: UsageStore,
  accountId: string,
  kind: StoredKind,
  change: StorageAmount,
): Promise<void> {
  const record = (await store.get(accountId)) ?? { accountId, kinds: emptyKinds() };
  const report = reportOf(record);
  const passes =
    (change.bytes > 0 && report.bytes + change.bytes > report.quota.bytes) ||
    (change.items > 0 && report.items + change.items > report.quota.items);
  if (passes) throw quotaExceeded(report, change);
  const line = report.kinds[kind];
  record.kinds = report.kinds;
  record.kinds[kind] = {
    bytes: Math.max(0, line.bytes + change.bytes),
    items: Math.max(0, line.items + change.items),
  };
  await store.put(record);
}

/** The account's usage, and its quota, as stored. */
export async function storageUsage(database: AccountsDatabase, accountId: string): Promise<StorageReport> {
  return reportOf(await database.get("storage", accountId));
}

/** Sets the account's quota (each part left out keeps its value); what is stored already stays. */
export async function setStorageQuota(
  database: AccountsDatabase,
  accountId: string,
  quota: Partial<StorageAmount>,
): Promise<StorageReport> {
  for (const [name, value] of Object.entries(quota))
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0))
      throw new SetupError(
        "invalid_option",
        `a storage quota's ${name} must be a whole number of at least 0; got ${value}`,
      );
  const transaction = database.transaction("storage", "readwrite");
  const record = (await transaction.store.get(accountId)) ?? { accountId, kinds: emptyKinds() };
  record.quota = { ...(record.quota ?? defaultStorageQuota), ...quota } as StorageAmount;
  await transaction.store.put(record);
  await transaction.done;
  return reportOf(record);
}

/** Deletes everything the account stored, in one transaction; what was freed. Its quota stays. */
export async function deleteStoredData(database: AccountsDatabase, accountId: string): Promise<StorageAmount> {
  const transaction = database.transaction(
    [
      "responses",
      "completions",
      "conversations",
      "conversationItems",
      "files",
      "fileContents",
      "vectorStores",
      "vectorStoreFiles",
      "vectorChunks",
      "fileBatches",
      "storage",
    ],
    "readwrite",
  );
  const responses = transaction.objectStore("responses");
  const completions = transaction.objectStore("completions");
  const conversations = transaction.objectStore("conversations");
  const files = transaction.objectStore("files");
  const ownRange = IDBKeyRange.bound([accountId], [accountId, Infinity]);
  const [responseIds, completionIds, conversationIds, fileIds, storeIds, usage] = await Promise.all([
    responses.index("accountId").getAllKeys(accountId),
    completions.index("account").getAllKeys(ownRange),
    conversations.index("accountId").getAllKeys(accountId),
    files.index("account").getAllKeys(ownRange),
    transaction.objectStore("vectorStores").index("account").getAllKeys(ownRange),
    transaction.objectStore("storage").get(accountId),
  ]);
  await Promise.all([
    ...responseIds.map((id) => responses.delete(id)),
    ...completionIds.map((id) => completions.delete(id)),
    ...conversationIds.flatMap((id) => [
      conversations.delete(id),
      transaction.objectStore("conversationItems").delete(IDBKeyRange.bound([id, -Infinity], [id, Infinity])),
    ]),
    ...fileIds.flatMap((id) => [files.delete(id), transaction.objectStore("fileContents").delete(id)]),
    // A store's files, chunks and batches are the keys that start with its id.
    ...storeIds.flatMap((id) => [
      transaction.objectStore("vectorStores").delete(id),
      ...(["vectorStoreFiles", "vectorChunks", "fileBatches"] as const).map((name) =>
        transaction.objectStore(name).delete(IDBKeyRange.bound([id], [id, []])),
      ),
    ]),
    transaction
      .objectStore("storage")
      .put({ accountId, kinds: emptyKinds(), ...(usage?.quota ? { quota: usage.quota } : {}) }),
  ]);
  await transaction.done;
  return totalOf(usage?.kinds ?? emptyKinds());
}

/**
 * The room stored data may take: each account's quota, and the origin's storage, of which
 * the headroom (src/core/storage-room.ts) stays free for billing. The stores count each write in its own
 * transaction (`countStored`); a request checks first, before anything is generated.
 */
export class AccountStorage {
  readonly #database: Promise<AccountsDatabase>;
  readonly #estimate: StorageEstimator | undefined;

  constructor(options: {
    database: AccountsDatabase | Promise<AccountsDatabase>;
    estimate?: StorageEstimator | undefined;
  }) {
    this.#database = Promise.resolve(options.database);
    this.#estimate = options.estimate;
  }

  /** Refuses, before anything is generated or written, a request whose stored data would not fit (403 or 507). */
  async ensureRoom(accountId: string, change: StorageAmount): Promise<void> {
    await this.ensureOriginRoom(change.bytes);
    const report = reportOf(await (await this.#database).get("storage", accountId));
    if (report.bytes + change.bytes > report.quota.bytes || report.items + change.items > report.quota.items)
      throw quotaExceeded(report, change);
  }

  /**
   * Refuses (507) a write of `bytes` that would leave less than the headroom of the origin's
   * storage free (src/core/storage-room.ts): billing must always find room to write.
   */
  ensureOriginRoom(bytes: number): Promise<void> {
    return ensureOriginRoom(this.#estimate, bytes);
  }
}

async function ensureOriginRoom(estimate: StorageEstimator | undefined, bytes: number): Promise<void> {
  const shortfall = await roomShortfall(estimate, bytes);
  if (shortfall)
    throw new InsufficientStorageError(
      `${shortfall} Nothing was stored. Free space on the device, or delete stored responses, chat completions, conversations or files.`,
    );
}

/**
 * Vector stores, their files and their chunks, in the origin's database. Each is its account's
 * own (another account's id is not found). Every change to a store's files is written in one
 * transaction with the store's counts and the account's storage usage, so a quota refused or a
 * worker killed midway leaves nothing half-written. A file's chunks are counted, text and vector,
 * when it is chunked, before any is embedded: embedding never runs into the quota.
 */
import { jsonBytes } from "../json-bytes.js";
import { countStored, type AccountStorage } from "../storage.js";
import type {
  AccountsDatabase,
  FileBatchRecord,
  VectorChunkRecord,
  VectorStoreFileRecord,
  VectorStoreRecord,
  WritingTransaction,
} from "../database.js";
import { committed } from "./kept-records.js";

type Status = VectorStoreFileRecord["status"];

/** A file to add to a store: what the endpoint knows of it before indexing starts. */
export type NewStoreFile = Pick<
  VectorStoreFileRecord,
  "fileId" | "filename" | "attributes" | "chunking" | "batchId" | "keyId" | "origin"
>;

export type NewVectorStore = Pick<
  VectorStoreRecord,
  "id" | "accountId" | "name" | "description" | "metadata" | "embeddingModel" | "expiresAfterDays"
>;

/** Which of a store's files a page holds. */
export interface StoreFilesQuery {
  after?: string | undefined;
  before?: string | undefined;
  limit: number;
  order: "asc" | "desc";
  filter?: Status | undefined;
  batchId?: string | undefined;
}

/** What a store's chunks can be searched with: each file that is done, and its embedded chunks. */
export interface SearchableStore {
  store: VectorStoreRecord;
  files: Map<string, VectorStoreFileRecord>;
  chunks: VectorChunkRecord[];
}

/** Every store a change of a vector store may write; one transaction type for all of them. */
const writtenStores: WrittenStores = ["vectorStores", "vectorStoreFiles", "vectorChunks", "fileBatches", "storage"];
type WrittenStores = ("vectorStores" | "vectorStoreFiles" | "vectorChunks" | "fileBatches" | "storage")[];
type Writing = WritingTransaction<WrittenStores>;

const storeChunks = (storeId: string) => IDBKeyRange.bound([storeId], [storeId, []]);
const fileChunks = (storeId: string, fileId: string) => IDBKeyRange.bound([storeId, fileId], [storeId, fileId, []]);
/** A store's files, or its batches: keys and index keys that start with its id. */
const storeFiles = (storeId: string) => IDBKeyRange.bound([storeId], [storeId, []]);
const utf8 = new TextEncoder();

/** What a chunk takes: its text in UTF-8 and its vector of `dimensions` floats. */
function chunkBytes(text: string, dimensions: number): number {
  return utf8.encode(text).length + 4 * dimensions;
}

/**
 * The index range of a cursor page under `prefix` (keys `[prefix, createdAt, id]`): past `after`
 * and short of `before` in the page's order, `locate` giving a cursor's key. Undefined when a
 * cursor names nothing; null when the range is empty.
 */
async function keyRange(
  prefix: string,
  query: { after?: string | undefined; before?: string | undefined; order: "asc" | "desc" },
  locate: (id: string) => Promise<unknown[] | undefined>,
): Promise<IDBKeyRange | null | undefined> {
  let lower: unknown[] = [prefix];
  let upper: unknown[] = [prefix, []];
  let [lowerOpen, upperOpen] = [false, false];
  for (const [id, isAfter] of [
    [query.after, true],
    [query.before, false],
  ] as const) {
    if (id === undefined) continue;
    const key = await locate(id);
    if (!key) return undefined;
    if (isAfter === (query.order === "asc")) [lower, lowerOpen] = [key, true];
    else [upper, upperOpen] = [key, true];
  }
  return indexedDB.cmp(lower, upper) < 0 ? IDBKeyRange.bound(lower, upper, lowerOpen, upperOpen) : null;
}

function emptyCounts(): VectorStoreRecord["counts"] {
  return { in_progress: 0, completed: 0, failed: 0, cancelled: 0 };
}

/** The store's record with `bytes` changed by `change`, and its size counted anew. */
function resized(store: VectorStoreRecord, change: number): VectorStoreRecord {
  const withoutOwn = store.bytes - jsonBytes({ ...store, bytes: 0 });
  const next = { ...store };
  next.bytes = 0;
  next.bytes = withoutOwn + change + jsonBytes(next);
  return next;
}

function newFileRecord(store: VectorStoreRecord, file: NewStoreFile, createdAt: number): VectorStoreFileRecord {
  const record: VectorStoreFileRecord = {
    ...file,
    storeId: store.id,
    accountId: store.accountId,
    createdAt,
    status: "in_progress",
    lastError: null,
    pending: 1,
    chunks: null,
    embedded: 0,
    usageBytes: 0,
    bytes: 0,
  };
  record.bytes = jsonBytes(record);
  return record;
}

export class StoredVectorStores {
  readonly #database: Promise<AccountsDatabase>;
  readonly #clock: () => number;
  readonly #storage: AccountStorage;

  constructor(options: {
    database: AccountsDatabase | Promise<AccountsDatabase>;
    clock: () => number;
    storage: AccountStorage;
  }) {
    this.#database = Promise.resolve(options.database);
    this.#clock = options.clock;
    this.#storage = options.storage;
  }

  async #writing(): Promise<Writing> {
    return (await this.#database).transaction(writtenStores, "readwrite");
  }

  /** Stores a new vector store with its first files, all `in_progress`, in one transaction. */
  async create(store: NewVectorStore, files: NewStoreFile[]): Promise<VectorStoreRecord> {
    const now = this.#clock();
    let record: VectorStoreRecord = {
      ...store,
      createdAt: now,
      lastActiveAt: now,
      expiresAt: store.expiresAfterDays === null ? null : now + store.expiresAfterDays * 86_400_000,
      counts: emptyCounts(),
      usageBytes: 0,
      bytes: 0,
      revision: 0,
    };
    record = resized(record, 0);
    await this.#storage.ensureOriginRoom(record.bytes);
    const transaction = await this.#writing();
    await committed(transaction, async () => {
      await countStored(transaction.objectStore("storage"), store.accountId, "vector_stores", {
        bytes: record.bytes,
        items: 1,
      });
      await transaction.objectStore("vectorStores").put(record);
      record = await this.#addFiles(transaction, record, files, now);
    });
    return record;
  }

  /** The account's store `id` (expired ones too: their status says so); undefined otherwise. */
  async store(accountId: string, id: string): Promise<VectorStoreRecord | undefined> {
    const record = await (await this.#database).get("vectorStores", id);
    return record?.accountId === accountId ? record : undefined;
  }

  /** A page of the account's stores, newest first unless asked otherwise; undefined when a cursor names none of them. */
  async page(
    accountId: string,
    query: Omit<StoreFilesQuery, "filter" | "batchId">,
  ): Promise<{ items: VectorStoreRecord[]; hasMore: boolean } | undefined> {
    const range = await keyRange(accountId, query, async (id) => {
      const record = await this.store(accountId, id);
      return record && [accountId, record.createdAt, record.id];
    });
    if (range === undefined) return undefined;
    const index = (await this.#database).transaction("vectorStores").store.index("account");
    const items: VectorStoreRecord[] = [];
    let cursor = range && (await index.openCursor(range, query.order === "asc" ? "next" : "prev"));
    for (; cursor && items.length <= query.limit; cursor = await cursor.continue()) items.push(cursor.value);
    return { items: items.slice(0, query.limit), hasMore: items.length > query.limit };
  }

  /** Changes the store's name, expiry or metadata (those given); the store as it now is. */
  async update(
    accountId: string,
    id: string,
    change: Partial<Pick<VectorStoreRecord, "name" | "metadata" | "expiresAfterDays">>,
  ): Promise<VectorStoreRecord | undefined> {
    return this.#changeStore(accountId, id, async (store) => {
      const next = { ...store, ...change, lastActiveAt: this.#clock() };
      next.expiresAt = next.expiresAfterDays === null ? null : next.lastActiveAt + next.expiresAfterDays * 86_400_000;
      return next;
    });
  }

  /** Marks the store used now (a search), which moves its expiry on. */
  async touch(accountId: string, id: string): Promise<void> {
    await this.update(accountId, id, {});
  }

  /** Deletes the store with its files, chunks and batches, its space given back, in one transaction; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const store = await transaction.objectStore("vectorStores").get(id);
      if (store?.accountId !== accountId) return false;
      const files = await transaction.objectStore("vectorStoreFiles").index("store").getAllKeys(storeFiles(id));
      await Promise.all([
        transaction.objectStore("vectorStores").delete(id),
        transaction.objectStore("vectorStoreFiles").delete(storeFiles(id)),
        transaction.objectStore("vectorChunks").delete(storeChunks(id)),
        transaction.objectStore("fileBatches").delete(storeFiles(id)),
      ]);
      await countStored(transaction.objectStore("storage"), accountId, "vector_stores", {
        bytes: -store.bytes,
        items: -(1 + files.length),
      });
      return true;
    });
  }

  /** Adds files to the account's store, each `in_progress` (one already in it stays as it is); the files' records. */
  async addFiles(
    accountId: string,
    storeId: string,
    files: NewStoreFile[],
  ): Promise<VectorStoreFileRecord[] | undefined> {
    const now = this.#clock();
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const store = await transaction.objectStore("vectorStores").get(storeId);
      if (store?.accountId !== accountId) return undefined;
      await this.#addFiles(transaction, store, files, now);
      const added = files.map((file) => transaction.objectStore("vectorStoreFiles").get([storeId, file.fileId]));
      return (await Promise.all(added)).filter((record) => record !== undefined);
    });
  }

  async #addFiles(
    transaction: Writing,
    store: VectorStoreRecord,
    files: NewStoreFile[],
    now: number,
  ): Promise<VectorStoreRecord> {
    const fileStore = transaction.objectStore("vectorStoreFiles");
    let next = store;
    let added = 0;
    for (const file of files) {
      if (await fileStore.get([store.id, file.fileId])) continue;
      const record = newFileRecord(store, file, now);
      await fileStore.put(record);
      next = resized(next, record.bytes);
      next.counts = { ...next.counts, in_progress: next.counts.in_progress + 1 };
      added++;
    }
    next = resized(next, 0);
    await countStored(transaction.objectStore("storage"), store.accountId, "vector_stores", {
      bytes: next.bytes - store.bytes,
      items: added,
    });
    await transaction.objectStore("vectorStores").put(next);
    return next;
  }

  /** The account's file `fileId` of store `storeId`; undefined otherwise. */
  async file(accountId: string, storeId: string, fileId: string): Promise<VectorStoreFileRecord | undefined> {
    const record = await (await this.#database).get("vectorStoreFiles", [storeId, fileId]);
    return record?.accountId === accountId ? record : undefined;
  }

  /** A page of the store's files (of one batch, of one status, where asked); undefined when a cursor names none of them. */
  async filesPage(
    accountId: string,
    storeId: string,
    query: StoreFilesQuery,
  ): Promise<{ items: VectorStoreFileRecord[]; hasMore: boolean } | undefined> {
    const range = await keyRange(storeId, query, async (id) => {
      const record = await this.file(accountId, storeId, id);
      return record && [storeId, record.createdAt, record.fileId];
    });
    if (range === undefined) return undefined;
    const index = (await this.#database).transaction("vectorStoreFiles").store.index("store");
    const items: VectorStoreFileRecord[] = [];
    let cursor = range && (await index.openCursor(range, query.order === "asc" ? "next" : "prev"));
    for (; cursor && items.length <= query.limit; cursor = await cursor.continue()) {
      const record = cursor.value;
      if (record.accountId !== accountId) return undefined;
      if (query.filter !== undefined && record.status !== query.filter) continue;
      if (query.batchId !== undefined && record.batchId !== query.batchId) continue;
      items.push(record);
    }
    return { items: items.slice(0, query.limit), hasMore: items.length > query.limit };
  }

  /** Replaces a file's attributes; what a search filters by changes with them. */
  async setAttributes(
    accountId: string,
    storeId: string,
    fileId: string,
    attributes: VectorStoreFileRecord["attributes"],
  ): Promise<VectorStoreFileRecord | undefined> {
    return this.#changeFile(accountId, storeId, fileId, (file) => ({ ...file, attributes }));
  }

  /** Removes a file from its store with its chunks, its space given back; whether there was one. */
  async removeFile(accountId: string, storeId: string, fileId: string): Promise<boolean> {
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const [store, file] = await Promise.all([
        transaction.objectStore("vectorStores").get(storeId),
        transaction.objectStore("vectorStoreFiles").get([storeId, fileId]),
      ]);
      if (!store || !file || file.accountId !== accountId) return false;
      await Promise.all([
        transaction.objectStore("vectorStoreFiles").delete([storeId, fileId]),
        transaction.objectStore("vectorChunks").delete(fileChunks(storeId, fileId)),
      ]);
      const counts = { ...store.counts, [file.status]: Math.max(0, store.counts[file.status] - 1) };
      const usageBytes = store.usageBytes - file.usageBytes;
      const next = resized({ ...store, counts, usageBytes, revision: store.revision + 1 }, -file.bytes);
      await countStored(transaction.objectStore("storage"), accountId, "vector_stores", {
        bytes: next.bytes - store.bytes,
        items: -1,
      });
      await transaction.objectStore("vectorStores").put(next);
      return true;
    });
  }

  /** The files still being indexed, in every account: what the indexer has left, after a restart too. */
  async pendingFiles(): Promise<VectorStoreFileRecord[]> {
    return (await this.#database).getAllFromIndex("vectorStoreFiles", "pending");
  }

  /**
   * Writes a file's chunks, not yet embedded, counted with their vectors to come against the
   * account's quota (403 past it, and nothing is written); false when the file is no longer
   * being indexed (removed, cancelled).
   */
  async chunked(file: VectorStoreFileRecord, chunks: string[], dimensions: number): Promise<boolean> {
    const usageBytes = chunks.reduce((sum, text) => sum + chunkBytes(text, dimensions), 0);
    await this.#storage.ensureOriginRoom(usageBytes);
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const [store, current] = await this.#indexing(transaction, file);
      if (!store || !current) return false;
      const next = { ...current, chunks: chunks.length, usageBytes };
      next.bytes = jsonBytes({ ...next, bytes: 0 }) + usageBytes;
      const grown = resized({ ...store, usageBytes: store.usageBytes + usageBytes }, next.bytes - current.bytes);
      await countStored(transaction.objectStore("storage"), store.accountId, "vector_stores", {
        bytes: grown.bytes - store.bytes,
        items: 0,
      });
      const chunkStore = transaction.objectStore("vectorChunks");
      await Promise.all(
        chunks.map((text, place) =>
          chunkStore.put({ storeId: store.id, fileId: file.fileId, place, text, vector: null }),
        ),
      );
      await transaction.objectStore("vectorStoreFiles").put(next);
      await transaction.objectStore("vectorStores").put(grown);
      return true;
    });
  }

  /** The file's next `count` chunks not yet embedded, in order. */
  async unembedded(file: VectorStoreFileRecord, count: number): Promise<VectorChunkRecord[]> {
    const range = IDBKeyRange.bound([file.storeId, file.fileId, file.embedded], [file.storeId, file.fileId, []]);
    return (await this.#database).getAll("vectorChunks", range, count);
  }

  /**
   * Writes the vectors of the chunks from `from` on, and marks the file completed once every
   * chunk has one; false when the file is no longer being indexed.
   */
  async embeddedChunks(
    file: VectorStoreFileRecord,
    from: number,
    vectors: Float32Array[],
    tokens: number,
  ): Promise<boolean> {
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const [store, current] = await this.#indexing(transaction, file);
      if (!store || !current || current.embedded !== from) return false;
      const chunkStore = transaction.objectStore("vectorChunks");
      await Promise.all(
        vectors.map(async (vector, offset) => {
          const chunk = await chunkStore.get([store.id, file.fileId, from + offset]);
          if (chunk) await chunkStore.put({ ...chunk, vector });
        }),
      );
      const next: VectorStoreFileRecord = {
        ...current,
        embedded: from + vectors.length,
        embeddedTokens: (current.embeddedTokens ?? 0) + tokens,
      };
      if (next.embedded >= (next.chunks ?? Infinity))
        await this.#settleFile(transaction, store, next, "completed", null);
      else await transaction.objectStore("vectorStoreFiles").put(next);
      return true;
    });
  }

  /** Fails a file that is being indexed, with the reason, and frees its chunks. */
  async failed(file: VectorStoreFileRecord, lastError: NonNullable<VectorStoreFileRecord["lastError"]>): Promise<void> {
    await this.#endIndexing(file, "failed", lastError);
  }

  /** Cancels the batch's files still being indexed; the batch, or undefined when it is not the account's. */
  async cancelBatch(accountId: string, storeId: string, batchId: string): Promise<FileBatchRecord | undefined> {
    const batch = await this.batch(accountId, storeId, batchId);
    if (!batch) return undefined;
    const database = await this.#database;
    await database.put("fileBatches", { ...batch, cancelled: true });
    const files = await database.getAllFromIndex("vectorStoreFiles", "batch", [storeId, batchId]);
    for (const file of files) if (file.status === "in_progress") await this.#endIndexing(file, "cancelled", null);
    return { ...batch, cancelled: true };
  }

  async #endIndexing(
    file: VectorStoreFileRecord,
    status: "failed" | "cancelled",
    lastError: VectorStoreFileRecord["lastError"],
  ): Promise<void> {
    const transaction = await this.#writing();
    await committed(transaction, async () => {
      const [store, current] = await this.#indexing(transaction, file);
      if (!store || !current) return;
      await transaction.objectStore("vectorChunks").delete(fileChunks(store.id, file.fileId));
      const freed = current.usageBytes;
      const next = { ...current, usageBytes: 0, bytes: current.bytes - freed };
      const shrunk = resized({ ...store, usageBytes: store.usageBytes - freed }, -freed);
      await countStored(transaction.objectStore("storage"), store.accountId, "vector_stores", {
        bytes: shrunk.bytes - store.bytes,
        items: 0,
      });
      await this.#settleFile(transaction, shrunk, next, status, lastError);
    });
  }

  /** Ends a file's indexing with `status`, moving the store's counts, in the caller's transaction. */
  async #settleFile(
    transaction: Writing,
    store: VectorStoreRecord,
    file: VectorStoreFileRecord,
    status: Status,
    lastError: VectorStoreFileRecord["lastError"],
  ): Promise<void> {
    const { pending: _pending, ...rest } = file;
    await transaction.objectStore("vectorStoreFiles").put({ ...rest, status, lastError });
    const counts = { ...store.counts, in_progress: Math.max(0, store.counts.in_progress - 1) };
    counts[status]++;
    await transaction.objectStore("vectorStores").put({ ...store, counts, revision: store.revision + 1 });
  }

  /** The store and the file, read in `transaction`, when the file is still being indexed. */
  async #indexing(
    transaction: Writing,
    file: VectorStoreFileRecord,
  ): Promise<[VectorStoreRecord | undefined, VectorStoreFileRecord | undefined]> {
    const [store, current] = await Promise.all([
      transaction.objectStore("vectorStores").get(file.storeId),
      transaction.objectStore("vectorStoreFiles").get([file.storeId, file.fileId]),
    ]);
    return current?.status === "in_progress" ? [store, current] : [undefined, undefined];
  }

  /** Records a batch of files added to a store. */
  async createBatch(batch: Omit<FileBatchRecord, "createdAt" | "cancelled">): Promise<FileBatchRecord> {
    const record = { ...batch, createdAt: this.#clock(), cancelled: false };
    await (await this.#database).put("fileBatches", record);
    return record;
  }

  /** The account's batch `batchId` of store `storeId`; undefined otherwise. */
  async batch(accountId: string, storeId: string, batchId: string): Promise<FileBatchRecord | undefined> {
    const record = await (await this.#database).get("fileBatches", [storeId, batchId]);
    return record?.accountId === accountId && record.storeId === storeId ? record : undefined;
  }

  /** The batch's files by status. */
  async batchCounts(batch: FileBatchRecord): Promise<VectorStoreRecord["counts"]> {
    const files = await (await this.#database).getAllFromIndex("vectorStoreFiles", "batch", [batch.storeId, batch.id]);
    const counts = emptyCounts();
    for (const file of files) counts[file.status]++;
    return counts;
  }

  /** The file's chunks, in order, as the store parsed them. */
  async chunksOf(file: VectorStoreFileRecord): Promise<string[]> {
    const chunks = await (await this.#database).getAll("vectorChunks", fileChunks(file.storeId, file.fileId));
    return chunks.map((chunk) => chunk.text);
  }

  /** What a search of the account's store reads: its completed files and their chunks. */
  async searchable(accountId: string, storeId: string): Promise<SearchableStore | undefined> {
    const transaction = (await this.#database).transaction(["vectorStores", "vectorStoreFiles", "vectorChunks"]);
    const store = await transaction.objectStore("vectorStores").get(storeId);
    if (store?.accountId !== accountId) return undefined;
    const [files, chunks] = await Promise.all([
      transaction.objectStore("vectorStoreFiles").index("store").getAll(storeFiles(storeId)),
      transaction.objectStore("vectorChunks").getAll(storeChunks(storeId)),
    ]);
    const done = new Map(files.filter((file) => file.status === "completed").map((file) => [file.fileId, file]));
    return { store, files: done, chunks: chunks.filter((chunk) => chunk.vector !== null && done.has(chunk.fileId)) };
  }

  async #changeStore(
    accountId: string,
    id: string,
    change: (store: VectorStoreRecord) => Promise<VectorStoreRecord>,
  ): Promise<VectorStoreRecord | undefined> {
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const store = await transaction.objectStore("vectorStores").get(id);
      if (store?.accountId !== accountId) return undefined;
      const next = resized(await change(store), 0);
      await countStored(transaction.objectStore("storage"), accountId, "vector_stores", {
        bytes: next.bytes - store.bytes,
        items: 0,
      });
      await transaction.objectStore("vectorStores").put(next);
      return next;
    });
  }

  async #changeFile(
    accountId: string,
    storeId: string,
    fileId: string,
    change: (file: VectorStoreFileRecord) => VectorStoreFileRecord,
  ): Promise<VectorStoreFileRecord | undefined> {
    const transaction = await this.#writing();
    return committed(transaction, async () => {
      const [store, file] = await Promise.all([
        transaction.objectStore("vectorStores").get(storeId),
        transaction.objectStore("vectorStoreFiles").get([storeId, fileId]),
      ]);
      if (!store || file?.accountId !== accountId) return undefined;
      const next = change(file);
      next.bytes = jsonBytes({ ...next, bytes: 0 }) + next.usageBytes;
      const grown = resized({ ...store, revision: store.revision + 1 }, next.bytes - file.bytes);
      await countStored(transaction.objectStore("storage"), accountId, "vector_stores", {
        bytes: grown.bytes - store.bytes,
        items: 0,
      });
      await transaction.objectStore("vectorStoreFiles").put(next);
      await transaction.objectStore("vectorStores").put(grown);
      return next;
    });
  }
}

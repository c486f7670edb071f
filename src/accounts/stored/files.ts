/**
 * Files uploaded through `/v1/files`, in the origin's database. Each is its account's own
 * (another account's id is not found), counted against its storage quota with its record, and
 * kept until it is deleted or expires. A file's record and its bytes are written in one
 * transaction, and deleted in one: an upload cut short leaves nothing. Each upload deletes a few
 * of the expired files, giving their space back, so the work per request stays bounded.
 */
import { jsonBytes } from "../json-bytes.js";
import { countStored, type AccountStorage } from "../storage.js";
import type { AccountsDatabase, FileRecord } from "../database.js";
import { committed, deleteFew } from "./kept-records.js";

/** Which of an account's files a page holds: those after `after`, in `order`, of `purpose` if it is given. */
export interface FilesQuery {
  after?: string | undefined;
  limit: number;
  order: "asc" | "desc";
  purpose?: string | undefined;
}

const ownFiles = (accountId: string) => IDBKeyRange.bound([accountId], [accountId, Infinity]);

export class StoredFiles {
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

  /**
   * Stores a file and its bytes, counted against its account's quota (403 past it, 507 when the
   * origin is nearly full), in one transaction with the expired files' deletion; the record stored.
   */
  async save(file: Omit<FileRecord, "createdAt" | "size" | "bytes">, content: Uint8Array): Promise<FileRecord> {
    const now = this.#clock();
    const record: FileRecord = { ...file, createdAt: now, size: content.byteLength, bytes: 0 };
    record.bytes = content.byteLength + jsonBytes(record);
    await this.#storage.ensureOriginRoom(record.bytes);
    const transaction = (await this.#database).transaction(["files", "fileContents", "storage"], "readwrite");
    await committed(transaction, async () => {
      const usage = transaction.objectStore("storage");
      await countStored(usage, record.accountId, "files", { bytes: record.bytes, items: 1 });
      await transaction.objectStore("files").put(record);
      await transaction.objectStore("fileContents").put({ id: record.id, content });
      const expired = await transaction.objectStore("files").index("expiresAt").openCursor(IDBKeyRange.upperBound(now));
      await deleteFew(expired, usage, "files", ({ id }) => transaction.objectStore("fileContents").delete(id));
    });
    return record;
  }

  /** The account's file `id`, unexpired; undefined otherwise. */
  async file(accountId: string, id: string): Promise<FileRecord | undefined> {
    return this.#visible(await (await this.#database).get("files", id), accountId);
  }

  /** The account's file `id`, unexpired, with its bytes, read in one transaction; undefined otherwise. */
  async content(accountId: string, id: string): Promise<{ file: FileRecord; content: Uint8Array } | undefined> {
    const transaction = (await this.#database).transaction(["files", "fileContents"]);
    const [record, bytes] = await Promise.all([
      transaction.objectStore("files").get(id),
      transaction.objectStore("fileContents").get(id),
    ]);
    const file = this.#visible(record, accountId);
    return file && bytes ? { file, content: bytes.content } : undefined;
  }

  /**
   * A page of the account's unexpired files, in upload order or its reverse, and whether more
   * follow; undefined when `after` names none of the account's files.
   */
  async page(accountId: string, query: FilesQuery): Promise<{ files: FileRecord[]; hasMore: boolean } | undefined> {
    let range = ownFiles(accountId);
    if (query.after !== undefined) {
      const after = await this.file(accountId, query.after);
      if (!after) return undefined;
      const key = [accountId, after.createdAt, after.id];
      range =
        query.order === "asc"
          ? IDBKeyRange.bound(key, [accountId, Infinity], true)
          : IDBKeyRange.bound([accountId], key, false, true);
    }
    const index = (await this.#database).transaction("files").store.index("account");
    const files: FileRecord[] = [];
    let cursor = await index.openCursor(range, query.order === "asc" ? "next" : "prev");
    for (; cursor && files.length <= query.limit; cursor = await cursor.continue()) {
      const record = this.#visible(cursor.value, accountId);
      if (record && (query.purpose === undefined || record.purpose === query.purpose)) files.push(record);
    }
    return { files: files.slice(0, query.limit), hasMore: files.length > query.limit };
  }

  /** Deletes the account's file `id` and its bytes, its space given back, in one transaction; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    const transaction = (await this.#database).transaction(["files", "fileContents", "storage"], "readwrite");
    return committed(transaction, async () => {
      const record = this.#visible(await transaction.objectStore("files").get(id), accountId);
      if (!record) return false;
      await Promise.all([
        transaction.objectStore("files").delete(id),
        transaction.objectStore("fileContents").delete(id),
      ]);
      await countStored(transaction.objectStore("storage"), accountId, "files", { bytes: -record.bytes, items: -1 });
      return true;
    });
  }

  #visible(record: FileRecord | undefined, accountId: string): FileRecord | undefined {
    if (!record || record.accountId !== accountId) return undefined;
    return record.expiresAt !== null && record.expiresAt <= this.#clock() ? undefined : record;
  }
}

/**
 * The accounts' database in IndexedDB, through idb (still named `webgpu-inference-policy`, so no data moves). One database per origin, shared by the worker and
 * every page: IndexedDB serialises overlapping read-write transactions across all of them, which
 * is what makes reserve-then-settle safe under concurrency.
 *
 * Money is integer nano-USD (safe integers), never floats.
 */
import { openDB, type DBSchema, type IDBPDatabase, type IDBPTransaction, type StoreNames } from "idb";
import { jsonBytes } from "./json-bytes.js";

export interface AccountRecord {
  id: string;
  name: string;
  /** Σ credits − Σ charges. */
  balanceNanoUsd: number;
  /** Σ open reservations; what may be spent is balance − reserved. */
  reservedNanoUsd: number;
  createdAt: number;
}

export interface KeyRecord {
  id: string;
  accountId: string;
  name: string | null;
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  hash: string;
  /** What a person sees to tell keys apart, e.g. `sk-3fQ9…`. */
  prefix: string;
  status: "active" | "revoked";
  rpm: number;
  tpm: number;
  createdAt: number;
  lastUsedAt: number | null;
}

export interface Timings {
  receivedAt: number;
  firstTokenAt?: number;
  finishedAt: number;
}

export interface LedgerEntry {
  id: string;
  /** Assigned by the store in commit order, across every tab and the worker; not part of the public record. */
  seq?: number;
  kind: "credit" | "charge";
  accountId: string;
  keyId?: string;
  requestId?: string;
  model?: string;
  promptTokens?: number;
  completionTokens?: number;
  amountNanoUsd: number;
  status: "completed" | "aborted" | "failed";
  createdAt: number;
  timings?: Timings;
  /** The upstream that served it, for a request routed remotely. */
  upstream?: string;
  /** The upstream reported no usage, so the tokens were counted here with the model's tokenizer. */
  usageEstimated?: boolean;
  /** The tokens reported cost more than was reserved at admission; the reservation was charged. */
  chargeCapped?: boolean;
}

export interface ReservationRecord {
  requestId: string;
  accountId: string;
  keyId: string;
  model: string;
  /** The price at admission, so a catalogue change mid-request does not change the bill. */
  price: { inputNanoUsdPerToken: number; outputNanoUsdPerToken: number };
  amountNanoUsd: number;
  admittedTokens: number;
  /** The worker instance that holds it; another instance finding it at start-up releases it. */
  holder: string;
  windowStart: number;
  createdAt: number;
}

export interface WindowRecord {
  keyId: string;
  windowStart: number;
  requests: number;
  tokens: number;
}

/**
 * A secret the worker sends to an upstream. It is kept as given (the worker must send it) and
 * never read back by the admin API; only the worker's forwarding reads it.
 */
interface UpstreamCredentialRecord {
  name: string;
  secret: string;
  /** The only origin the secret is sent to (a record stored before origins were kept has none, and is sent nowhere). */
  origin?: string;
  updatedAt: number;
}

/**
 * A stored Responses API response (`store`, the default): what its `previous_response_id` and its
 * items' `item_reference`s resolve to, for the account that made it. Kept 30 days, as OpenAI keeps
 * them. A continuation keeps only its own items and names the response it continued, so a chain
 * of continuations is stored once, growing with the conversation, never copied turn by turn.
 */
export interface StoredResponseRecord {
  id: string;
  accountId: string;
  createdAt: number;
  /** The stored response it continued (`previous_response_id`); absent (or null) when it continued none. */
  previousResponseId?: string | null;
  /**
   * Its own input items, as kept (fields nothing reads left out). A record written before
   * continuations referred to their predecessor holds its whole conversation here.
   */
  input: unknown[];
  /**
   * How many items its conversation held: the last this many of (the previous response's
   * conversation and output, then `input`). Absent in an older record: `input.length`.
   */
  conversationLength?: number;
  /** Its output items, which later input can reference. */
  output: unknown[];
  /** The response object as it was answered, less its `output` (kept once, above), for `GET /v1/responses/{id}`. */
  response: unknown;
  /** The output items' ids, indexed so that an `item_reference` finds its response. */
  itemIds: string[];
  /** Its size as counted against the account's storage quota (its JSON, in UTF-8 bytes). */
  bytes: number;
}

/** A chat completion created with `store: true`, for the stored-completions endpoints. */
export interface StoredCompletionRecord {
  id: string;
  accountId: string;
  createdAt: number;
  model: string;
  metadata: Record<string, string>;
  /** The completion as it was answered (a stream's chunks put together). */
  completion: unknown;
  /** The request's messages, with the fields the listing reads. */
  messages: unknown[];
  /**
   * Its keys in the `listing` index, one per filter that can find it (see `listingKeys`), so a
   * filtered page reads the index and no record that does not match.
   */
  listing: [string, string, number, string][];
  /** Its size as counted against the account's storage quota. */
  bytes: number;
}

/**
 * A conversation of the Conversations API, for a Responses request to continue and add to. Kept
 * until deleted, as OpenAI keeps them. Its items are records of their own (below), so adding to
 * a long conversation writes only what is added.
 */
export interface ConversationRecord {
  id: string;
  accountId: string;
  createdAt: number;
  metadata: Record<string, string>;
  /** The place the next item added takes: items are in the order of their places. */
  nextPlace: number;
  /** Its own size and its items', and how many items it has: what deleting it gives back to the quota. */
  bytes: number;
  items: number;
}

/** An item of a conversation: an input item as a Responses request takes it, with an id unique in the conversation. */
export interface ConversationItemRecord {
  conversationId: string;
  place: number;
  item: { id: string };
  /** Its size as counted against the account's storage quota. */
  bytes: number;
}

/**
 * A file uploaded through `/v1/files`, kept until deleted or until it expires (`expiresAt`). Its
 * bytes are a record of their own (below), so a listing reads none of them.
 */
export interface FileRecord {
  id: string;
  accountId: string;
  createdAt: number;
  /** Epoch ms after which it is gone; null when it is kept until deleted. */
  expiresAt: number | null;
  filename: string;
  purpose: string;
  /** The file's size. */
  size: number;
  /** Its size and its record's, as counted against the account's storage quota. */
  bytes: number;
}

/** A file's bytes, as uploaded. */
interface FileContentRecord {
  id: string;
  content: Uint8Array;
}

/**
 * A vector store: its files' chunks, embedded and indexed for search. What its files and chunks
 * take is counted on it (`bytes`), so deleting it gives all of that back at once.
 */
export interface VectorStoreRecord {
  id: string;
  accountId: string;
  createdAt: number;
  name: string;
  description: string | null;
  metadata: Record<string, string>;
  /** The catalogue's embedding model its chunks and queries are embedded with. */
  embeddingModel: string;
  /** `expires_after.days`, counted from `lastActiveAt`; null when it is kept until deleted. */
  expiresAfterDays: number | null;
  lastActiveAt: number;
  /** Epoch ms after which it is gone (`lastActiveAt` + the days); null when it is kept until deleted. */
  expiresAt: number | null;
  /** Its files by status. */
  counts: Record<VectorStoreFileRecord["status"], number>;
  /** What its chunks take (their text and vectors): OpenAI's `usage_bytes`. */
  usageBytes: number;
  /** Its record's size, its files' and its chunks', as counted against the account's storage quota. */
  bytes: number;
  /** Changes whenever what a search of it can find changes, so an index built of it knows it is stale. */
  revision: number;
}

/**
 * A file of a vector store, and how far its indexing got: chunked (`chunks` set), then embedded a
 * batch at a time (`embedded`), billed to the key that added it. `pending` is set while it is
 * `in_progress`, so the indexer finds the files it has left, after a restart too.
 */
export interface VectorStoreFileRecord {
  storeId: string;
  fileId: string;
  accountId: string;
  createdAt: number;
  filename: string;
  status: "in_progress" | "completed" | "cancelled" | "failed";
  lastError: { code: "server_error" | "unsupported_file" | "invalid_file"; message: string } | null;
  attributes: Record<string, string | number | boolean>;
  chunking: { maxTokens: number; overlapTokens: number };
  batchId: string | null;
  /** The key its embedding is admitted and billed under, and the origin it was added from. */
  keyId: string;
  origin: string;
  pending?: 1;
  /** How many chunks it has; null until it is chunked. */
  chunks: number | null;
  /** How many of its chunks are embedded: they are embedded in order. */
  embedded: number;
  /** The tokens its embedded chunks were billed for (absent on a record from before it was counted: none). */
  embeddedTokens?: number;
  /** What its chunks take. */
  usageBytes: number;
  /** Its record's size and its chunks', as counted on its store. */
  bytes: number;
}

/** A chunk of a store's file: its text, and its unit vector once embedded. */
export interface VectorChunkRecord {
  storeId: string;
  fileId: string;
  place: number;
  text: string;
  vector: Float32Array | null;
}

/** A batch of files added to a store at once; its counts are its files'. */
export interface FileBatchRecord {
  id: string;
  storeId: string;
  accountId: string;
  createdAt: number;
  cancelled: boolean;
}

/** The kinds of record an account stores, each with its own line in `storageUsage`. */
export type StoredKind = "responses" | "completions" | "conversations" | "files" | "vector_stores";

export interface StorageAmount {
  bytes: number;
  items: number;
}

/**
 * What an account has stored, by kind, and the most it may store (`quota`; the default when
 * unset). Written in the same transaction as every stored write and deletion, so it is exact.
 */
export interface StorageUsageRecord {
  accountId: string;
  kinds: Record<StoredKind, StorageAmount>;
  quota?: StorageAmount;
}

/** A key the worker keeps for itself (compaction's seal): never readable through the API. */
interface SecretRecord {
  name: string;
  key: CryptoKey;
}

interface AccountsSchema extends DBSchema {
  accounts: { key: string; value: AccountRecord };
  keys: { key: string; value: KeyRecord; indexes: { hash: string; accountId: string } };
  ledger: {
    key: number;
    value: LedgerEntry;
    indexes: { id: string; accountId: string; keyId: string; createdAt: number };
  };
  reservations: { key: string; value: ReservationRecord; indexes: { holder: string } };
  windows: { key: string; value: WindowRecord };
  upstreamCredentials: { key: string; value: UpstreamCredentialRecord };
  responses: {
    key: string;
    value: StoredResponseRecord;
    indexes: { itemIds: string; createdAt: number; accountId: string };
  };
  completions: {
    key: string;
    value: StoredCompletionRecord;
    indexes: { createdAt: number; account: [string, number, string]; listing: [string, string, number, string] };
  };
  conversations: { key: string; value: ConversationRecord; indexes: { accountId: string } };
  conversationItems: { key: [string, number]; value: ConversationItemRecord; indexes: { id: [string, string] } };
  storage: { key: string; value: StorageUsageRecord };
  secrets: { key: string; value: SecretRecord };
  files: {
    key: string;
    value: FileRecord;
    indexes: { account: [string, number, string]; expiresAt: number };
  };
  fileContents: { key: string; value: FileContentRecord };
  vectorStores: {
    key: string;
    value: VectorStoreRecord;
    indexes: { account: [string, number, string]; expiresAt: number };
  };
  vectorStoreFiles: {
    key: [string, string];
    value: VectorStoreFileRecord;
    indexes: { store: [string, number, string]; pending: number; batch: [string, string] };
  };
  vectorChunks: { key: [string, string, number]; value: VectorChunkRecord };
  fileBatches: { key: [string, string]; value: FileBatchRecord };
}

export type AccountsDatabase = IDBPDatabase<AccountsSchema>;

/** A read-write transaction over the stores named. */
export type WritingTransaction<Names extends StoreNames<AccountsSchema>[]> = IDBPTransaction<
  AccountsSchema,
  Names,
  "readwrite"
>;

const databaseName = "webgpu-inference-policy";

type UpgradeTransaction = IDBPTransaction<AccountsSchema, ArrayLike<StoreNames<AccountsSchema>>, "versionchange">;

/**
 * The keys of a stored completion in the `listing` index: one listing every completion of its
 * account (`""`), one for its model and one per metadata pair, each ordered by creation. A page
 * walks the keys of one filter and checks the others by key, so it reads no record it skips.
 */
export function listingKeys(
  record: Pick<StoredCompletionRecord, "accountId" | "createdAt" | "id" | "model" | "metadata">,
): [string, string, number, string][] {
  const filters = ["", ...listingFilters(record.model, record.metadata)];
  return filters.map((filter) => [record.accountId, filter, record.createdAt, record.id]);
}

/** The filters a listing query names, as `listing` keys spell them. */
export function listingFilters(model: string | undefined, metadata: Record<string, string>): string[] {
  return [
    ...(model !== undefined ? [`model\u0000${model}`] : []),
    ...Object.entries(metadata).map(([key, value]) => `metadata\u0000${key}\u0000${value}`),
  ];
}

/** Migrations by version; each runs once, in order, inside the upgrade transaction. */
const migrations: ((database: IDBPDatabase<AccountsSchema>, transaction: UpgradeTransaction) => void)[] = [
  (database) => {
    database.createObjectStore("accounts", { keyPath: "id" });
    const keys = database.createObjectStore("keys", { keyPath: "id" });
    keys.createIndex("hash", "hash", { unique: true });
    keys.createIndex("accountId", "accountId");
    const ledger = database.createObjectStore("ledger", { keyPath: "seq", autoIncrement: true });
    ledger.createIndex("id", "id", { unique: true });
    ledger.createIndex("accountId", "accountId");
    ledger.createIndex("keyId", "keyId");
    ledger.createIndex("createdAt", "createdAt");
    const reservations = database.createObjectStore("reservations", { keyPath: "requestId" });
    reservations.createIndex("holder", "holder");
    database.createObjectStore("windows", { keyPath: "keyId" });
  },
  (database) => {
    database.createObjectStore("upstreamCredentials", { keyPath: "name" });
  },
  (database) => {
    const responses = database.createObjectStore("responses", { keyPath: "id" });
    responses.createIndex("itemIds", "itemIds", { multiEntry: true });
    responses.createIndex("createdAt", "createdAt");
  },
  (database) => {
    const completions = database.createObjectStore("completions", { keyPath: "id" });
    completions.createIndex("createdAt", "createdAt");
    // An account's completions in the order they were made (the id orders those made in one millisecond).
    completions.createIndex("account", ["accountId", "createdAt", "id"]);
  },
  (database) => {
    database.createObjectStore("conversations", { keyPath: "id" });
    const items = database.createObjectStore("conversationItems", { keyPath: ["conversationId", "place"] });
    // The item's own id, read from the item: one place holds it.
    items.createIndex("id", ["conversationId", "item.id"], { unique: true });
  },
  (database, transaction) => {
    database.createObjectStore("storage", { keyPath: "accountId" });
    database.createObjectStore("secrets", { keyPath: "name" });
    transaction.objectStore("responses").createIndex("accountId", "accountId");
    transaction.objectStore("conversations").createIndex("accountId", "accountId");
    transaction.objectStore("completions").createIndex("listing", "listing", { multiEntry: true });
    void countStoredData(transaction);
  },
  (database) => {
    const files = database.createObjectStore("files", { keyPath: "id" });
    // An account's files in the order they were uploaded (the id orders those of one millisecond).
    files.createIndex("account", ["accountId", "createdAt", "id"]);
    // Only files that expire are in it: a file kept until deleted has a null `expiresAt`.
    files.createIndex("expiresAt", "expiresAt");
    database.createObjectStore("fileContents", { keyPath: "id" });
  },
  (database) => {
    const stores = database.createObjectStore("vectorStores", { keyPath: "id" });
    stores.createIndex("account", ["accountId", "createdAt", "id"]);
    stores.createIndex("expiresAt", "expiresAt");
    const files = database.createObjectStore("vectorStoreFiles", { keyPath: ["storeId", "fileId"] });
    files.createIndex("store", ["storeId", "createdAt", "fileId"]);
    // Only files still being indexed are in it: `pending` is deleted when a file is done.
    files.createIndex("pending", "pending");
    files.createIndex("batch", ["storeId", "batchId"]);
    // A store's chunks are a key range, [storeId] to [storeId, []], a file's [storeId, fileId] to [storeId, fileId, []].
    database.createObjectStore("vectorChunks", { keyPath: ["storeId", "fileId", "place"] });
    // A store's batches are a key range too.
    database.createObjectStore("fileBatches", { keyPath: ["storeId", "id"] });
  },
];

/** Sizes the records stored before the quota, and writes each account's usage, in the upgrade transaction. */
async function countStoredData(transaction: UpgradeTransaction): Promise<void> {
  const usage = new Map<string, StorageUsageRecord>();
  const add = (accountId: string, kind: StoredKind, bytes: number, items: number) => {
    const record = usage.get(accountId) ?? { accountId, kinds: emptyKinds() };
    record.kinds[kind].bytes += bytes;
    record.kinds[kind].items += items;
    usage.set(accountId, record);
  };
  for (let cursor = await transaction.objectStore("responses").openCursor(); cursor; cursor = await cursor.continue()) {
    const record = { ...cursor.value, bytes: 0 };
    record.bytes = jsonBytes(record);
    add(record.accountId, "responses", record.bytes, 1);
    await cursor.update(record);
  }
  for (
    let cursor = await transaction.objectStore("completions").openCursor();
    cursor;
    cursor = await cursor.continue()
  ) {
    const record = { ...cursor.value, listing: listingKeys(cursor.value), bytes: 0 };
    record.bytes = jsonBytes(record);
    add(record.accountId, "completions", record.bytes, 1);
    await cursor.update(record);
  }
  const items = transaction.objectStore("conversationItems");
  for (
    let cursor = await transaction.objectStore("conversations").openCursor();
    cursor;
    cursor = await cursor.continue()
  ) {
    const conversation = { ...cursor.value, bytes: 0, items: 1 };
    const range = IDBKeyRange.bound([conversation.id, -Infinity], [conversation.id, Infinity]);
    for (let item = await items.openCursor(range); item; item = await item.continue()) {
      const counted = { ...item.value, bytes: 0 };
      counted.bytes = jsonBytes(counted);
      conversation.bytes += counted.bytes;
      conversation.items++;
      await item.update(counted);
    }
    conversation.bytes += jsonBytes({ ...conversation, bytes: 0 });
    add(conversation.accountId, "conversations", conversation.bytes, conversation.items);
    await cursor.update(conversation);
  }
  for (const record of usage.values()) await transaction.objectStore("storage").put(record);
}

/** No stored data of any kind. */
export function emptyKinds(): Record<StoredKind, StorageAmount> {
  return {
    responses: { bytes: 0, items: 0 },
    completions: { bytes: 0, items: 0 },
    conversations: { bytes: 0, items: 0 },
    files: { bytes: 0, items: 0 },
    vector_stores: { bytes: 0, items: 0 },
  };
}

/**
 * The accounts' database, upgraded to this code's version. An upgrade waits until every connection of
 * an older version is closed, and the worker and every tab of the app hold one. So a connection
 * closes itself as soon as a newer version of the app asks for the database (its code knows only
 * the older layout), with a warning to reload the tab, and the new worker's upgrade goes on instead
 * of waiting on that tab. A version from before this rule does not close; the warning names the cure.
 */
export function openAccountsDatabase(name = databaseName): Promise<AccountsDatabase> {
  return openDB<AccountsSchema>(name, migrations.length, {
    upgrade(database, oldVersion, _newVersion, transaction) {
      for (let version = oldVersion; version < migrations.length; version++)
        migrations[version]?.(database, transaction);
    },
    blocked() {
      console.warn(
        `[webgpu-inference] The database "${name}" waits for a tab of an older version of this app to let go of it; until then no request is answered. Close or reload the app's other tabs.`,
      );
    },
    blocking(_currentVersion, _newVersion, event) {
      (event.target as IDBDatabase).close();
      console.warn(
        `[webgpu-inference] A newer version of this app upgraded the database "${name}", so this tab let go of it. Reload this tab to use it again.`,
      );
    },
  });
}

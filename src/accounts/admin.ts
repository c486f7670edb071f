/**
 * The admin API: accounts, credits, keys, limits and the ledger. It works on the same database
 * as the worker, from a page (through the handle `startInference` returns) or from a worker.
 */
import { generateKey, hashKey, keyPrefix } from "./keys.js";
import { usdToNano } from "./money.js";
import { ledgerId, type LimitDefaults } from "./accounts.js";
import { deleteStoredData, setStorageQuota, storageUsage, type StorageReport } from "./storage.js";
import type { AccountRecord, KeyRecord, LedgerEntry, AccountsDatabase, StorageAmount } from "./database.js";
import { SetupError } from "../core/errors/setup.js";

export type Account = AccountRecord;
/** A key as the admin API shows it: everything but the hash. */
export type ApiKeyInfo = Omit<KeyRecord, "hash">;

export interface CreatedKey {
  id: string;
  /** The secret. It is shown this once; only its hash is kept. */
  key: string;
  prefix: string;
}

export interface LedgerQuery {
  accountId?: string;
  keyId?: string;
  /** Entries created at or after this time (epoch ms). */
  since?: number;
  /** The newest this many. */
  limit?: number;
}

function newId(prefix: string): string {
  return `${prefix}${Array.from(crypto.getRandomValues(new Uint8Array(9)), (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

function positiveLimit(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new SetupError("invalid_option", `${name} must be a whole number of at least 1; got ${value}`);
  return value;
}

function withoutHash({ hash: _hash, ...key }: KeyRecord): ApiKeyInfo {
  return key;
}

const csvColumns = [
  "id",
  "kind",
  "status",
  "createdAt",
  "accountId",
  "keyId",
  "requestId",
  "model",
  "promptTokens",
  "completionTokens",
  "amountNanoUsd",
] as const;

function csvCell(value: unknown): string {
  if (value === undefined || value === null) return "";
  const text = String(value);
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export class Admin {
  readonly #opening: Promise<AccountsDatabase>;
  readonly #clock: () => number;
  readonly #defaults: LimitDefaults;
  readonly #afterKeyChange: (keyId: string) => Promise<void>;

  /**
   * `afterKeyChange` tells the worker, which keeps keys in memory, that a key was revoked or its
   * limits changed; a change resolves only after it (see src/runtime/bridge/key-changes.ts).
   */
  constructor(options: {
    database: AccountsDatabase | Promise<AccountsDatabase>;
    clock?: () => number;
    defaults: LimitDefaults;
    afterKeyChange?: (keyId: string) => Promise<void>;
  }) {
    this.#opening = Promise.resolve(options.database);
    this.#clock = options.clock ?? Date.now;
    this.#defaults = options.defaults;
    this.#afterKeyChange = options.afterKeyChange ?? (async () => undefined);
  }

  async createAccount(options: { name: string; creditUsd?: number }): Promise<Account> {
    const database = await this.#opening;
    const now = this.#clock();
    const credit = usdToNano(options.creditUsd ?? 0);
    const account: AccountRecord = {
      id: newId("acct_"),
      name: options.name,
      balanceNanoUsd: credit,
      reservedNanoUsd: 0,
      createdAt: now,
    };
    const transaction = database.transaction(["accounts", "ledger"], "readwrite");
    await transaction.objectStore("accounts").add(account);
    if (credit > 0)
      await transaction.objectStore("ledger").add({
        id: ledgerId(now),
        kind: "credit",
        accountId: account.id,
        amountNanoUsd: credit,
        status: "completed",
        createdAt: now,
      });
    await transaction.done;
    return account;
  }

  async credit(accountId: string, usd: number): Promise<Account> {
    const database = await this.#opening;
    const amount = usdToNano(usd);
    const now = this.#clock();
    const transaction = database.transaction(["accounts", "ledger"], "readwrite");
    const account = await transaction.objectStore("accounts").get(accountId);
    if (!account) {
      transaction.abort();
      await transaction.done.catch(() => undefined);
      throw new SetupError("not_found", `no account ${accountId}: create one with admin.createAccount`);
    }
    // Balances are whole nano-USD: a sum past 2^53 would no longer be counted exactly.
    if (!Number.isSafeInteger(account.balanceNanoUsd + amount)) {
      transaction.abort();
      await transaction.done.catch(() => undefined);
      throw new SetupError("invalid_option", `a balance of ${usd} USD more is too large to count in nano-USD`);
    }
    account.balanceNanoUsd += amount;
    await transaction.objectStore("accounts").put(account);
    await transaction.objectStore("ledger").add({
      id: ledgerId(now),
      kind: "credit",
      accountId,
      amountNanoUsd: amount,
      status: "completed",
      createdAt: now,
    });
    await transaction.done;
    return account;
  }

  async getAccount(id: string): Promise<Account | undefined> {
    return (await this.#opening).get("accounts", id);
  }

  async createKey(options: { accountId: string; name?: string; rpm?: number; tpm?: number }): Promise<CreatedKey> {
    const database = await this.#opening;
    if (!(await database.get("accounts", options.accountId)))
      throw new SetupError("not_found", `no account ${options.accountId}: create one with admin.createAccount`);
    const key = generateKey();
    const record: KeyRecord = {
      id: newId("key_"),
      accountId: options.accountId,
      name: options.name ?? null,
      hash: await hashKey(key),
      prefix: keyPrefix(key),
      status: "active",
      rpm: positiveLimit(options.rpm ?? this.#defaults.rpm, "rpm"),
      tpm: positiveLimit(options.tpm ?? this.#defaults.tpm, "tpm"),
      createdAt: this.#clock(),
      lastUsedAt: null,
    };
    await database.add("keys", record);
    return { id: record.id, key, prefix: record.prefix };
  }

  async #updateKey(keyId: string, change: (key: KeyRecord) => void): Promise<ApiKeyInfo> {
    const database = await this.#opening;
    const transaction = database.transaction("keys", "readwrite");
    const key = await transaction.store.get(keyId);
    if (!key) {
      transaction.abort();
      await transaction.done.catch(() => undefined);
      throw new SetupError("not_found", `no key ${keyId}: admin.listKeys names the keys of an account`);
    }
    change(key);
    await transaction.store.put(key);
    await transaction.done;
    await this.#afterKeyChange(keyId);
    return withoutHash(key);
  }

  revokeKey(keyId: string): Promise<ApiKeyInfo> {
    return this.#updateKey(keyId, (key) => {
      key.status = "revoked";
    });
  }

  async setLimits(keyId: string, limits: { rpm?: number; tpm?: number }): Promise<ApiKeyInfo> {
    const rpm = limits.rpm === undefined ? undefined : positiveLimit(limits.rpm, "rpm");
    const tpm = limits.tpm === undefined ? undefined : positiveLimit(limits.tpm, "tpm");
    return this.#updateKey(keyId, (key) => {
      if (rpm !== undefined) key.rpm = rpm;
      if (tpm !== undefined) key.tpm = tpm;
    });
  }

  async listKeys(accountId?: string): Promise<ApiKeyInfo[]> {
    const database = await this.#opening;
    const keys = accountId
      ? await database.getAllFromIndex("keys", "accountId", accountId)
      : await database.getAll("keys");
    return keys.sort((left, right) => left.createdAt - right.createdAt).map(withoutHash);
  }

  /**
   * What the account stores through the API (stored responses, stored chat completions,
   * conversations with their items): bytes and items in all, its quota, and a line per kind.
   */
  async storageUsage(accountId: string): Promise<StorageReport> {
    return storageUsage(await this.#opening, accountId);
  }

  /** Sets the account's storage quota (100 MB and 100,000 items unless set); what it stores already stays. */
  async setStorageQuota(accountId: string, quota: { bytes?: number; items?: number }): Promise<StorageReport> {
    const database = await this.#opening;
    if (!(await database.get("accounts", accountId)))
      throw new SetupError("not_found", `no account ${accountId}: create one with admin.createAccount`);
    return setStorageQuota(database, accountId, quota);
  }

  /** Deletes everything the account stores through the API, in one transaction; what was freed. Its keys and ledger stay. */
  async deleteStoredData(accountId: string): Promise<StorageAmount> {
    return deleteStoredData(await this.#opening, accountId);
  }

  /** Newest first. */
  async ledger(query: LedgerQuery = {}): Promise<LedgerEntry[]> {
    const database = await this.#opening;
    const all =
      query.since !== undefined
        ? await database.getAllFromIndex("ledger", "createdAt", IDBKeyRange.lowerBound(query.since))
        : await database.getAll("ledger");
    const matching = all
      .filter(
        (entry) =>
          (query.accountId === undefined || entry.accountId === query.accountId) &&
          (query.keyId === undefined || entry.keyId === query.keyId),
      )
      .sort((left, right) => (right.seq ?? 0) - (left.seq ?? 0))
      .map(({ seq: _seq, ...entry }) => entry);
    return query.limit === undefined ? matching : matching.slice(0, query.limit);
  }

  /**
   * Stores (or, with null, deletes) the secret an upstream named by `credential` in the catalogue
   * is called with, bound to the upstream's origin (`https://llm.example`): it is sent to that
   * origin only, whatever a configuration later says. Call it once at setup; it is not readable
   * through this API afterwards.
   */
  async setUpstreamCredential(name: string, secret: string | null, options?: { origin: string }): Promise<void> {
    const database = await this.#opening;
    if (secret === null) {
      await database.delete("upstreamCredentials", name);
      return;
    }
    const origin = options?.origin && URL.canParse(options.origin) ? new URL(options.origin).origin : undefined;
    if (!origin || origin === "null") {
      throw new SetupError(
        "invalid_option",
        `setUpstreamCredential('${name}', secret, { origin }) needs the origin the secret is for, e.g. { origin: "https://llm.example" }: it is sent there and nowhere else`,
      );
    }
    await database.put("upstreamCredentials", { name, secret, origin, updatedAt: this.#clock() });
  }

  /** The names of the stored upstream credentials, never their secrets. */
  async listUpstreamCredentials(): Promise<string[]> {
    return (await this.#opening).getAllKeys("upstreamCredentials");
  }

  async exportLedger(format: "json" | "csv" = "json", query: LedgerQuery = {}): Promise<string> {
    const entries = (await this.ledger(query)).reverse();
    if (format === "json") return JSON.stringify(entries, null, 2);
    const rows = entries.map((entry) => csvColumns.map((column) => csvCell(entry[column])).join(","));
    return [csvColumns.join(","), ...rows].join("\n") + "\n";
  }
}

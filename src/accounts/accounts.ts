/**
 * Admission and settlement: authenticate → rate limits → reserve → (generate) → settle.
 *
 * Each step is one IndexedDB transaction, and every check in a step happens before its first
 * write, so a refused request changes nothing. Rate windows are counted in the worker's memory
 * over a stored lease (see `LiveWindow`), so most requests write no window; keys are kept in
 * memory once read (see `authenticate`), so most requests read no key. Invariants, checked
 * by the tests:
 * - balance = Σ credits − Σ charges, per account;
 * - reserved = Σ open reservations, per account, and never more than the balance;
 * - a reservation is settled or released exactly once.
 */
import { AuthenticationError, PermissionDeniedError, RateLimitError } from "../core/errors/api.js";
import { bearerKey, constantTimeEqual, hashKey } from "./keys.js";
import { costNano, formatUsd, type Price } from "./money.js";
import { durationText } from "../core/wire/duration.js";
import type { Liveness } from "./liveness.js";
import type {
  AccountRecord,
  KeyRecord,
  LedgerEntry,
  AccountsDatabase,
  ReservationRecord,
  Timings,
  WindowRecord,
} from "./database.js";

const windowMs = 60_000;

export interface LimitDefaults {
  rpm: number;
  tpm: number;
}

/** What the `X-RateLimit-*` headers report. Reset times are epoch milliseconds. */
export interface RateLimitState {
  limitRequests: number;
  remainingRequests: number;
  resetRequests: number;
  limitTokens: number;
  remainingTokens: number;
  resetTokens: number;
}

/** The windows store, as a transaction opens it. */
interface WindowStore {
  get(key: string): Promise<WindowRecord | undefined>;
  put(value: WindowRecord): Promise<unknown>;
}

export interface AdmitRequest {
  keyId: string;
  /**
   * The key as `authenticate` returned it. Its status and limits then stand for the stored ones
   * (as exact as `authenticate`), so the key is read and its last use written only once a
   * `lastUseIntervalMs`; without it the key is read and written every time.
   */
  key?: KeyRecord;
  requestId: string;
  model: string;
  price: Price;
  promptTokens: number;
  maxCompletionTokens: number;
}

export interface Admission {
  requestId: string;
  key: KeyRecord;
  reservation: ReservationRecord;
  rate: RateLimitState;
}

export interface Settlement {
  promptTokens: number;
  completionTokens: number;
  status: LedgerEntry["status"];
  timings?: Timings;
  upstream?: string;
  usageEstimated?: boolean;
}

export function ledgerId(now: number): string {
  // Unique by the random tail; the store's sequence gives the order.
  const random = Array.from(crypto.getRandomValues(new Uint8Array(6)), (byte) =>
    byte.toString(16).padStart(2, "0"),
  ).join("");
  return `led_${now.toString(36).padStart(10, "0")}_${random}`;
}

/** The ledger's record of what one reserved request cost. */
function chargeEntry(
  reservation: ReservationRecord,
  now: number,
  outcome: Pick<
    LedgerEntry,
    "promptTokens" | "completionTokens" | "amountNanoUsd" | "status" | "timings" | "upstream" | "usageEstimated"
  >,
): LedgerEntry {
  return {
    id: ledgerId(now),
    kind: "charge",
    accountId: reservation.accountId,
    keyId: reservation.keyId,
    requestId: reservation.requestId,
    model: reservation.model,
    ...outcome,
    createdAt: now,
  };
}

function currentWindow(record: WindowRecord | undefined, keyId: string, now: number): WindowRecord {
  if (!record || now >= record.windowStart + windowMs) return { keyId, windowStart: now, requests: 0, tokens: 0 };
  return record;
}

/**
 * A key's rate window as this worker counts it, in memory (one worker serves every tab).
 * IndexedDB holds a lease: the requests and tokens this worker (and any other instance) may
 * admit in the window. A worker takes the lease in blocks before it admits past it, so the
 * stored figures are never below what was admitted: a restarted worker, or a second instance
 * during an update, counts the whole lease as used and can never admit past the limit. Within
 * the lease, counting a request touches no storage.
 */
interface LiveWindow {
  windowStart: number;
  /** Admitted here, plus what other instances had leased when this one last took a lease. */
  requests: number;
  tokens: number;
  /** The stored lease as of this worker's last write. */
  leasedRequests: number;
  leasedTokens: number;
}

/** What one count takes from a window: a request (or none, for a generation's tokens alone) and tokens. */
interface Use {
  requests: number;
  tokens: number;
}

interface LeaseGrant {
  counted: LiveWindow;
  commit(): void;
  rollback(): void;
}

/** The 403's sentence: what the request may cost, what the account has free, and the two ways out. */
function shortOf(request: AdmitRequest, amount: number, account: AccountRecord | undefined): string {
  const balance = account?.balanceNanoUsd ?? 0;
  const held = account?.reservedNanoUsd ?? 0;
  return (
    `This key's account has insufficient balance for this request: it may cost up to ${formatUsd(amount)} ` +
    `(${request.promptTokens} prompt tokens and up to ${request.maxCompletionTokens} completion tokens), and ` +
    `${formatUsd(Math.max(0, balance - held))} is free (a balance of ${formatUsd(balance)}, less ${formatUsd(held)} ` +
    "held for requests in progress). Credit the account (admin.credit), or ask for fewer tokens (max_tokens)."
  );
}

/** A lease block: an eighth of the limit, so about one request in eight writes the lease. */
const blockOf = (limit: number) => Math.max(1, Math.ceil(limit / 8));

function stateOf(key: KeyRecord, window: Pick<WindowRecord, "windowStart" | "requests" | "tokens">): RateLimitState {
  const reset = window.windowStart + windowMs;
  return {
    limitRequests: key.rpm,
    remainingRequests: Math.max(0, key.rpm - window.requests),
    resetRequests: reset,
    limitTokens: key.tpm,
    remainingTokens: Math.max(0, key.tpm - window.tokens),
    resetTokens: reset,
  };
}

/** How often an instance looks for reservations of instances that are gone, beside its start-up. */
export const orphanSweepMs = 60_000;

/** How long a key read from the store may answer for it; the bound on a change made around the admin API. */
export const keyMemoryMs = 60_000;
const keyMemorySize = 1_000;
/** A key's `lastUsedAt` is written at most this often: it is for people, to the minute. */
export const lastUseIntervalMs = 60_000;

const invalidKey = "Incorrect API key provided. You can find your API keys in your account's key settings.";

export class Accounts {
  readonly #database: Promise<AccountsDatabase>;
  readonly #clock: () => number;
  readonly #windows = new Map<string, LiveWindow>();
  /** Valid keys as last read, by hash (see `authenticate`). */
  readonly #keys = new Map<string, { key: KeyRecord; readAt: number }>();
  /** Counts `forgetKey` calls. */
  #keysGeneration = 0;
  /** The generation at which each key was last changed (forgotten), and at which each key record was read. */
  readonly #keyChangedAt = new Map<string, number>();
  readonly #keyReadAt = new WeakMap<KeyRecord, number>();
  /** When this worker last wrote each key's `lastUsedAt`. */
  readonly #lastUseWritten = new Map<string, number>();
  /** This worker instance; reservations held by any other instance are orphans. */
  readonly holder: string;

  readonly #liveness: Liveness | undefined;
  /** When this instance last looked for reservations of instances that are gone. */
  #lastSweep = -Infinity;

  constructor(options: {
    database: AccountsDatabase | Promise<AccountsDatabase>;
    clock: () => number;
    holder: string;
    liveness?: Liveness;
  }) {
    this.#database = Promise.resolve(options.database);
    this.#clock = options.clock;
    this.holder = options.holder;
    this.#liveness = options.liveness;
    this.#liveness?.hold(this.holder);
  }

  /**
   * 401 for a missing, malformed, unknown or revoked key. A valid key is kept in memory once
   * read, so its next requests open no transaction. That is exact because every change to a key
   * reaches `forgetKey` before the admin API resolves (src/runtime/bridge/key-changes.ts); a change made
   * around that API is seen within `keyMemoryMs`. Unknown keys are not kept: a key created a
   * moment ago must work at once.
   */
  async authenticate(authorization: string | null): Promise<KeyRecord> {
    // A lookup that began before a change was forgotten must not remember what it read.
    const generation = this.#keysGeneration;
    const secret = bearerKey(authorization);
    if (!secret) {
      throw new AuthenticationError(
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
      );
    }
    if (!/^sk-[A-Za-z0-9_-]{20,}$/.test(secret)) throw new AuthenticationError(invalidKey);
    const hash = await hashKey(secret);
    const remembered = this.#keys.get(hash);
    if (remembered && this.#clock() - remembered.readAt < keyMemoryMs) return remembered.key;
    const readAt = this.#clock();
    const key = await (await this.#database).getFromIndex("keys", "hash", hash);
    if (!key || !constantTimeEqual(key.hash, hash) || key.status !== "active")
      throw new AuthenticationError(invalidKey);
    const frozen = Object.freeze(key);
    this.#keyReadAt.set(frozen, generation);
    if (generation === this.#keysGeneration) this.#remember(hash, frozen, readAt);
    return frozen;
  }

  #remember(hash: string, key: KeyRecord, readAt: number): void {
    this.#keys.delete(hash);
    this.#keys.set(hash, { key, readAt });
    // The oldest goes first (a Map keeps insertion order).
    if (this.#keys.size > keyMemorySize) this.#keys.delete(this.#keys.keys().next().value!);
  }

  /** The key `keyId` while it is active; undefined once revoked or deleted. For work a key asked for that runs later (a vector store's indexing). */
  async activeKey(keyId: string): Promise<KeyRecord | undefined> {
    const key = await (await this.#database).get("keys", keyId);
    return key?.status === "active" ? Object.freeze(key) : undefined;
  }

  /** Drops the key from memory, so its next request reads it again. */
  forgetKey(keyId: string): void {
    this.#keysGeneration++;
    this.#keyChangedAt.set(keyId, this.#keysGeneration);
    for (const [hash, remembered] of this.#keys) if (remembered.key.id === keyId) this.#keys.delete(hash);
  }

  /** The key's window as it stands, without counting anything (this worker's count, else the stored lease). */
  async state(keyId: string): Promise<RateLimitState | null> {
    const database = await this.#database;
    const transaction = database.transaction(["keys", "windows"]);
    const [key, window] = await Promise.all([
      transaction.objectStore("keys").get(keyId),
      transaction.objectStore("windows").get(keyId),
    ]);
    await transaction.done;
    if (!key) return null;
    const live = this.#live(keyId, this.#clock());
    return stateOf(key, live ?? currentWindow(window, keyId, this.#clock()));
  }

  /** This worker's window for the key, if it has one still open. */
  #live(keyId: string, now: number): LiveWindow | undefined {
    const live = this.#windows.get(keyId);
    if (live && now < live.windowStart + windowMs) return live;
    this.#windows.delete(keyId);
    return undefined;
  }

  /**
   * Counts `requests` (one, or none for tokens alone) and `tokens` within this worker's lease,
   * synchronously, so concurrent requests cannot both take the last place; 429 past a limit.
   * False when the lease must grow first (`#extendLease`), which counts them itself.
   */
  #countWithinLease(key: KeyRecord, use: Use, now: number): boolean {
    const live = this.#live(key.id, now);
    if (!live) return false;
    this.#checkLimits(key, live, use, now);
    if (live.requests + use.requests > live.leasedRequests || live.tokens + use.tokens > live.leasedTokens)
      return false;
    live.requests += use.requests;
    live.tokens += use.tokens;
    return true;
  }

  /**
   * Grows the stored lease, in the caller's read-write transaction, to cover `use`, then counts
   * it. The other instances' leases since this one's last write count as used. The new lease is
   * this worker's only once the transaction commits (`commit`); `rollback` takes the count back
   * when it does not.
   */
  async #extendLease(store: WindowStore, key: KeyRecord, use: Use, now: number): Promise<LeaseGrant> {
    const stored = currentWindow(await store.get(key.id), key.id, now);
    // From here to the count below nothing awaits: the checks and the count are one step.
    let live = this.#live(key.id, now);
    if (!live || live.windowStart !== stored.windowStart) {
      live = {
        windowStart: stored.windowStart,
        requests: stored.requests,
        tokens: stored.tokens,
        leasedRequests: stored.requests,
        leasedTokens: stored.tokens,
      };
      this.#windows.set(key.id, live);
    } else {
      // What other instances leased since this one's last write counts as used.
      live.requests += Math.max(0, stored.requests - live.leasedRequests);
      live.tokens += Math.max(0, stored.tokens - live.leasedTokens);
      live.leasedRequests = Math.max(live.leasedRequests, stored.requests);
      live.leasedTokens = Math.max(live.leasedTokens, stored.tokens);
    }
    this.#checkLimits(key, live, use, now);
    const counted = live;
    const windowStart = live.windowStart;
    const lease = {
      keyId: key.id,
      windowStart,
      requests: Math.min(key.rpm, Math.max(stored.requests, live.requests + use.requests) + blockOf(key.rpm)),
      tokens: Math.min(key.tpm, Math.max(stored.tokens, live.tokens + use.tokens) + blockOf(key.tpm)),
    };
    live.requests += use.requests;
    live.tokens += use.tokens;
    await store.put(lease);
    return {
      counted,
      commit: () => {
        counted.leasedRequests = Math.max(counted.leasedRequests, lease.requests);
        counted.leasedTokens = Math.max(counted.leasedTokens, lease.tokens);
      },
      rollback: () => this.#uncount(key.id, windowStart, use.tokens, use.requests),
    };
  }

  #uncount(keyId: string, windowStart: number, tokens: number, requests: number): void {
    const live = this.#windows.get(keyId);
    if (!live || live.windowStart !== windowStart) return;
    live.requests = Math.max(0, live.requests - requests);
    live.tokens = Math.max(0, live.tokens - tokens);
  }

  /**
   * Counts one request against the key's window; 429 past its requests per minute. Every
   * authenticated request is counted so, whatever its answer: a refusal costs the caller its
   * place in the window as a success does. A generation's tokens are counted at its admission.
   */
  async countRequest(key: KeyRecord): Promise<RateLimitState> {
    const now = this.#clock();
    const use = { requests: 1, tokens: 0 };
    if (this.#countWithinLease(key, use, now)) return stateOf(key, this.#windows.get(key.id)!);
    const database = await this.#database;
    const transaction = database.transaction(["windows"], "readwrite");
    let lease: LeaseGrant | undefined;
    try {
      lease = await this.#extendLease(transaction.objectStore("windows"), key, use, now);
      await transaction.done;
      lease.commit();
      return stateOf(key, lease.counted);
    } catch (error) {
      lease?.rollback();
      abort(transaction);
      throw error;
    }
  }

  #checkLimits(
    key: KeyRecord,
    window: Pick<WindowRecord, "windowStart" | "requests" | "tokens">,
    { requests, tokens }: Use,
    now: number,
  ): void {
    const wait = window.windowStart + windowMs - now;
    const again = `Please try again in ${durationText(wait)}.`;
    if (requests > 0 && window.requests + requests > key.rpm) {
      throw new RateLimitError(
        `Rate limit reached for key ${key.prefix} on requests per min (RPM): Limit ${key.rpm}, Used ${window.requests}, Requested 1. ${again}`,
        "requests",
        wait / 1000,
      );
    }
    // More than the limit itself: no wait admits it.
    if (tokens > key.tpm) {
      throw new RateLimitError(
        `Request too large for key ${key.prefix} on tokens per min (TPM): Limit ${key.tpm}, Requested ${tokens}. ` +
          "The input or output tokens must be reduced in order to run successfully (a shorter prompt, a lower max_tokens), or the key's limit raised (admin.setLimits).",
        "tokens",
        null,
      );
    }
    if (window.tokens + tokens > key.tpm) {
      throw new RateLimitError(
        `Rate limit reached for key ${key.prefix} on tokens per min (TPM): Limit ${key.tpm}, Used ${window.tokens}, Requested ${tokens}. ${again}`,
        "tokens",
        wait / 1000,
      );
    }
  }

  /**
   * Counts the request's admitted tokens (prompt + the most it may generate; the request itself
   * was counted on arrival, `countRequest`) and reserves their maximum cost, all in one
   * transaction: 429 past the tokens per minute, 403 when the balance less what is already
   * reserved cannot cover it.
   */
  async admit(request: AdmitRequest): Promise<Admission> {
    const database = await this.#database;
    const admittedTokens = request.promptTokens + request.maxCompletionTokens;
    const amount = costNano(request.price, request.promptTokens, request.maxCompletionTokens);
    const writeLastUse = this.#writesLastUse(request);
    const stores = writeLastUse
      ? (["keys", "windows", "accounts", "reservations"] as const)
      : (["windows", "accounts", "reservations"] as const);
    // Relaxed: committed once the browser has written it, not yet flushed to disk; a transaction is
    // still all or nothing, so a power cut can lose a whole admission, never half of one.
    const transaction = database.transaction(stores, "readwrite", { durability: "relaxed" });
    // What was counted against the window, to take back if the admission fails.
    let counted: { window: LiveWindow; lease?: LeaseGrant } | undefined;
    try {
      const accounts = transaction.objectStore("accounts");
      const [stored, expected] = await Promise.all([
        writeLastUse ? transaction.objectStore("keys").get(request.keyId) : request.key,
        request.key ? accounts.get(request.key.accountId) : undefined,
      ]);
      if (!stored || stored.status !== "active") {
        this.forgetKey(request.keyId);
        throw new AuthenticationError(invalidKey);
      }
      const now = this.#clock();
      const key = writeLastUse ? { ...stored, lastUsedAt: now } : stored;
      counted = await this.#count(
        transaction.objectStore("windows"),
        key,
        { requests: 0, tokens: admittedTokens },
        now,
      );
      const account = expected?.id === key.accountId ? expected : await accounts.get(key.accountId);
      if (!account || account.balanceNanoUsd - account.reservedNanoUsd < amount)
        throw new PermissionDeniedError(shortOf(request, amount, account));
      account.reservedNanoUsd += amount;
      const reservation = this.#reservation(request, key, amount, admittedTokens, counted.window.windowStart, now);
      const writes = [accounts.put(account), transaction.objectStore("reservations").add(reservation)];
      if (writeLastUse) writes.push(transaction.objectStore("keys").put(key));
      await committed(transaction, writes);
      this.#admitted(counted.lease, writeLastUse ? key.id : undefined, now);
      return { requestId: request.requestId, key, reservation, rate: stateOf(key, counted.window) };
    } catch (error) {
      if (counted) this.#uncount(request.keyId, counted.window.windowStart, admittedTokens, 0);
      abort(transaction);
      throw error;
    }
  }

  /**
   * Whether admitting `request` reads the key and writes its last use: without the key in hand,
   * once a `lastUseIntervalMs`, and when the key changed (revoked, limits set) since it was read,
   * so revocation holds for every request not yet admitted when revokeKey resolves, however early
   * it authenticated.
   */
  #writesLastUse(request: AdmitRequest): boolean {
    if (!request.key) return true;
    const changed = (this.#keyChangedAt.get(request.keyId) ?? 0) > (this.#keyReadAt.get(request.key) ?? -1);
    return changed || this.#clock() - (this.#lastUseWritten.get(request.keyId) ?? -Infinity) >= lastUseIntervalMs;
  }

  /** Counts `use` against the key's window: within its lease in memory, else by extending the lease in `windows`. */
  async #count(
    windows: WindowStore,
    key: KeyRecord,
    use: Use,
    now: number,
  ): Promise<{ window: LiveWindow; lease?: LeaseGrant }> {
    if (this.#countWithinLease(key, use, now)) return { window: this.#windows.get(key.id)! };
    const lease = await this.#extendLease(windows, key, use, now);
    return { window: lease.counted, lease };
  }

  /** Once an admission is committed: its lease kept, its last use noted, and a sweep for orphans when one is due. */
  #admitted(lease: LeaseGrant | undefined, lastUseOf: string | undefined, now: number): void {
    lease?.commit();
    if (lastUseOf) this.#lastUseWritten.set(lastUseOf, now);
    // An instance seen alive at start-up may have died since, holding reservations: looked for once a minute.
    if (this.#liveness && now - this.#lastSweep >= orphanSweepMs) void this.#sweep().catch(() => undefined);
  }

  #reservation(
    request: { requestId: string; model: string; price: Price },
    key: KeyRecord,
    amount: number,
    admittedTokens: number,
    windowStart: number,
    now: number,
  ): ReservationRecord {
    return {
      requestId: request.requestId,
      accountId: key.accountId,
      keyId: key.id,
      model: request.model,
      price: {
        inputNanoUsdPerToken: request.price.inputNanoUsdPerToken,
        outputNanoUsdPerToken: request.price.outputNanoUsdPerToken,
      },
      amountNanoUsd: amount,
      admittedTokens,
      holder: this.holder,
      windowStart,
      createdAt: now,
    };
  }

  /**
   * Charges the real tokens, at most the reservation, releases the rest of it, corrects the token
   * window to the real count and writes the ledger entry, in one transaction. A failed request is
   * charged the tokens it delivered before it failed (the caller's count; none, nothing).
   * Settling twice is a no-op.
   */
  async settle(admission: Admission, settlement: Settlement): Promise<LedgerEntry | null> {
    // The transaction is opened on this first step, with nothing awaited before it but the open
    // database: a caller that answers before the commit relies on it (src/pipeline/embedding.ts).
    const database = await this.#database;
    // Relaxed, as in `admit`: all or nothing, if not yet on disk.
    const transaction = database.transaction(["reservations", "accounts", "ledger"], "readwrite", {
      durability: "relaxed",
    });
    // The account is read beside the reservation: the admission says whose it is.
    const [reservation, expected] = await Promise.all([
      transaction.objectStore("reservations").get(admission.requestId),
      transaction.objectStore("accounts").get(admission.reservation.accountId),
    ]);
    if (!reservation) {
      await transaction.done;
      return null;
    }
    const account =
      expected?.id === reservation.accountId
        ? expected
        : await transaction.objectStore("accounts").get(reservation.accountId);
    const now = this.#clock();
    // Never more than was reserved: an upstream that reports more tokens than were admitted is
    // recorded with what it reported, and charged the reservation.
    const cost = costNano(reservation.price, settlement.promptTokens, settlement.completionTokens);
    const charge = Math.min(cost, reservation.amountNanoUsd);
    const entry = chargeEntry(reservation, now, {
      promptTokens: settlement.promptTokens,
      completionTokens: settlement.completionTokens,
      amountNanoUsd: charge,
      status: settlement.status,
      ...(settlement.timings ? { timings: settlement.timings } : {}),
      ...(settlement.upstream !== undefined ? { upstream: settlement.upstream } : {}),
      ...(settlement.usageEstimated ? { usageEstimated: true } : {}),
      ...(cost > charge ? { chargeCapped: true } : {}),
    });
    const writes: Promise<unknown>[] = [
      transaction.objectStore("reservations").delete(reservation.requestId),
      transaction.objectStore("ledger").add(entry),
    ];
    if (account) {
      account.reservedNanoUsd -= reservation.amountNanoUsd;
      account.balanceNanoUsd -= charge;
      writes.push(transaction.objectStore("accounts").put(account));
    }
    await committed(transaction, writes);
    // The tokens admitted but not used go back to the window (the lease stays as stored: an upper bound).
    const used = settlement.promptTokens + settlement.completionTokens;
    this.#uncount(reservation.keyId, reservation.windowStart, Math.max(0, reservation.admittedTokens - used), 0);
    return entry;
  }

  /** The secret stored for an upstream and the origin it is bound to, for the worker's forwarding only. */
  async upstreamSecret(name: string): Promise<{ secret: string; origin: string | undefined } | undefined> {
    const record = await (await this.#database).get("upstreamCredentials", name);
    return record ? { secret: record.secret, origin: record.origin } : undefined;
  }

  /**
   * Releases reservations held by worker instances that are gone: a worker the browser killed
   * mid-request never settled them. An instance still alive (`liveness`: one finishing its
   * streams while its successor starts) keeps its own; without a way to tell (no Web Locks),
   * every other instance's are released. Each is recorded as a failed request, charged nothing.
   */
  async releaseOrphans(): Promise<number> {
    this.#lastSweep = this.#clock();
    return this.#release((await this.#liveness?.alive()) ?? null);
  }

  /** Releases what instances known to be gone hold; nothing where liveness cannot be told. */
  async #sweep(): Promise<void> {
    this.#lastSweep = this.#clock();
    const alive = await this.#liveness?.alive();
    if (alive) await this.#release(alive);
  }

  async #release(alive: ReadonlySet<string> | null): Promise<number> {
    const database = await this.#database;
    const transaction = database.transaction(["reservations", "accounts", "ledger"], "readwrite");
    const now = this.#clock();
    let released = 0;
    for (const reservation of await transaction.objectStore("reservations").getAll()) {
      if (reservation.holder === this.holder || alive?.has(reservation.holder)) continue;
      const account = await transaction.objectStore("accounts").get(reservation.accountId);
      if (account) {
        account.reservedNanoUsd -= reservation.amountNanoUsd;
        await transaction.objectStore("accounts").put(account);
      }
      await transaction
        .objectStore("ledger")
        .add(
          chargeEntry(reservation, now, { promptTokens: 0, completionTokens: 0, amountNanoUsd: 0, status: "failed" }),
        );
      await transaction.objectStore("reservations").delete(reservation.requestId);
      released++;
    }
    await transaction.done;
    return released;
  }
}

/**
 * Commits once `writes` are queued, without a round trip to wait for their results first: a
 * write that fails still aborts the whole transaction, and its error rejects.
 */
async function committed(
  transaction: { commit(): void; done: Promise<void> },
  writes: Promise<unknown>[],
): Promise<void> {
  transaction.commit();
  await Promise.all([...writes, transaction.done]);
}

function abort(transaction: { abort(): void; done: Promise<void> }): void {
  transaction.done.catch(() => undefined);
  try {
    transaction.abort();
  } catch {
    // Already finished: nothing was written, since every check precedes the first write.
  }
}

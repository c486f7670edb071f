/**
 * Admission and settlement: authenticate → rate limits → reserve → (generate) → settle.
 *
 * Each step is one IndexedDB transaction, and every check in a step happens before its first
 * write, so a refused request changes nothing. Invariants, checked by the tests:
 * - balance = Σ credits − Σ charges, per account;
 * - reserved = Σ open reservations, per account, and never more than the balance;
 * - a reservation is settled or released exactly once.
 */
import { AuthenticationError, PermissionDeniedError, RateLimitError } from "../errors.js";
import { bearerKey, constantTimeEqual, hashKey } from "./keys.js";
import { costNano, type Price } from "./money.js";
import type { KeyRecord, LedgerEntry, PolicyDatabase, ReservationRecord, Timings, WindowRecord } from "./store.js";

export const windowMs = 60_000;

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

export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    "x-ratelimit-limit-requests": String(state.limitRequests),
    "x-ratelimit-remaining-requests": String(state.remainingRequests),
    "x-ratelimit-reset-requests": new Date(state.resetRequests).toISOString(),
    "x-ratelimit-limit-tokens": String(state.limitTokens),
    "x-ratelimit-remaining-tokens": String(state.remainingTokens),
    "x-ratelimit-reset-tokens": new Date(state.resetTokens).toISOString(),
  };
}

export function ledgerId(now: number): string {
  // Unique by the random tail; the store's sequence gives the order.
  const random = Array.from(crypto.getRandomValues(new Uint8Array(6)), (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `led_${now.toString(36).padStart(10, "0")}_${random}`;
}

/** The ledger's record of what one reserved request cost. */
function chargeEntry(
  reservation: ReservationRecord,
  now: number,
  outcome: Pick<LedgerEntry, "promptTokens" | "completionTokens" | "amountNanoUsd" | "status" | "timings" | "upstream" | "usageEstimated">,
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

function stateOf(key: KeyRecord, window: WindowRecord): RateLimitState {
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

const invalidKey = "Incorrect API key provided. You can find your API keys in your account's key settings.";

export class Policy {
  readonly #database: Promise<PolicyDatabase>;
  readonly #clock: () => number;
  /** This worker instance; reservations held by any other instance are orphans. */
  readonly holder: string;

  constructor(options: { database: PolicyDatabase | Promise<PolicyDatabase>; clock: () => number; holder: string }) {
    this.#database = Promise.resolve(options.database);
    this.#clock = options.clock;
    this.holder = options.holder;
  }

  /** 401 for a missing, malformed, unknown or revoked key. */
  async authenticate(authorization: string | null): Promise<KeyRecord> {
    const secret = bearerKey(authorization);
    if (!secret) {
      throw new AuthenticationError(
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
      );
    }
    if (!/^sk-[A-Za-z0-9_-]{20,}$/.test(secret)) throw new AuthenticationError(invalidKey);
    const hash = await hashKey(secret);
    const key = await (await this.#database).getFromIndex("keys", "hash", hash);
    if (!key || !constantTimeEqual(key.hash, hash) || key.status !== "active") throw new AuthenticationError(invalidKey);
    return key;
  }

  /** The key's window as it stands, without counting anything. */
  async state(keyId: string): Promise<RateLimitState | null> {
    const database = await this.#database;
    const transaction = database.transaction(["keys", "windows"]);
    const [key, window] = await Promise.all([transaction.objectStore("keys").get(keyId), transaction.objectStore("windows").get(keyId)]);
    await transaction.done;
    return key ? stateOf(key, currentWindow(window, keyId, this.#clock())) : null;
  }

  /**
   * Counts one request against the key's window, with `tokens` more tokens; refuses with 429
   * past either limit. Used alone for requests that generate nothing.
   */
  async countRequest(keyId: string): Promise<RateLimitState> {
    const database = await this.#database;
    const transaction = database.transaction(["keys", "windows"], "readwrite");
    try {
      const key = await transaction.objectStore("keys").get(keyId);
      if (!key || key.status !== "active") throw new AuthenticationError(invalidKey);
      const now = this.#clock();
      const window = currentWindow(await transaction.objectStore("windows").get(keyId), keyId, now);
      this.#checkLimits(key, window, 0, now);
      window.requests += 1;
      await transaction.objectStore("windows").put(window);
      await transaction.done;
      return stateOf(key, window);
    } catch (error) {
      abort(transaction);
      throw error;
    }
  }

  #checkLimits(key: KeyRecord, window: WindowRecord, tokens: number, now: number): void {
    const retryAfter = (window.windowStart + windowMs - now) / 1000;
    if (window.requests + 1 > key.rpm) {
      throw new RateLimitError(`Rate limit reached for requests on key ${key.prefix}: limit ${key.rpm} per minute. Please try again in ${Math.ceil(retryAfter)}s.`, retryAfter);
    }
    if (window.tokens + tokens > key.tpm) {
      throw new RateLimitError(
        `Rate limit reached for tokens on key ${key.prefix}: limit ${key.tpm} per minute, used ${window.tokens}, requested ${tokens}. Please try again in ${Math.ceil(retryAfter)}s.`,
        retryAfter,
      );
    }
  }

  /**
   * Counts the request and its admitted tokens (prompt + the most it may generate) and reserves
   * their maximum cost, all in one transaction: 429 past a limit, 403 when the balance less what
   * is already reserved cannot cover it.
   */
  async admit(request: { keyId: string; requestId: string; model: string; price: Price; promptTokens: number; maxCompletionTokens: number }): Promise<Admission> {
    const database = await this.#database;
    const admittedTokens = request.promptTokens + request.maxCompletionTokens;
    const amount = costNano(request.price, request.promptTokens, request.maxCompletionTokens);
    const transaction = database.transaction(["keys", "windows", "accounts", "reservations"], "readwrite");
    try {
      const keys = transaction.objectStore("keys");
      const key = await keys.get(request.keyId);
      if (!key || key.status !== "active") throw new AuthenticationError(invalidKey);
      const now = this.#clock();
      const window = currentWindow(await transaction.objectStore("windows").get(key.id), key.id, now);
      this.#checkLimits(key, window, admittedTokens, now);
      const account = await transaction.objectStore("accounts").get(key.accountId);
      if (!account || account.balanceNanoUsd - account.reservedNanoUsd < amount) {
        throw new PermissionDeniedError("insufficient balance");
      }
      window.requests += 1;
      window.tokens += admittedTokens;
      account.reservedNanoUsd += amount;
      key.lastUsedAt = now;
      const reservation: ReservationRecord = {
        requestId: request.requestId,
        accountId: account.id,
        keyId: key.id,
        model: request.model,
        price: { inputNanoUsdPerToken: request.price.inputNanoUsdPerToken, outputNanoUsdPerToken: request.price.outputNanoUsdPerToken },
        amountNanoUsd: amount,
        admittedTokens,
        holder: this.holder,
        windowStart: window.windowStart,
        createdAt: now,
      };
      await Promise.all([
        transaction.objectStore("windows").put(window),
        transaction.objectStore("accounts").put(account),
        transaction.objectStore("reservations").add(reservation),
        keys.put(key),
      ]);
      await transaction.done;
      return { requestId: request.requestId, key, reservation, rate: stateOf(key, window) };
    } catch (error) {
      abort(transaction);
      throw error;
    }
  }

  /**
   * Charges the real tokens, releases the rest of the reservation, corrects the token window to
   * the real count and writes the ledger entry, in one transaction. A failed generation is
   * charged nothing. Settling twice is a no-op.
   */
  async settle(admission: Admission, settlement: Settlement): Promise<LedgerEntry | null> {
    const database = await this.#database;
    const transaction = database.transaction(["reservations", "accounts", "ledger", "windows"], "readwrite");
    const reservation = await transaction.objectStore("reservations").get(admission.requestId);
    if (!reservation) {
      await transaction.done;
      return null;
    }
    const account = await transaction.objectStore("accounts").get(reservation.accountId);
    const window = await transaction.objectStore("windows").get(reservation.keyId);
    const now = this.#clock();
    const failed = settlement.status === "failed";
    const charge = failed ? 0 : costNano(reservation.price, settlement.promptTokens, settlement.completionTokens);
    const entry = chargeEntry(reservation, now, {
      promptTokens: failed ? 0 : settlement.promptTokens,
      completionTokens: failed ? 0 : settlement.completionTokens,
      amountNanoUsd: charge,
      status: settlement.status,
      ...(settlement.timings ? { timings: settlement.timings } : {}),
      ...(settlement.upstream !== undefined ? { upstream: settlement.upstream } : {}),
      ...(settlement.usageEstimated ? { usageEstimated: true } : {}),
    });
    const writes: Promise<unknown>[] = [transaction.objectStore("reservations").delete(reservation.requestId), transaction.objectStore("ledger").add(entry)];
    if (account) {
      account.reservedNanoUsd -= reservation.amountNanoUsd;
      account.balanceNanoUsd -= charge;
      writes.push(transaction.objectStore("accounts").put(account));
    }
    if (window && window.windowStart === reservation.windowStart) {
      const used = failed ? 0 : settlement.promptTokens + settlement.completionTokens;
      window.tokens = Math.max(0, window.tokens + used - reservation.admittedTokens);
      writes.push(transaction.objectStore("windows").put(window));
    }
    await Promise.all(writes);
    await transaction.done;
    return entry;
  }

  /** The secret stored for an upstream, for the worker's forwarding only. */
  async upstreamSecret(name: string): Promise<string | undefined> {
    return (await (await this.#database).get("upstreamCredentials", name))?.secret;
  }

  /**
   * Releases reservations held by other worker instances: a worker the browser killed mid-request
   * never settled them. Each is recorded as a failed request and charged nothing.
   */
  async releaseOrphans(): Promise<number> {
    const database = await this.#database;
    const transaction = database.transaction(["reservations", "accounts", "ledger"], "readwrite");
    const now = this.#clock();
    let released = 0;
    for (const reservation of await transaction.objectStore("reservations").getAll()) {
      if (reservation.holder === this.holder) continue;
      const account = await transaction.objectStore("accounts").get(reservation.accountId);
      if (account) {
        account.reservedNanoUsd -= reservation.amountNanoUsd;
        await transaction.objectStore("accounts").put(account);
      }
      await transaction.objectStore("ledger").add(chargeEntry(reservation, now, { promptTokens: 0, completionTokens: 0, amountNanoUsd: 0, status: "failed" }));
      await transaction.objectStore("reservations").delete(reservation.requestId);
      released++;
    }
    await transaction.done;
    return released;
  }
}

function abort(transaction: { abort(): void; done: Promise<void> }): void {
  transaction.done.catch(() => undefined);
  try {
    transaction.abort();
  } catch {
    // Already finished: nothing was written, since every check precedes the first write.
  }
}

/**
 * The one metering path, for local generation and remote forwarding alike: admit (limits and a
 * reservation, one transaction), then settle exactly once (charge what was used, at most what was
 * reserved, and release the rest, one transaction), with the same ledger fields either way.
 */
import type { ModelEntry } from "../catalogue/entry.js";
import type { Accounts, RateLimitState } from "../accounts/accounts.js";
import type { LedgerEntry } from "../accounts/database.js";
import type { ServeRequest } from "./request.js";

/** What a request used, as billed. */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** The tokens were counted here with the family's tokenizer, not reported by the upstream. */
  estimated?: boolean;
  /** The upstream that served it, for a remote request. */
  upstream?: string;
}

/** What is admitted against the key's limits and reserved against the account. */
export interface Admitted {
  promptTokens: number;
  /** The most the request may generate, over every choice. */
  maxCompletionTokens: number;
}

/** An admitted request: its rate-limit window, and the one settlement it owes. */
export class Meter {
  readonly rate: RateLimitState;
  readonly #settle: (status: LedgerEntry["status"], usage: Usage, firstTokenAt: number | undefined) => Promise<unknown>;
  readonly #clock: () => number;
  #firstTokenAt: number | undefined;
  #settled = false;

  constructor(
    rate: RateLimitState,
    clock: () => number,
    settle: (status: LedgerEntry["status"], usage: Usage, firstTokenAt: number | undefined) => Promise<unknown>,
  ) {
    this.rate = rate;
    this.#clock = clock;
    this.#settle = settle;
  }

  /** Marks the first token's arrival (once), for the ledger's timings. */
  firstToken(): void {
    this.#firstTokenAt ??= this.#clock();
  }

  /** Settles once; later calls do nothing, so a failure path may settle without asking whether another did. */
  async settle(status: LedgerEntry["status"], usage: Usage): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    await this.#settle(status, usage, this.#firstTokenAt);
  }
}

export const nothingUsed: Usage = { promptTokens: 0, completionTokens: 0 };

/** Admits `request` for `model` (429 or 403 when refused); the meter settles it. */
export async function admit(
  services: { accounts: Accounts; clock: () => number },
  request: ServeRequest,
  model: ModelEntry,
  admitted: Admitted,
): Promise<Meter> {
  const { accounts, clock } = services;
  const admission = await accounts.admit({
    keyId: request.key.id,
    key: request.key,
    requestId: request.requestId,
    model: model.id,
    price: model.price,
    ...admitted,
  });
  return new Meter(admission.rate, clock, (status, usage, firstTokenAt) =>
    accounts.settle(admission, {
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      status,
      ...(usage.estimated ? { usageEstimated: true } : {}),
      ...(usage.upstream ? { upstream: usage.upstream } : {}),
      timings: {
        receivedAt: request.receivedAt,
        ...(firstTokenAt !== undefined ? { firstTokenAt } : {}),
        finishedAt: clock(),
      },
    }),
  );
}

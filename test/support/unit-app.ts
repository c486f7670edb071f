import "fake-indexeddb/auto";
import { inferenceApp } from "../../src/endpoints/routes.js";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { DeterministicEngine } from "../../src/engines/deterministic/engine.js";
import { Scheduler } from "../../src/pipeline/scheduler.js";
import type { Engine, GenerationPart, GenerationRequest, ModelStatus } from "../../src/engines/contract.js";
import type { DeviceFeatures } from "../../src/catalogue/builds.js";
import type { ModelEntry } from "../../src/catalogue/entry.js";
import type { InferenceApp } from "../../src/http/app.js";
import type { RespondOptions } from "../../src/http/respond.js";
import { Admin } from "../../src/accounts/admin.js";
import { Accounts } from "../../src/accounts/accounts.js";
import { openAccountsDatabase, type AccountsDatabase } from "../../src/accounts/database.js";
import { Tokenizers, type TokenizerSource } from "../../src/prompt/tokenizer.js";
import { storedData } from "../../src/accounts/stored/stored-data.js";
import type { StorageEstimator } from "../../src/core/storage-room.js";
import { errorBodySchema } from "../../src/core/wire/error.js";

const directory = resolve(import.meta.dirname, "../../.cache/tokenizers");

export const fileTokenizerSource: TokenizerSource = async (name) => ({
  tokenizer: JSON.parse(await readFile(resolve(directory, name, "tokenizer.json"), "utf8")),
  config: JSON.parse(await readFile(resolve(directory, name, "tokenizer_config.json"), "utf8")),
});

/** Tokenizers are slow to parse; one set serves every test file in a worker. */
export const tokenizers = new Tokenizers(fileTokenizerSource);

const baseUrl = "https://app.example/openai";

let databases = 0;

/** A fresh database on fake-indexeddb, and a clock the test moves. */
export async function makePolicy(start = 1_700_000_000_000) {
  const clock = { now: start };
  const database: AccountsDatabase = await openAccountsDatabase(`test-${++databases}-${Math.random()}`);
  const accounts = new Accounts({ database, clock: () => clock.now, holder: "worker_test" });
  // As the entry points wire it: a key change reaches the worker's accounts before it resolves.
  const admin = new Admin({
    database,
    clock: () => clock.now,
    defaults: { rpm: 60, tpm: 150_000 },
    afterKeyChange: async (keyId) => accounts.forgetKey(keyId),
  });
  return { clock, database, accounts, admin };
}

export interface TestApp {
  app: InferenceApp;
  engine: Engine;
  admin: Admin;
  accounts: Accounts;
  database: AccountsDatabase;
  clock: { now: number };
  accountId: string;
  keyId: string;
  key: string;
  post(path: string, body: unknown, init?: RequestInit): Request;
  get(path: string): Request;
}

/** The whole HTTP surface on the deterministic engine (or `engine`), with an account and a key. */
export async function makeApp(
  options: {
    engine?: Engine;
    maxQueued?: number;
    tokenDelayMs?: number;
    creditUsd?: number;
    rpm?: number;
    tpm?: number;
    respond?: RespondOptions;
    rateLimitResets?: "timestamp" | "duration";
    /** Stands in for `navigator.storage.estimate()`, the origin's storage. */
    estimate?: StorageEstimator;
    /** Catalogue additions, e.g. remote models. */
    models?: Parameters<typeof Catalogue.create>[0];
    /** Stands in for the network, for upstreams; unset, any upstream fetch fails the test. */
    fetch?: typeof fetch;
    /** Another app's database, accounts and clock: the same origin after a worker restart. */
    policy?: Awaited<ReturnType<typeof makePolicy>>;
  } = {},
): Promise<TestApp> {
  let counter = 0;
  const { clock, database, accounts, admin } = options.policy ?? (await makePolicy());
  const engine = options.engine ?? new DeterministicEngine({ tokenizers, tokenDelayMs: options.tokenDelayMs ?? 0 });
  const app = inferenceApp(baseUrl, {
    catalogue: Catalogue.create(options.models ?? []),
    engine,
    scheduler: new Scheduler({ maxQueued: options.maxQueued ?? 4 }),
    tokenizers,
    accounts,
    ...storedData({ database, clock: () => clock.now, ...(options.estimate ? { estimate: options.estimate } : {}) }),
    ready: Promise.resolve(),
    clock: () => clock.now,
    newId: (prefix) => `${prefix}${String(++counter).padStart(4, "0")}`,
    ...(options.respond ? { respond: options.respond } : {}),
    ...(options.rateLimitResets ? { rateLimitResets: options.rateLimitResets } : {}),
    fetch:
      options.fetch ??
      (async (input) => {
        throw new Error(`unexpected upstream fetch of ${String(input)}`);
      }),
  });
  const account = await admin.createAccount({ name: "test", creditUsd: options.creditUsd ?? 10 });
  const created = await admin.createKey({
    accountId: account.id,
    ...(options.rpm ? { rpm: options.rpm } : {}),
    ...(options.tpm ? { tpm: options.tpm } : {}),
  });
  const authorization = `Bearer ${created.key}`;
  return {
    app,
    engine,
    admin,
    accounts,
    database,
    clock,
    accountId: account.id,
    keyId: created.id,
    key: created.key,
    post: (path, body, init = {}) =>
      new Request(`${baseUrl}${path}`, {
        method: "POST",
        body: typeof body === "string" ? body : JSON.stringify(body),
        ...init,
        headers: {
          "content-type": "application/json",
          authorization,
          ...(init.headers as Record<string, string> | undefined),
        },
      }),
    get: (path) => new Request(`${baseUrl}${path}`, { headers: { authorization } }),
  };
}

/**
 * A request to `path` (below `/v1`) with the test's key, or `key`: the body it answered, or for a
 * failure its status with the error's fields.
 */
export async function readJsonAt(
  test: TestApp,
  path: string,
  init: RequestInit = {},
  key = test.key,
): Promise<unknown> {
  const request = new Request(`${baseUrl}/v1${path}`, {
    ...init,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  });
  const response = await test.app.handle(request);
  const body: unknown = await response.json();
  return response.ok ? body : { status: response.status, ...errorBodySchema.parse(body).error };
}

export function sseEvents(text: string): string[] {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((frame) => {
      if (!frame.startsWith("data: ")) throw new Error(`not an SSE data frame: ${frame}`);
      return frame.slice(6);
    });
}

/** balance = Σ credits − Σ charges and reserved = Σ open reservations, for every account. */
export async function checkLedgerInvariant(database: AccountsDatabase): Promise<void> {
  const [accounts, ledger, reservations] = await Promise.all([
    database.getAll("accounts"),
    database.getAll("ledger"),
    database.getAll("reservations"),
  ]);
  for (const account of accounts) {
    const entries = ledger.filter((entry) => entry.accountId === account.id);
    const credits = entries
      .filter((entry) => entry.kind === "credit")
      .reduce((sum, entry) => sum + entry.amountNanoUsd, 0);
    const charges = entries
      .filter((entry) => entry.kind === "charge")
      .reduce((sum, entry) => sum + entry.amountNanoUsd, 0);
    const reserved = reservations
      .filter((reservation) => reservation.accountId === account.id)
      .reduce((sum, reservation) => sum + reservation.amountNanoUsd, 0);
    if (account.balanceNanoUsd !== credits - charges)
      throw new Error(
        `account ${account.id}: balance ${account.balanceNanoUsd} != credits ${credits} - charges ${charges}`,
      );
    if (account.reservedNanoUsd !== reserved)
      throw new Error(`account ${account.id}: reserved ${account.reservedNanoUsd} != open reservations ${reserved}`);
    if (account.reservedNanoUsd > account.balanceNanoUsd)
      throw new Error(`account ${account.id}: reserved more than the balance`);
  }
}

/** A chat completion's usage as OpenAI writes it: the counts, with both token details. */
export function chatUsage(prompt: number, completion: number, cached = 0) {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/** An engine scripted by the test, to reach failure paths the deterministic engine never takes. */
export class ScriptedEngine implements Engine {
  readonly name = "scripted";
  seen: GenerationRequest[] = [];
  constructor(
    private readonly script: (request: GenerationRequest, signal: AbortSignal) => AsyncGenerator<GenerationPart>,
  ) {}
  async device(): Promise<DeviceFeatures> {
    return { webgpu: true, features: new Set() };
  }
  async status(): Promise<ModelStatus> {
    return { downloaded: false, loaded: false, runnable: { ok: true, reason: null }, build: null };
  }
  async load(_model: ModelEntry): Promise<void> {}
  generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationPart> {
    this.seen.push(request);
    return this.script(request, signal);
  }
}

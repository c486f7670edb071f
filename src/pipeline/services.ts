import type { Catalogue } from "../catalogue/catalogue.js";
import type { Engine } from "../engines/contract.js";
import type { Tokenizers } from "../prompt/tokenizer.js";
import type { Accounts } from "../accounts/accounts.js";
import type { AccountStorage } from "../accounts/storage.js";
import type { Conversations } from "../accounts/stored/conversations.js";
import type { StoredFiles } from "../accounts/stored/files.js";
import type { StoredVectorStores } from "../accounts/stored/vector-stores.js";
import type { Scheduler } from "./scheduler.js";
import type { Sealing } from "../accounts/stored/sealing.js";
import type { StoredCompletions } from "../accounts/stored/completions.js";
import type { StoredResponses } from "../accounts/stored/responses.js";

/** Everything serving uses, wired once in the worker entry (src/runtime/worker/install.ts). */
export interface Services {
  catalogue: Catalogue;
  engine: Engine;
  scheduler: Scheduler;
  tokenizers: Tokenizers;
  /** Keys, limits, reservations and the ledger. */
  accounts: Accounts;
  /** The Responses API's stored responses, which later requests continue or refer to. */
  responses: StoredResponses;
  /** Chat completions created with `store: true`, for the stored-completions endpoints. */
  completions: StoredCompletions;
  /** The Conversations API's conversations, which Responses requests continue and add to. */
  conversations: Conversations;
  /** Files uploaded through `/v1/files`, which retrieval reads. */
  files: StoredFiles;
  /** Vector stores: their files' chunks, embedded for search. */
  vectorStores: StoredVectorStores;
  /** Each account's storage quota, and the origin's room, checked before a request that stores generates. */
  storage: AccountStorage;
  /** Seals what a client is handed to give back unread (a compaction's summary). */
  sealing: Sealing;
  /** Settles when the accounts are ready to admit (orphaned reservations released). */
  ready: Promise<unknown>;
  /** Milliseconds since the epoch. */
  clock: () => number;
  /** A fresh id with the given prefix, e.g. `chatcmpl-…`. */
  newId: (prefix: string) => string;
  /** The network, for upstreams; injected so tests can stand in for it. */
  fetch: typeof fetch;
}

export function randomId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return prefix + Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

import type { Catalogue } from "../model/catalogue.js";
import type { ModelEntry } from "../model/entry.js";
import type { Engine } from "../engine/contract.js";
import type { Scheduler } from "./scheduler.js";
import { NotFoundError } from "../errors/api.js";
import type { Policy } from "../policy/policy.js";
import type { RespondOptions } from "../http/respond.js";
import type { Tokenizers } from "../model/tokenizer.js";

/** Everything the route handlers use, wired once in the worker entry. */
export interface HttpDependencies {
  catalogue: Catalogue;
  engine: Engine;
  scheduler: Scheduler;
  tokenizers: Tokenizers;
  /** Keys, limits, reservations and the ledger. */
  policy: Policy;
  /** Settles when the policy is ready to admit (orphaned reservations released). */
  ready: Promise<unknown>;
  /** Milliseconds since the epoch. */
  clock: () => number;
  /** A fresh id with the given prefix, e.g. `chatcmpl-…`. */
  newId: (prefix: string) => string;
  /** The network, for upstreams; injected so tests can stand in for it. */
  fetch: typeof fetch;
  /** When to commit a response whose first token is late; see respond.ts. */
  respond?: RespondOptions;
}

export function randomId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return prefix + Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

export function findModel(dependencies: HttpDependencies, id: string, param: string | null = "model"): ModelEntry {
  const model = dependencies.catalogue.get(id);
  if (!model) {
    throw new NotFoundError(`The model \`${id}\` does not exist or you do not have access to it.`, { code: "model_not_found", param });
  }
  return model;
}

export function jsonResponse(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

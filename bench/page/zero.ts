/**
 * Our cost, isolated (the benchmark's section 7): the same HTTP surface, accounts and SSE writer as
 * /v1, at /bench/zero/v1, over an engine that costs nothing: it replays one fixed token as fast as
 * it is read. The same engine is also consumed directly in the worker, for the engine's own floor;
 * what the page sees above that floor is ours.
 */
import { inferenceApp } from "../../src/endpoints/routes.js";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { type ModelEntry } from "../../src/catalogue/entry.js";
import { Scheduler } from "../../src/pipeline/scheduler.js";
import type { Engine, GenerationPart, GenerationRequest, ModelStatus } from "../../src/engines/contract.js";
import { storedData } from "../../src/accounts/stored/stored-data.js";
import type { InferenceApp } from "../../src/http/app.js";
import { randomId } from "../../src/pipeline/services.js";
import { Admin } from "../../src/accounts/admin.js";
import { Accounts } from "../../src/accounts/accounts.js";
import { openAccountsDatabase } from "../../src/accounts/database.js";
import { fetchTokenizerSource, Tokenizers } from "../../src/prompt/tokenizer.js";

/** The seed model whose tokenizer is the smallest to fetch; the replay engine ignores it. */
const zeroModel = "gamma-7b-instruct-v0.3";

/** `maxTokens` copies of one token, as fast as they are read; an abort stops it within one. */
class ReplayEngine implements Engine {
  readonly name = "replay";

  async device() {
    return { webgpu: false, features: new Set<string>() };
  }

  async status(): Promise<ModelStatus> {
    return { downloaded: true, loaded: true, runnable: { ok: true, reason: null }, build: null };
  }

  async load(): Promise<void> {}

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    let produced = 0;
    while (produced < request.sampling.maxTokens && !signal.aborted) {
      produced++;
      yield { type: "text-delta", text: " word" };
    }
    yield {
      type: "finish",
      reason: signal.aborted ? "abort" : "length",
      usage: { promptTokens: null, completionTokens: produced },
    };
  }
}

export interface ZeroPath {
  app: InferenceApp;
  engine: ReplayEngine;
  model: ModelEntry;
  admin: Admin;
}

export function createZeroPath(scriptUrl: string, baseUrl: string): ZeroPath {
  const database = openAccountsDatabase("webgpu-inference-bench-zero");
  const catalogue = Catalogue.create();
  const engine = new ReplayEngine();
  const accounts = new Accounts({ database, clock: Date.now, holder: randomId("bench_") });
  const app = inferenceApp(baseUrl, {
    catalogue,
    engine,
    scheduler: new Scheduler({ maxQueued: 16 }),
    tokenizers: new Tokenizers(fetchTokenizerSource(new URL("tokenizers/", scriptUrl).href)),
    accounts,
    ...storedData({ database, clock: Date.now }),
    ready: accounts.releaseOrphans(),
    clock: Date.now,
    newId: randomId,
    fetch: (input, init) => fetch(input, init),
  });
  return {
    app,
    engine,
    model: catalogue.get(zeroModel)!,
    admin: new Admin({ database, defaults: { rpm: 10_000_000, tpm: 1_000_000_000 } }),
  };
}

/** The engine alone, in the worker: ms to its first part and to its last, for `tokens` tokens. */
export async function consumeDirectly(
  path: ZeroPath,
  tokens: number,
): Promise<{ firstPartMs: number; totalMs: number }> {
  const request: GenerationRequest = {
    model: path.model,
    input: { kind: "text", prompt: "Hi" },
    sampling: { temperature: 0, topP: 1, maxTokens: tokens, stop: [], presencePenalty: 0, frequencyPenalty: 0 },
  };
  const started = performance.now();
  let firstPartMs: number | undefined;
  for await (const part of path.engine.generate(request, new AbortController().signal)) {
    firstPartMs ??= performance.now() - started;
    void part;
  }
  return { firstPartMs: firstPartMs ?? Number.NaN, totalMs: performance.now() - started };
}

/// <reference lib="webworker" />
/**
 * The benchmark's worker: the same `installInference` as the ready-made worker, plus what the
 * other side of each comparison needs, on the same engine instance:
 * - `/bench/echo`: a trivial route, the floor under any service-worker round trip;
 * - `bench:raw`: web-llm's own `chat.completions.create` on the engine our adapter loaded, given
 *   the same prompt pieces our adapter sends (so both paths prefill the same tokens), streamed to
 *   the page over a MessagePort the way web-llm's own ServiceWorkerMLCEngine does;
 * - `bench:reload`: web-llm's own unload and reload of that model (with the adapter's chat
 *   options), then its first token;
 * - `bench:policy`: authenticate, then admit (limit check and reserve), then settle (the charge
 *   and its ledger entry), timed as the ledger grows;
 * - `/bench/zero/v1` and `bench:zero-*`: our cost alone, over an engine that costs nothing (zero.ts).
 *
 * `webllm-offline` is web-llm 0.2.79, which links the offline test model's library; on a real GPU
 * the same worker loads any model whose library that runtime can link (see bench/README.md).
 */
import * as webllm from "webllm-offline";
import { installInference } from "../../src/worker.js";
import {
  verbatimConversation,
  verbatimMessages,
  type WebLlmEngineInstance,
  type WebLlmModule,
} from "../../src/engines/webllm/engine.js";
import type { EngineMessage } from "../../src/prompt/messages.js";
import { renderChatSegments } from "../../src/prompt/templates.js";
import { openAccountsDatabase, type LedgerEntry } from "../../src/accounts/database.js";
// @ts-expect-error: a plain JavaScript module, shared with the benchmarks run by node
import { percentile } from "../statistics.mjs";
import type { BenchReply, BenchRequest } from "./protocol.js";
import { consumeDirectly, createZeroPath, type ZeroPath } from "./zero.js";

declare const self: ServiceWorkerGlobalScope;

const engines: WebLlmEngineInstance[] = [];
const Base = webllm.MLCEngine as unknown as WebLlmModule["MLCEngine"];
// The adapter builds its engine from the module it is given; this one remembers the instance.
const recording: WebLlmModule = {
  ...(webllm as unknown as WebLlmModule),
  MLCEngine: class extends Base {
    constructor(config: { logLevel: "WARN" }) {
      super(config);
      engines.push(this);
    }
  },
};

const inference = installInference(self, { webllm: recording });

let zero: ZeroPath | undefined;
const zeroPath = () =>
  (zero ??= createZeroPath(self.location.href, new URL("/bench/zero/v1", self.location.origin).href));

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (url.pathname.endsWith("/bench/echo") && !inference.handles(url)) event.respondWith(new Response("ok"));
  else if (url.pathname.startsWith("/bench/zero/")) event.respondWith(zeroPath().app.handle(event.request));
});

async function zeroSetup(): Promise<{ key: string; model: string }> {
  const path = zeroPath();
  const account = await path.admin.createAccount({ name: "bench zero", creditUsd: 1_000 });
  const key = await path.admin.createKey({ accountId: account.id, rpm: 10_000_000, tpm: 1_000_000_000 });
  return { key: key.key, model: path.model.id };
}

function engine(): WebLlmEngineInstance {
  const current = engines.at(-1);
  if (!current) throw new Error("the engine is not loaded yet: make one request through /v1 first");
  return current;
}

type Chunk = {
  choices: { delta?: { content?: string | null } }[];
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
};

/** web-llm's own chat completion, each chunk posted as it comes. The benchmark's model is the Qwen2-shaped test model. */
async function raw(request: Record<string, unknown>, reply: (message: BenchReply) => void): Promise<void> {
  // web-llm tokenizes these texts itself here: the benchmark's prompts hold no control-token strings.
  const segments = renderChatSegments("qwen2", request.messages as EngineMessage[]).map((segment) => ({
    ...segment,
    tokens: [],
  }));
  const messages = verbatimMessages(segments).map(({ role, content }) => ({ role, content }));
  const result = await engine().chat.completions.create(<never>{ ...request, messages });
  if (!request.stream) {
    reply({ kind: "result", body: result });
    return;
  }
  for await (const chunk of result as AsyncIterable<Chunk>) reply({ kind: "chunk", body: chunk });
}

async function reload(
  modelId: string,
  request: Record<string, unknown>,
  reply: (message: BenchReply) => void,
): Promise<void> {
  const current = engine();
  await current.unload();
  const started = performance.now();
  await current.reload(modelId, { conv_config: verbatimConversation });
  const loaded = performance.now();
  reply({ kind: "result", body: { reloadMs: loaded - started } });
  await raw({ ...request, stream: true }, reply);
}

/** Policy requests run before the first timed one. */
const policyWarmUp = 20;

/**
 * The policy's work for one request, as the HTTP surface does it, timed at each ledger size.
 * Filler entries go in one transaction per 10,000, the shape real charges have.
 */
async function policy(
  request: Extract<BenchRequest, { type: "bench:policy" }>,
): Promise<{ ledgerEntries: number; p50Ms: number; p95Ms: number }[]> {
  const installed = await inference.ready;
  if (!installed) throw new Error("no page has configured the benchmark's worker");
  const database = await openAccountsDatabase(installed.config.databaseName);
  const results: { ledgerEntries: number; p50Ms: number; p95Ms: number }[] = [];
  const price = { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 };
  // What the HTTP surface does for a generation: admit counts the request itself.
  const once = async (requestId: string): Promise<number> => {
    const started = performance.now();
    const key = await installed.accounts.authenticate(`Bearer ${request.key}`);
    const admission = await installed.accounts.admit({
      keyId: key.id,
      key,
      requestId,
      model: "filler",
      price,
      promptTokens: 10,
      maxCompletionTokens: 10,
    });
    await installed.accounts.settle(admission, { promptTokens: 10, completionTokens: 10, status: "completed" });
    return performance.now() - started;
  };
  // Unmeasured: the first requests pay for opening the database and compiling the path.
  for (let iteration = 0; iteration < policyWarmUp; iteration++) await once(`bench_warm_${iteration}_${Date.now()}`);
  for (const size of request.sizes) {
    let count = await database.count("ledger");
    while (count < size) {
      const batch = Math.min(10_000, size - count);
      const transaction = database.transaction("ledger", "readwrite");
      const now = Date.now();
      for (let index = 0; index < batch; index++) {
        const entry: LedgerEntry = {
          id: `led_fill_${count + index}`,
          kind: "charge",
          accountId: request.accountId,
          keyId: request.keyId,
          requestId: `fill_${count + index}`,
          model: "filler",
          promptTokens: 10,
          completionTokens: 10,
          amountNanoUsd: 30,
          status: "completed",
          createdAt: now - 86_400_000,
        };
        void transaction.store.add(entry);
      }
      await transaction.done;
      count += batch;
    }
    const durations: number[] = [];
    for (let iteration = 0; iteration < request.iterations; iteration++)
      durations.push(await once(`bench_${size}_${iteration}_${Date.now()}`));
    results.push({
      ledgerEntries: await database.count("ledger"),
      p50Ms: percentile(durations, 0.5),
      p95Ms: percentile(durations, 0.95),
    });
  }
  database.close();
  return results;
}

self.addEventListener("message", (event) => {
  const request = event.data as BenchRequest | null;
  const port = event.ports[0];
  if (!port || !request?.type?.startsWith("bench:")) return;
  const reply = (message: BenchReply) => port.postMessage(message);
  const work = (async () => {
    if (request.type === "bench:raw") await raw(request.request, reply);
    else if (request.type === "bench:reload") await reload(request.modelId, request.request, reply);
    else if (request.type === "bench:zero-setup") reply({ kind: "result", body: await zeroSetup() });
    else if (request.type === "bench:zero-direct")
      reply({ kind: "result", body: await consumeDirectly(zeroPath(), request.tokens) });
    else reply({ kind: "result", body: await policy(request) });
  })();
  event.waitUntil(
    work.then(
      () => reply({ kind: "done" }),
      (error: unknown) => reply({ kind: "error", message: error instanceof Error ? error.message : String(error) }),
    ),
  );
});

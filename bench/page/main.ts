/**
 * The benchmark page. Each comparison is measured here, in the page, the way an app would see
 * it: web-llm's own API over a MessagePort to the worker, against fetch() through our /v1.
 * `bench/run.mjs` drives it through `window.bench`.
 */
import { readSse } from "../../src/pipeline/upstream/read-sse.js";
import { startInference, type InferenceHandle, type StartInferenceOptions } from "../../src/index.js";
import type { BenchReply, BenchRequest } from "./protocol.js";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import type { Addressing } from "../../src/engines/llamacpp/runtime.js";
import { hostEngine } from "../../src/engines/page-hosted.js";
import type { GenerationRequest } from "../../src/engines/contract.js";
import { renderChat } from "../../src/prompt/templates.js";
import { embeddingCalls, type EmbeddingCalls } from "./embeddings.js";
import { retrievalCalls, type RetrievalCalls } from "./retrieval.js";
import { wllamaCalls, type WllamaCalls } from "./wllama.js";

/** One generation as the page saw it. Times are ms from the request's start. */
export interface Sample {
  firstTokenMs: number | null;
  totalMs: number;
  /** As the usage reports it; 0 where it reports none. */
  promptTokens: number;
  /** Of the prompt, the tokens the engine reused from its cache (llama.cpp reports them). */
  cachedTokens: number;
  completionTokens: number;
  text: string;
  /** llama.cpp's threads, from the response's `X-Inference-Threads` (through /v1 only). */
  threads?: number;
}

export interface Bench extends EmbeddingCalls, RetrievalCalls, WllamaCalls {
  /** With `llamacpp`, this page also hosts llama.cpp (the library's WebAssembly build), for the engines' comparison. */
  start(
    options: StartInferenceOptions,
    llamacpp?: boolean,
  ): Promise<{ key: string; keyId: string; accountId: string; baseURL: string }>;
  /** web-llm's own chat.completions.create, in the worker, on the engine our adapter loaded. */
  raw(request: Record<string, unknown>): Promise<Sample>;
  /** The same request through fetch() and our /v1. */
  ours(request: Record<string, unknown>): Promise<Sample>;
  /** Loads the model through the handle, generating nothing; how long it took, in ms. */
  load(modelId: string): Promise<number>;
  /** web-llm's own unload and reload of the loaded model, then a one-token generation. */
  rawReload(modelId: string, request: Record<string, unknown>): Promise<{ reloadMs: number; sample: Sample }>;
  /** Sequential round trips to `path` (a URL or a path under the origin), each expected to answer `status`; the duration of each, in ms. */
  roundTrips(path: string, count: number, authorization: string | null, status: number): Promise<number[]>;
  policy(sizes: number[], iterations: number): Promise<{ ledgerEntries: number; p50Ms: number; p95Ms: number }[]>;
  /** Section 7: an account on the zero-cost path; then one request through it, and the engine alone. */
  zeroSetup(): Promise<void>;
  zero(tokens: number, stream: boolean): Promise<{ firstByteMs: number; totalMs: number; completionTokens: number }>;
  zeroDirect(tokens: number): Promise<{ firstPartMs: number; totalMs: number }>;
  /**
   * The CPU benchmark: llama.cpp driven directly in this page, on the chat `messages` rendered
   * with Llama 3's template: the very engine instance that serves /v1 (`start` with `llamacpp`),
   * or with `addressing: "wasm64"` a second instance on the Memory64 builds.
   */
  llamaDirect(request: {
    model: string;
    messages?: { role: "user"; content: string }[];
    text?: string;
    maxTokens: number;
    addressing?: Addressing;
  }): Promise<Sample & { renderedPrompt: string; threads: number }>;
}

declare global {
  interface Window {
    bench: Bench;
  }
}

let handle: InferenceHandle | undefined;
let zeroAccount = { key: "", model: "" };
let account = { key: "", keyId: "", accountId: "", baseURL: "" };

function ask(message: BenchRequest, onReply: (reply: BenchReply) => void): Promise<void> {
  const worker = navigator.serviceWorker.controller;
  if (!worker) throw new Error("no service worker controls this page");
  const channel = new MessageChannel();
  return new Promise((resolve, reject) => {
    channel.port1.onmessage = (event: MessageEvent<BenchReply>) => {
      const reply = event.data;
      if (reply.kind === "done") resolve();
      else if (reply.kind === "error") reject(new Error(reply.message));
      else onReply(reply);
    };
    worker.postMessage(message, [channel.port2]);
  });
}

type Usage =
  | { prompt_tokens?: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } }
  | null
  | undefined;
type ChunkBody = { choices: { delta?: { content?: string | null } }[]; usage?: Usage };
type ResultBody = { choices: { message: { content: string | null } }[]; usage: Usage };

/** web-llm reports decode steps as completion tokens; the token from prefill is one more (see the adapter). */
const producedTokens = (usage: Usage) => (usage ? usage.completion_tokens + 1 : 0);

function emptySample(): Sample {
  return { firstTokenMs: null, totalMs: 0, promptTokens: 0, cachedTokens: 0, completionTokens: 0, text: "" };
}

function collector(started: number) {
  const sample = emptySample();
  return {
    sample,
    chunk(body: ChunkBody, usageIsRaw: boolean) {
      const content = body.choices[0]?.delta?.content;
      if (content) {
        sample.firstTokenMs ??= performance.now() - started;
        sample.text += content;
      }
      if (body.usage) {
        sample.completionTokens = usageIsRaw ? producedTokens(body.usage) : body.usage.completion_tokens;
        sample.promptTokens = body.usage.prompt_tokens ?? 0;
        sample.cachedTokens = body.usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
    },
  };
}

async function raw(request: Record<string, unknown>): Promise<Sample> {
  const started = performance.now();
  const { sample, chunk } = collector(started);
  await ask(
    {
      type: "bench:raw",
      request: { ...request, ...(request.stream ? { stream_options: { include_usage: true } } : {}) },
    },
    (reply) => {
      if (reply.kind === "chunk") chunk(reply.body as ChunkBody, true);
      else if (reply.kind === "result") {
        const body = reply.body as ResultBody;
        sample.text = body.choices[0]?.message.content ?? "";
        sample.completionTokens = producedTokens(body.usage);
      }
    },
  );
  sample.totalMs = performance.now() - started;
  return sample;
}

async function ours(request: Record<string, unknown>): Promise<Sample> {
  if (!handle) throw new Error("start() first");
  const started = performance.now();
  const { sample, chunk } = collector(started);
  const response = await fetch(`${handle.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${account.key}`, "content-type": "application/json" },
    body: JSON.stringify({ ...request, ...(request.stream ? { stream_options: { include_usage: true } } : {}) }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const threads = response.headers.get("x-inference-threads");
  if (threads !== null) sample.threads = Number(threads);
  if (request.stream) {
    for await (const data of readSse(response.body!))
      if (data !== "[DONE]") chunk(JSON.parse(data) as ChunkBody, false);
  } else {
    const body = (await response.json()) as ResultBody;
    sample.text = body.choices[0]?.message.content ?? "";
    sample.completionTokens = body.usage?.completion_tokens ?? 0;
    sample.promptTokens = body.usage?.prompt_tokens ?? 0;
  }
  sample.totalMs = performance.now() - started;
  return sample;
}

let startOptions: StartInferenceOptions = {};
/**
 * The page's llama.cpp, with the threads `start` was given: it serves /v1 (this page hosts it
 * for the worker) and is driven directly too. One instance for both paths, because two differ
 * by themselves: measured, two engines that had each loaded other files before ran the same
 * file 3–4% apart at 2 threads, the same one ahead in every pair, which no alternation cancels.
 */
let pageEngine: LlamaCppEngine | undefined;
/** A second instance on the Memory64 builds, driven directly only: what 64-bit addresses cost. */
let memory64Engine: LlamaCppEngine | undefined;
function llamaEngine(addressing?: Addressing): LlamaCppEngine {
  const create = () =>
    new LlamaCppEngine({
      assetsUrl: new URL("llamacpp/", location.href).href,
      ggufBaseUrl: location.href,
      ...(startOptions.pageEngine?.threads !== undefined ? { threads: startOptions.pageEngine.threads } : {}),
      ...(addressing ? { addressing } : {}),
    });
  if (addressing === "wasm64") return (memory64Engine ??= create());
  return (pageEngine ??= create());
}

const llamaDirect: Bench["llamaDirect"] = async ({ model, messages, text, maxTokens, addressing }) => {
  const entry = Catalogue.create((startOptions.models ?? []) as Parameters<typeof Catalogue.create>[0]).get(model);
  if (!entry) throw new Error(`no model ${model}`);
  const directEngine = llamaEngine(addressing);
  // The rendered chat less its BOS text: llama.cpp tokenizes a raw prompt with its own BOS.
  const renderedPrompt = messages ? renderChat("llama3", messages) : (text ?? "");
  const started = performance.now();
  const sample = emptySample();
  const request: GenerationRequest = {
    model: entry,
    input: { kind: "text", prompt: renderedPrompt.replace(/^<\|begin_of_text\|>/, "") },
    sampling: { temperature: 0, topP: 1, maxTokens, stop: [], presencePenalty: 0, frequencyPenalty: 0 },
  };
  for await (const part of directEngine.generate(request, new AbortController().signal)) {
    if (part.type === "text-delta" && part.text) {
      sample.firstTokenMs ??= performance.now() - started;
      sample.text += part.text;
    } else if (part.type === "finish") {
      sample.promptTokens = (part.usage.promptTokens ?? 0) + (part.usage.cachedPromptTokens ?? 0);
      sample.cachedTokens = part.usage.cachedPromptTokens ?? 0;
      sample.completionTokens = part.usage.completionTokens;
    }
  }
  sample.totalMs = performance.now() - started;
  return { ...sample, renderedPrompt, threads: (await directEngine.status(entry)).threads ?? 0 };
};

window.bench = {
  async start(options, llamacpp = false) {
    startOptions = options;
    // With llama.cpp, this page hosts its own instance rather than `pageEngine`'s, to drive it directly too.
    handle = await startInference(llamacpp ? { ...options, pageEngine: undefined } : options);
    if (llamacpp) hostEngine({ llamacpp: llamaEngine() });
    const created = await handle.admin.createAccount({ name: "bench", creditUsd: 1_000 });
    // High limits: the benchmark measures the policy, not its refusals.
    const key = await handle.admin.createKey({ accountId: created.id, rpm: 10_000_000, tpm: 1_000_000_000 });
    account = { key: key.key, keyId: key.id, accountId: created.id, baseURL: handle.baseURL };
    return account;
  },
  raw,
  ours,
  async load(modelId) {
    if (!handle) throw new Error("start() first");
    const started = performance.now();
    await handle.loadModel(modelId);
    return performance.now() - started;
  },
  async rawReload(modelId, request) {
    const started = performance.now();
    let reloadMs = 0;
    const { sample, chunk } = collector(started);
    await ask(
      { type: "bench:reload", modelId, request: { ...request, stream_options: { include_usage: true } } },
      (reply) => {
        if (reply.kind === "result") reloadMs = (reply.body as { reloadMs: number }).reloadMs;
        else if (reply.kind === "chunk") chunk(reply.body as ChunkBody, true);
      },
    );
    sample.totalMs = performance.now() - started;
    return { reloadMs, sample };
  },
  async roundTrips(path, count, authorization, status) {
    const durations: number[] = [];
    const headers: Record<string, string> = authorization ? { authorization } : {};
    for (let index = 0; index < count; index++) {
      const started = performance.now();
      const response = await fetch(path, { headers });
      await response.arrayBuffer();
      durations.push(performance.now() - started);
      if (response.status !== status) throw new Error(`${path} answered ${response.status}, not ${status}`);
    }
    return durations;
  },
  async policy(sizes, iterations) {
    const results: { ledgerEntries: number; p50Ms: number; p95Ms: number }[] = [];
    await ask({ type: "bench:policy", ...account, sizes, iterations }, (reply) => {
      if (reply.kind === "result") results.push(...(reply.body as typeof results));
    });
    return results;
  },
  async zeroSetup() {
    await ask({ type: "bench:zero-setup" }, (reply) => {
      if (reply.kind === "result") zeroAccount = reply.body as typeof zeroAccount;
    });
  },
  async zero(tokens, stream) {
    const started = performance.now();
    const response = await fetch("/bench/zero/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${zeroAccount.key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: zeroAccount.model,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: tokens,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    const reader = response.body!.getReader();
    let firstByteMs: number | undefined;
    const chunks: Uint8Array[] = [];
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      firstByteMs ??= performance.now() - started;
      chunks.push(next.value);
    }
    const totalMs = performance.now() - started;
    // Checked after the clock stops: the reply must be the whole reply.
    const text = new TextDecoder().decode(await new Blob(chunks as BlobPart[]).arrayBuffer());
    const usage = stream
      ? (
          JSON.parse(
            text
              .split("\n\n")
              .filter((frame) => frame.startsWith("data: {"))
              .at(-1)!
              .slice(6),
          ) as { usage: { completion_tokens: number } }
        ).usage
      : (JSON.parse(text) as { usage: { completion_tokens: number } }).usage;
    return { firstByteMs: firstByteMs ?? totalMs, totalMs, completionTokens: usage.completion_tokens };
  },
  async zeroDirect(tokens) {
    let result = { firstPartMs: Number.NaN, totalMs: Number.NaN };
    await ask({ type: "bench:zero-direct", tokens }, (reply) => {
      if (reply.kind === "result") result = reply.body as typeof result;
    });
    return result;
  },
  llamaDirect,
  ...wllamaCalls(),
  ...retrievalCalls(() => account),
  ...embeddingCalls(() => ({
    baseURL: account.baseURL,
    key: account.key,
    options: startOptions,
    engine: llamaEngine(),
  })),
};
document.getElementById("status")!.textContent = "ready";

/**
 * With `?remote`, the page is driven without a debugger (bench/remote-page.mjs): it asks the
 * benchmark for each call over fetch, runs it, and posts back its result with the next ask.
 */
async function answerRemoteCalls(): Promise<void> {
  let result: { value: unknown } | { error: string } | null = null;
  for (;;) {
    const response = await fetch("/__bench/rpc", { method: "POST", body: JSON.stringify({ result }) });
    const call = (await response.json()) as { done?: boolean; method: keyof Bench; args: unknown[] };
    if (call.done) return;
    try {
      const method = window.bench[call.method] as (...args: unknown[]) => Promise<unknown>;
      result = { value: await method.apply(window.bench, call.args) };
    } catch (error) {
      result = { error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
  }
}
if (new URLSearchParams(location.search).has("remote")) void answerRemoteCalls();

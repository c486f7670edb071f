/**
 * The llama.cpp adapter, over `@wllama/wllama` (llama.cpp compiled to WebAssembly). It takes the
 * wllama module as a dependency, as the web-llm adapter takes web-llm's. wllama runs llama.cpp in
 * a dedicated Worker it starts itself, so this adapter lives in a page (a service worker can
 * start no Worker): the service worker reaches it through the page-hosted channel.
 *
 * It feeds llama.cpp our own rendering of the model's official template as a raw completion,
 * as llama.cpp's server does with a prompt: the model sees exactly the prompt we counted, and
 * llama.cpp's prompt cache reuses the longest prefix it already holds (an earlier turn).
 * Constraints are our grammars, in llama.cpp's GBNF notation.
 */
import { chooseGgufBuild, type DeviceFeatures } from "../model/builds.js";
import { ggufFiles, type GgufBuild, type ModelEntry } from "../model/entry.js";
import { EngineError, fetchAsset, networkRetrySeconds } from "../errors/engine.js";
import { toGbnf } from "../grammar/gbnf.js";
import { resolveUrl } from "./urls.js";
import { isSoftwareAdapter } from "./adapter.js";
import type {
  Engine,
  FinishReason,
  GenerationPart,
  GenerationRequest,
  LoadProgress,
  ModelStatus,
  TokenLogprob,
  TokenUsage,
} from "./contract.js";

interface WllamaLogprob {
  token: string;
  logprob: number;
  bytes?: number[] | null;
  top_logprobs?: { token: string; logprob: number; bytes?: number[] | null }[];
}

/** One streamed chunk of wllama's raw completion (llama.cpp server's OpenAI-style `text_completion`). */
export interface WllamaChunk {
  choices: { text: string; finish_reason: string | null; logprobs?: { content?: WllamaLogprob[] | null } | null }[];
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details?: { cached_tokens?: number };
  } | null;
}

/** The part of a `Wllama` instance this adapter uses (wllama 3.x). */
export interface WllamaInstance {
  setCompat(compat: null): void;
  loadModelFromUrl(url: string, params: Record<string, unknown>): Promise<void>;
  createCompletion(
    options: { prompt: string; stream: true } & Record<string, unknown>,
  ): Promise<AsyncIterable<WllamaChunk>>;
  mustAddBosToken(): boolean;
  getNumThreads(): number;
  exit(): Promise<void>;
  modelManager: { getModels(): Promise<{ url: string }[]> };
  cacheManager: { delete(nameOrUrl: string): Promise<void> };
}

/** The part of the `@wllama/wllama` module this adapter uses. */
export interface WllamaModule {
  Wllama: new (
    paths: { default: string },
    config: {
      suppressNativeLog?: boolean;
      allowOffline?: boolean;
      logger?: Record<"debug" | "log" | "warn" | "error", (...data: unknown[]) => void>;
    },
  ) => WllamaInstance;
}

export interface LlamaCppEngineOptions {
  wllama: WllamaModule;
  /** wllama's `wllama.wasm`, served with the worker's assets. */
  wasmUrl: string;
  /** GGUF files are `ggufBaseUrl + build.file` unless `build.file` is absolute. */
  ggufBaseUrl: string;
  /** Memory one model may use, in MB; default from `navigator.deviceMemory` when the browser tells it. */
  memoryBudgetMB?: number;
  /** Threads for llama.cpp: several only where the page is cross-origin isolated (SharedArrayBuffer). */
  threads?: number;
  /**
   * Tokens per prefill batch. An abort lands between batches, so small batches stop a long
   * prefill quickly (32 tokens take well under a second on a CPU) at little cost in speed.
   */
  batchSize?: number;
  onProgress?: (modelId: string, progress: LoadProgress) => void;
  fetch?: typeof fetch;
}

/**
 * The grammar for unconstrained text: any characters. wllama (3.8 and 3.13) serialises each
 * result with nlohmann::json's strict dump, which throws on invalid UTF-8, and the request then
 * dies inside wllama ("Invalid typed array length"). A model can sample byte tokens that do not
 * form UTF-8 (about one reply in three at temperature 1 from a random-weight model here).
 * llama.cpp's grammar sampler refuses such tokens, and it checks only the token it sampled,
 * resampling when that one is refused: text that is valid UTF-8 comes out exactly as without it.
 */
const anyText = "root ::= [^\\x00]*";

/** The BOS texts our templates begin with; llama.cpp adds the model's BOS itself, so it is taken off the text. */
const bosTexts = ["<|begin_of_text|>", "<bos>", "<s>"];

const utf8 = new TextEncoder();

function toTokenLogprob(entry: WllamaLogprob): TokenLogprob {
  const bytesOf = (token: string, bytes: number[] | null | undefined) => bytes ?? [...utf8.encode(token)];
  return {
    token: entry.token,
    logprob: entry.logprob,
    bytes: bytesOf(entry.token, entry.bytes),
    alternatives: (entry.top_logprobs ?? []).map((alternative) => ({
      token: alternative.token,
      logprob: alternative.logprob,
      bytes: bytesOf(alternative.token, alternative.bytes),
    })),
  };
}

async function hasSoftwareAdapter(): Promise<boolean> {
  const adapter = await globalThis.navigator?.gpu?.requestAdapter().catch(() => null);
  return adapter !== null && adapter !== undefined && isSoftwareAdapter(adapter);
}

function defaultThreads(): number {
  const isolated = typeof globalThis.crossOriginIsolated === "boolean" && globalThis.crossOriginIsolated;
  return isolated ? Math.max(1, globalThis.navigator?.hardwareConcurrency ?? 1) : 1;
}

export class LlamaCppEngine implements Engine {
  readonly name = "llamacpp";
  readonly #options: LlamaCppEngineOptions;
  #wllama: WllamaInstance | undefined;
  #loaded: { url: string; contextWindow: number; addsBos: boolean; threads: number } | undefined;
  #wasm: Promise<string> | undefined;
  #wllamaWasm: string | undefined;

  constructor(options: LlamaCppEngineOptions) {
    this.#options = options;
  }

  async device(): Promise<DeviceFeatures> {
    const deviceMemory = (globalThis.navigator as { deviceMemory?: number } | undefined)?.deviceMemory;
    const memoryBudgetMB = this.#options.memoryBudgetMB ?? (deviceMemory ? deviceMemory * 1024 : undefined);
    return { webgpu: false, features: new Set(), ...(memoryBudgetMB !== undefined ? { memoryBudgetMB } : {}) };
  }

  /**
   * llama.cpp's WebAssembly, fetched here (through the app's service worker and its caches, so it
   * works offline where the app keeps it) and handed to wllama as an object URL. wllama's own
   * fetch of a missing file never settles, so a missing or wrong file must be caught here, where
   * it can be named. A failure is not kept: the next load tries again.
   */
  async #wasmObjectUrl(): Promise<string> {
    this.#wasm ??= (async () => {
      const url = this.#options.wasmUrl;
      const fix =
        "serve wllama/wllama.wasm beside the worker script (the Vite plugin and `npx webgpu-inference copy-assets` copy it from @wllama/wllama), or set `pageEngine.wllamaWasmUrl` to where it is";
      const response = await fetchAsset(url, "llama.cpp's WebAssembly (wllama.wasm)", fix, {
        kind: "load_failed",
        ...(this.#options.fetch ? { fetcher: this.#options.fetch } : {}),
      });
      const bytes = await response.arrayBuffer();
      const magic = new Uint8Array(bytes, 0, Math.min(4, bytes.byteLength));
      if (magic.join(",") !== "0,97,115,109")
        throw new EngineError(
          "load_failed",
          `Could not load llama.cpp's WebAssembly from ${url}: the file there is not WebAssembly. ${fix[0]!.toUpperCase()}${fix.slice(1)}.`,
        );
      return URL.createObjectURL(new Blob([bytes], { type: "application/wasm" }));
    })();
    return this.#wasm.catch((error: unknown) => {
      this.#wasm = undefined;
      throw error;
    });
  }

  /** The wllama instance; `wasmUrl` only when loading (status and deletion need no WebAssembly). */
  #instance(wasmUrl?: string): WllamaInstance {
    if (this.#wllama && wasmUrl !== undefined && this.#wllamaWasm !== wasmUrl) {
      // Made for status or deletion, before the WebAssembly was fetched; nothing is loaded in it.
      void this.#wllama.exit().catch(() => {});
      this.#wllama = undefined;
    }
    if (!this.#wllama) {
      const quiet = () => {};
      this.#wllamaWasm = wasmUrl ?? this.#options.wasmUrl;
      this.#wllama = new this.#options.wllama.Wllama(
        { default: this.#wllamaWasm },
        {
          suppressNativeLog: true,
          allowOffline: true,
          logger: {
            debug: quiet,
            log: quiet,
            warn: (...data) => console.warn(...data),
            error: (...data) => console.error(...data),
          },
        },
      );
      // The compatibility build is fetched from a CDN by default: never at run time, offline included.
      this.#wllama.setCompat(null);
    }
    return this.#wllama;
  }

  #urlOf(build: GgufBuild): string {
    return resolveUrl(build.file, this.#options.ggufBaseUrl);
  }

  async #choose(model: ModelEntry): Promise<GgufBuild> {
    const choice = chooseGgufBuild(model, (await this.device()).memoryBudgetMB);
    if (!choice.ok)
      throw new EngineError("device", `${model.id} cannot run on llama.cpp on this device: ${choice.reason}.`);
    return choice.build;
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    const choice = chooseGgufBuild(model, (await this.device()).memoryBudgetMB);
    const url = choice.build ? this.#urlOf(choice.build) : null;
    const cached = url
      ? await this.#instance()
          .modelManager.getModels()
          .catch(() => [])
      : [];
    const loaded = url !== null && this.#loaded?.url === url;
    return {
      downloaded: url !== null && cached.some((entry) => entry.url === url),
      loaded,
      runnable: choice.ok ? { ok: true, reason: null } : { ok: false, reason: choice.reason },
      build: choice.build,
      ...(loaded && this.#loaded ? { threads: this.#loaded.threads } : {}),
    };
  }

  async load(model: ModelEntry, onProgress?: (progress: LoadProgress) => void): Promise<void> {
    const build = await this.#choose(model);
    const url = this.#urlOf(build);
    if (this.#loaded?.url === url && this.#loaded.contextWindow === model.contextWindow) return;
    // One model at a time: the one loaded goes (with its wllama instance) before another loads.
    if (this.#loaded) await this.dispose();
    const wllama = this.#instance(await this.#wasmObjectUrl());
    const started = Date.now();
    const report = (loaded: number, total: number) => {
      const progress: LoadProgress = {
        progress: total > 0 ? Math.min(1, loaded / total) : 0,
        text: `Fetching ${build.modelId}: ${Math.round(loaded / 2 ** 20)} of ${Math.round(total / 2 ** 20)} MB`,
        loadedBytes: loaded,
        totalBytes: total,
        elapsedSeconds: (Date.now() - started) / 1000,
      };
      onProgress?.(progress);
      this.#options.onProgress?.(model.id, progress);
    };
    const batch = this.#options.batchSize ?? 32;
    try {
      await wllama.loadModelFromUrl(url, {
        n_ctx: model.contextWindow,
        n_batch: batch,
        n_ubatch: batch,
        n_threads: this.#options.threads ?? defaultThreads(),
        // wllama offloads every layer to WebGPU when it can register a device there; on a
        // software adapter that is the CPU again, only slower, so it stays on llama.cpp's CPU code.
        ...((await hasSoftwareAdapter()) ? { n_gpu_layers: 0 } : {}),
        progressCallback: ({ loaded, total }: { loaded: number; total: number }) => report(loaded, total),
      });
    } catch (error) {
      this.#wllama = undefined;
      await wllama.exit().catch(() => {});
      throw await this.#diagnose(build, url, error);
    }
    this.#loaded = {
      url,
      contextWindow: model.contextWindow,
      addsBos: wllama.mustAddBosToken(),
      threads: wllama.getNumThreads(),
    };
  }

  /** A failed load names the file it could not fetch and the option that points at it. */
  async #diagnose(build: GgufBuild, url: string, error: unknown): Promise<EngineError> {
    const detail = (error as Error)?.message ?? String(error);
    const fetcher = this.#options.fetch ?? ((input, init) => fetch(input, init));
    try {
      await fetchAsset(
        url,
        `the GGUF weights of ${build.modelId}`,
        "set `artifacts.ggufBaseUrl` to a folder that holds the model's GGUF files, split into files of at most 2 GB (llama-gguf-split --split --split-max-size 2G)",
        {
          kind: "load_failed",
          fetcher: (input) => fetcher(input, { method: "HEAD" }),
        },
      );
    } catch (diagnosis) {
      if (diagnosis instanceof EngineError)
        return new EngineError("load_failed", `${diagnosis.message} (llama.cpp said: ${detail})`, {
          cause: error,
          ...(diagnosis.retryAfterSeconds ? { retryAfterSeconds: diagnosis.retryAfterSeconds } : {}),
        });
      throw diagnosis;
    }
    const network = /failed to fetch|network/i.test(detail);
    return new EngineError(
      "load_failed",
      network
        ? `Could not load ${build.modelId}: the network failed mid-download (${detail}); try again.`
        : `Could not load ${build.modelId} from ${url}: ${detail}. The file is there but llama.cpp could not load it: it may be corrupt, or not a GGUF file.`,
      { cause: error, ...(network ? { retryAfterSeconds: networkRetrySeconds } : {}) },
    );
  }

  async dispose(): Promise<void> {
    this.#loaded = undefined;
    const wllama = this.#wllama;
    this.#wllama = undefined;
    await wllama?.exit();
  }

  async deleteCached(model: ModelEntry): Promise<void> {
    for (const build of model.gguf) {
      const url = this.#urlOf(build);
      if (this.#loaded?.url === url) await this.dispose();
      for (const file of ggufFiles(url)) await this.#instance().cacheManager.delete(file);
    }
  }

  /**
   * The prompt as llama.cpp must see it: text, from which llama.cpp's own BOS replaces a leading
   * BOS text. wllama 3.8's completion takes text only (a list of token ids makes its llama.cpp
   * throw), and llama.cpp parses special-token strings in it: on this engine a control-token
   * string in a message is still read as that token (see the README's Security section).
   */
  #prompt(request: GenerationRequest): string {
    const text =
      request.input.kind === "chat"
        ? request.input.segments.map((segment) => segment.text).join("")
        : request.input.prompt;
    if (request.input.kind !== "chat" || !this.#loaded?.addsBos) return text;
    const bos = bosTexts.find((candidate) => text.startsWith(candidate));
    return bos ? text.slice(bos.length) : text;
  }

  #parameters(request: GenerationRequest): Record<string, unknown> {
    const { sampling, constraint } = request;
    return {
      max_tokens: sampling.maxTokens,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      presence_penalty: sampling.presencePenalty,
      frequency_penalty: sampling.frequencyPenalty,
      ...(sampling.stop.length ? { stop: sampling.stop } : {}),
      ...(sampling.seed !== undefined ? { seed: sampling.seed } : {}),
      // llama.cpp reports a token's log probability only with at least one alternative.
      ...(sampling.logprobs !== undefined ? { n_probs: Math.max(1, sampling.logprobs) } : {}),
      ...(sampling.logitBias
        ? { logit_bias: Object.entries(sampling.logitBias).map(([token, bias]) => [Number(token), bias]) }
        : {}),
      ...(constraint?.grammar !== undefined
        ? { grammar: toGbnf(constraint.grammar) }
        : constraint
          ? { response_format: { type: "json_object" } }
          : { grammar: anyText }),
    };
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    await this.load(request.model);
    const wllama = this.#instance();
    const abort = new AbortController();
    const forward = () => abort.abort();
    signal.addEventListener("abort", forward, { once: true });
    let reason: FinishReason = "stop";
    let usage: TokenUsage | undefined;
    let tokens = 0;
    try {
      const chunks = await wllama.createCompletion({
        ...this.#parameters(request),
        prompt: this.#prompt(request),
        stream: true,
        stream_options: { include_usage: true },
        // Reuse the KV cache for the longest prefix of this prompt that llama.cpp already holds.
        cache_prompt: true,
        abortSignal: abort.signal,
      });
      for await (const chunk of chunks) {
        const choice = chunk.choices[0];
        const logprobs =
          request.sampling.logprobs !== undefined ? (choice?.logprobs?.content ?? []).map(toTokenLogprob) : [];
        // llama.cpp streams one chunk per token (its text may be empty while a character or a
        // possible stop string is incomplete).
        if (choice && choice.finish_reason === null) tokens++;
        if (choice?.text || logprobs.length)
          yield {
            type: "text-delta",
            text: choice?.text ?? "",
            ...(logprobs.length
              ? {
                  logprobs:
                    request.sampling.logprobs === 0
                      ? logprobs.map((entry) => ({ ...entry, alternatives: [] }))
                      : logprobs,
                }
              : {}),
          };
        if (choice?.finish_reason) reason = choice.finish_reason === "length" ? "length" : "stop";
        if (chunk.usage) {
          const cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
          usage = {
            promptTokens: chunk.usage.prompt_tokens - cached,
            cachedPromptTokens: cached,
            completionTokens: chunk.usage.completion_tokens,
          };
        }
      }
    } catch (error) {
      if (!abort.signal.aborted) throw classify(error, request);
    } finally {
      signal.removeEventListener("abort", forward);
    }
    if (signal.aborted) reason = "abort";
    yield { type: "finish", reason, usage: usage ?? { promptTokens: null, completionTokens: tokens } };
  }
}

/**
 * When a wllama action throws in C++, wllama reads the reply's length from a buffer that still
 * holds its message magic ("GLUE", 1163217991 as a length) and fails with this. The one cause
 * seen here: a result holding text that is not valid UTF-8, which its JSON writer refuses.
 */
const wllamaActionFailed = /Invalid typed array length: 1163217991/;

/**
 * A prompt over the window is the request's fault (the HTTP layer checks first, so this is a
 * backstop). Anything else llama.cpp throws is unexpected: our grammars and prompts are ours.
 * wllama's failed action is named for what it is, and for the case our grammar cannot cover:
 * log probabilities, whose alternatives are any tokens, a lone byte of a character among them.
 */
function classify(error: unknown, request: GenerationRequest): unknown {
  if (!(error instanceof Error)) return error;
  if (/context size|n_ctx|exceeds the available context/i.test(error.message))
    return new EngineError("context_length", error.message, { cause: error });
  if (wllamaActionFailed.test(error.message)) {
    const why =
      request.sampling.logprobs !== undefined
        ? " With logprobs this is an alternative token that is not valid UTF-8 on its own (a byte of a longer character), which wllama cannot return; retry, or ask without logprobs."
        : "";
    return new Error(
      `llama.cpp failed inside wllama (${error.message}: wllama's way of reporting an exception in llama.cpp).${why}`,
      { cause: error },
    );
  }
  return error;
}

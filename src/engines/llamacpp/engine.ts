/**
 * The llama.cpp adapter, over the project's own WebAssembly build of llama.cpp
 * (`native/llamacpp/engine.cpp`, built with its SIMD kernels by scripts/build-llamacpp.mjs). It
 * runs in a dedicated Worker that this adapter starts, so it lives in a page (a service worker
 * can start no Worker): the service worker reaches it through the page-hosted channel.
 *
 * It feeds llama.cpp the token ids of our rendering of the model's official template: the model
 * sees exactly the prompt we counted, and a control-token string in a message stays text. It
 * reuses the KV cache for the longest prefix it already holds (an earlier turn). Constraints are
 * our grammars, in llama.cpp's GBNF notation. The Worker runs the whole generation once the
 * prompt is checked, and posts the parts to a port: to this page's reader, or (`streamTo`) to
 * the service worker directly, so the page's thread is not on a token's way. An abort lands
 * between steps (a prefill batch, a sampled token).
 */
import { chooseGgufBuild, ggufMemoryEstimateMB, type DeviceFeatures } from "../../catalogue/builds.js";
import { ggufFiles, type GgufBuild, type ModelEntry } from "../../catalogue/entry.js";
import { EngineError, notLoaded } from "../../core/errors/engine.js";
import { toGbnf } from "../../structured/gbnf.js";
import { grammarFor } from "../../structured/schema-grammar.js";
import { resolveUrl } from "../urls.js";
import type {
  EmbeddingRequest,
  Embeddings,
  Engine,
  GenerationPart,
  GenerationRequest,
  LoadProgress,
  ModelStatus,
} from "../contract.js";
import { PartInbox, type AbortMessage, type PartMessage } from "../part-stream.js";
import { deleteDownload, download, isDownloaded } from "./download.js";
import type { EmbedResult, LoadResult, SamplerSettings, WorkerCall } from "./protocol.js";
import { hasMemory64, LlamaWorker, usableThreads, type Addressing } from "./runtime.js";

export interface LlamaCppEngineOptions {
  /** The folder of our llama.cpp build (`llamacpp/` beside the worker script by default). */
  assetsUrl: string;
  /** GGUF files are `ggufBaseUrl + build.file` unless `build.file` is absolute. */
  ggufBaseUrl: string;
  /** Memory one model may use, in MB; default from `navigator.deviceMemory` when the browser tells it. */
  memoryBudgetMB?: number;
  /** Threads for llama.cpp: several only where the page is cross-origin isolated (SharedArrayBuffer). */
  threads?: number;
  /**
   * The build's addresses for every model. By default wasm32 where a model fits in its 4 GB, and
   * Memory64 past that; `wasm64` takes Memory64 for all (where the browser has it), as the CPU
   * benchmark does to measure what 64-bit addresses cost.
   */
  addressing?: Addressing;
  /**
   * Tokens per prefill batch. An abort lands between batches, so small batches stop a long
   * prefill quickly at little cost in speed.
   */
  batchSize?: number;
  /**
   * The longest one token's grammar step may take, in ms (default 2,000): past it the request
   * fails as too ambiguous to follow, and the engine goes on to the next request.
   */
  tokenBudgetMs?: number;
  /**
   * How long an aborted generation may take to stop, in ms (default 3,000): past it the Worker
   * is stopped (and started again, the model reloaded, for the next request), so a step that
   * cannot be interrupted never holds the engine from the others.
   */
  abortGraceMs?: number;
  onProgress?: (modelId: string, progress: LoadProgress) => void;
  fetch?: typeof fetch;
}

/** JSON mode without a schema: any JSON object, as llama.cpp's server constrains `json_object`. */
function anyObject(): string {
  return toGbnf(grammarFor({ type: "object" }));
}

/**
 * The most tokens an embedding model takes in one decode, and so the longest input it embeds:
 * an encoder attends over a whole decode at once, and its scores grow with the square of it.
 */
const embeddingBatchTokens = 2_048;

/**
 * What each build of llama.cpp can address (scripts/build-llamacpp.mjs: MAXIMUM_MEMORY): wasm32
 * 4 GB; Memory64 16 GB, the most Chromium gives a module. A model that fits in 4 GB keeps the
 * wasm32 build, the one the CPU benchmark measures against native llama.cpp.
 */
const addressSpaceMB: Record<Addressing, number> = { wasm32: 4_096, wasm64: 16_384 };

/** Why a budget is the address space's, as /v1/model/info says when a model does not fit. */
const addressLimit: Record<Addressing, string> = {
  wasm32:
    "llama.cpp's WebAssembly addresses at most 4,096 MB in a browser without WebAssembly Memory64; Chromium has it",
  wasm64: "llama.cpp's Memory64 WebAssembly addresses at most 16,384 MB, the most a browser gives it",
};

interface Loaded {
  url: string;
  contextWindow: number;
  info: LoadResult;
}

export class LlamaCppEngine implements Engine {
  readonly name = "llamacpp";
  readonly #options: LlamaCppEngineOptions;
  #worker: { addressing: Addressing; worker: Promise<LlamaWorker> } | undefined;
  #loaded: Loaded | undefined;
  /** One generation at a time: the KV cache and the sampler are the model's, not a request's. */
  #turn: Promise<void> = Promise.resolve();

  constructor(options: LlamaCppEngineOptions) {
    this.#options = options;
  }

  async device(): Promise<DeviceFeatures> {
    const deviceMemory = (globalThis.navigator as { deviceMemory?: number } | undefined)?.deviceMemory;
    const budget = this.#options.memoryBudgetMB ?? (deviceMemory ? deviceMemory * 1024 : undefined);
    // One model, its KV cache and buffers share one build's address space.
    const addressing: Addressing = this.#options.addressing !== "wasm32" && hasMemory64() ? "wasm64" : "wasm32";
    const space = addressSpaceMB[addressing];
    const memoryBudgetMB = Math.min(budget ?? space, space);
    const limit =
      addressing === "wasm32" && this.#options.addressing === "wasm32" && hasMemory64()
        ? 'llama.cpp\'s wasm32 WebAssembly addresses at most 4,096 MB, and the app pinned it (`addressing: "wasm32"`)'
        : addressLimit[addressing];
    const bound = budget === undefined || budget > space ? { memoryLimit: limit } : {};
    return { webgpu: false, features: new Set(), memoryBudgetMB, ...bound, threads: this.#threads() };
  }

  /** The wasm32 build where the model fits in its 4 GB (see addressSpaceMB), else Memory64. */
  #addressingFor(model: ModelEntry, build: GgufBuild): Addressing {
    if (this.#options.addressing === "wasm64" && hasMemory64()) return "wasm64";
    if (this.#options.addressing === "wasm32") return "wasm32";
    return ggufMemoryEstimateMB(model, build) <= addressSpaceMB.wasm32 ? "wasm32" : "wasm64";
  }

  #threads(): number {
    return usableThreads(this.#options.threads);
  }

  /**
   * The Worker, started once for a build's addressing (by default the one running, or wasm32);
   * asked for the other, it is stopped, with its model, and the other started. A failed start is
   * not kept, so the next load tries again.
   */
  #runtime(addressing: Addressing = this.#worker?.addressing ?? "wasm32"): Promise<LlamaWorker> {
    if (this.#worker && this.#worker.addressing !== addressing) {
      this.#loaded = undefined;
      void this.#worker.worker.then((worker) => worker.terminate()).catch(() => undefined);
      this.#worker = undefined;
    }
    this.#worker ??= {
      addressing,
      worker: LlamaWorker.start(this.#options.assetsUrl, this.#threads(), addressing, this.#options.fetch),
    };
    const running = this.#worker;
    return running.worker.catch((error: unknown) => {
      if (this.#worker === running) this.#worker = undefined;
      throw error;
    });
  }

  #urlOf(build: GgufBuild): string {
    return resolveUrl(build.file, this.#options.ggufBaseUrl);
  }

  async #choose(model: ModelEntry): Promise<GgufBuild> {
    const choice = chooseGgufBuild(model, await this.device());
    if (!choice.ok)
      throw new EngineError("device", `${model.id} cannot run on llama.cpp on this device: ${choice.reason}.`);
    return choice.build;
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    const choice = chooseGgufBuild(model, await this.device());
    const url = choice.build ? this.#urlOf(choice.build) : null;
    const downloaded =
      url !== null && (await Promise.all(ggufFiles(url).map((file) => isDownloaded(file)))).every(Boolean);
    const loaded = url !== null && this.#loaded?.url === url;
    return {
      downloaded,
      loaded,
      runnable: choice.ok ? { ok: true, reason: null } : { ok: false, reason: choice.reason },
      build: choice.build,
      ...(loaded && this.#loaded ? { threads: this.#loaded.info.threads } : {}),
    };
  }

  /** The model's files from the download cache, fetching (or resuming) what is missing. */
  async #files(build: GgufBuild, url: string, report: (loaded: number, total: number) => void): Promise<Blob[]> {
    const parts = ggufFiles(url);
    const progress = parts.map(() => ({ loaded: 0, total: 0 }));
    const files: Blob[] = [];
    for (const [index, part] of parts.entries()) {
      files.push(
        await download(part, {
          what: `the GGUF weights of ${build.modelId}`,
          fix: "set `artifacts.ggufBaseUrl` to a folder that holds the model's GGUF files, split into files of at most 2 GB (llama-gguf-split --split --split-max-size 2G)",
          ...(build.sha256 ? { sha256: build.sha256[index]! } : {}),
          ...(this.#options.fetch ? { fetch: this.#options.fetch } : {}),
          onProgress: (current) => {
            progress[index] = current;
            report(
              progress.reduce((sum, entry) => sum + entry.loaded, 0),
              progress.reduce((sum, entry) => sum + entry.total, 0),
            );
          },
        }),
      );
    }
    return files;
  }

  async load(model: ModelEntry, onProgress?: (progress: LoadProgress) => void): Promise<void> {
    const build = await this.#choose(model);
    const url = this.#urlOf(build);
    if (this.#holds(model, url)) return;
    // One model at a time: the one loaded is freed before another loads.
    this.#loaded = undefined;
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
    const worker = await this.#runtime(this.#addressingFor(model, build));
    const files = await this.#files(build, url, report);
    try {
      const embeddings = model.kind === "embedding";
      // An embedding model's window is one decode's: every input is embedded in one piece.
      const embeddingTokens = Math.min(model.contextWindow, embeddingBatchTokens);
      const info = await worker.call<LoadResult>({
        call: "load",
        files,
        contextWindow: embeddings ? embeddingTokens : model.contextWindow,
        batchSize: embeddings ? embeddingTokens : (this.#options.batchSize ?? 32),
        threads: worker.threads,
        embeddings,
      });
      this.#loaded = { url, contextWindow: model.contextWindow, info };
    } catch (error) {
      throw new EngineError(
        "load_failed",
        `Could not load ${build.modelId} from ${url}: ${(error as Error).message}. The file is there but llama.cpp could not load it: it may be corrupt, or not a GGUF file.`,
        { cause: error },
      );
    }
  }

  /** Whether `model` is loaded from `url`, with its window. */
  #holds(model: ModelEntry, url: string): boolean {
    return this.#loaded?.url === url && this.#loaded.contextWindow === model.contextWindow;
  }

  async dispose(): Promise<void> {
    this.#loaded = undefined;
    const running = this.#worker;
    this.#worker = undefined;
    (await running?.worker.catch(() => undefined))?.terminate();
  }

  async deleteCached(model: ModelEntry): Promise<void> {
    for (const build of model.gguf) {
      const url = this.#urlOf(build);
      if (this.#loaded?.url === url) await this.dispose();
      for (const file of ggufFiles(url)) await deleteDownload(file);
    }
  }

  /**
   * The prompt's ids in the model's own vocabulary (the GGUF's, which an app's model may not share
   * exactly with the family's tokenizer): our rendering's pieces (a chat, or a tool-call prompt),
   * control tokens only where the template wrote them, so the client's text is text; a client's
   * own raw prompt is llama.cpp's to tokenize, special tokens and BOS included, as llama.cpp's
   * server reads a prompt.
   */
  #prompt(request: GenerationRequest, worker: LlamaWorker): Promise<number[]> {
    const { input } = request;
    if (input.kind === "chat" || input.pieces)
      return worker.call<number[]>({ call: "tokenize-pieces", pieces: input.pieces ?? [] });
    return worker.call<number[]>({ call: "tokenize", text: input.prompt });
  }

  #sampler(request: GenerationRequest): SamplerSettings {
    const { sampling, constraint } = request;
    return {
      temperature: sampling.temperature,
      topP: sampling.topP,
      presencePenalty: sampling.presencePenalty,
      frequencyPenalty: sampling.frequencyPenalty,
      seed: sampling.seed ?? Math.floor(Math.random() * 2 ** 32),
      bias: Object.entries(sampling.logitBias ?? {}).map(([token, bias]) => [Number(token), bias] as [number, number]),
      grammar: constraint?.grammar !== undefined ? toGbnf(constraint.grammar) : constraint ? anyObject() : "",
    };
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    const channel = new MessageChannel();
    const inbox = new PartInbox().listen(channel.port1);
    const abort = () => channel.port1.postMessage({ abort: true } satisfies AbortMessage);
    signal.addEventListener("abort", abort, { once: true });
    if (signal.aborted) abort();
    this.streamTo(request, channel.port2, signal).catch((error: unknown) => inbox.fail(error));
    try {
      yield* inbox.parts();
    } finally {
      signal.removeEventListener("abort", abort);
      // A reader that stops early stops the generation (after its finish part, nobody hears this).
      abort();
      channel.port1.close();
    }
  }

  /**
   * Generates onto `port` (src/engines/part-stream.ts): this page loads the model, and tokenizes
   * and checks the prompt, then hands the port to llama.cpp's Worker, which posts every part
   * itself. Rejects, with nothing posted, when the generation could not start or the Worker
   * failed; the caller reports that. `signal` is the reader's abort, as this page hears it: it
   * sets the Worker's abort flag (read inside the grammar's step, where memory is shared), and a
   * generation that has not stopped within `abortGraceMs` is ended by stopping the Worker.
   */
  async streamTo(request: GenerationRequest, port: MessagePort, signal?: AbortSignal): Promise<void> {
    let release = () => {};
    const previous = this.#turn;
    this.#turn = new Promise((resolve) => (release = resolve));
    // Until the Worker holds the port, an abort is this page's to see.
    let aborted = false;
    port.onmessage = (event: MessageEvent<AbortMessage | null>) => (aborted ||= event.data?.abort === true);
    try {
      await previous;
      await this.load(request.model);
      const worker = await this.#runtime();
      const prompt = await this.#prompt(request, worker);
      const window = this.#loaded!.info.contextWindow;
      if (prompt.length === 0 || prompt.length >= window)
        throw new EngineError(
          "context_length",
          `This prompt is ${prompt.length} tokens; the model's context window is ${window}.`,
        );
      if (aborted) {
        const usage = { promptTokens: null, completionTokens: 0 };
        port.postMessage({ part: { type: "finish", reason: "abort", usage } } satisfies PartMessage);
        return;
      }
      const { maxTokens, stop, logprobs } = request.sampling;
      const abortFlag = globalThis.crossOriginIsolated === true ? new Int32Array(new SharedArrayBuffer(4)) : null;
      const call: WorkerCall = {
        call: "generate",
        prompt,
        sampler: this.#sampler(request),
        maxTokens,
        stop,
        alternatives: logprobs ?? -1,
        parts: port,
        cacheScope: request.cacheScope ?? null,
        tokenBudgetMs: this.#options.tokenBudgetMs ?? 2_000,
        abortFlag,
      };
      await this.#stoppable(worker.call(call, [port]), signal, abortFlag);
    } finally {
      release();
    }
  }

  /**
   * Every input embedded by llama.cpp's Worker, as many to a decode as fit, pooled as the GGUF
   * says. An abort lands between decodes (where the page is cross-origin isolated), else as for
   * a generation, by stopping the Worker past the grace period.
   */
  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    let release = () => {};
    const previous = this.#turn;
    this.#turn = new Promise((resolve) => (release = resolve));
    try {
      await previous;
      signal.throwIfAborted();
      if (request.onlyIfLoaded && !this.#holds(request.model, this.#urlOf(await this.#choose(request.model))))
        throw notLoaded(this.name, request.model.id);
      await this.load(request.model);
      const worker = await this.#runtime();
      const inputs = request.inputs.map((input) =>
        input.kind === "text" ? { text: input.text } : { tokens: input.tokens },
      );
      const abortFlag = globalThis.crossOriginIsolated === true ? new Int32Array(new SharedArrayBuffer(4)) : null;
      const embedded = await this.#stoppable(
        worker.call<EmbedResult | null>({ call: "embed", inputs, abortFlag }),
        signal,
        abortFlag,
      );
      signal.throwIfAborted();
      if (!embedded) throw new EngineError("unsupported", "llama.cpp stopped embedding without an abort");
      return embedded;
    } finally {
      release();
    }
  }

  /**
   * The generation, ended by stopping the Worker when an abort does not stop it within the
   * grace period: a step that cannot be interrupted must not hold the engine. The next request
   * starts a new Worker and loads the model again.
   */
  async #stoppable<T>(running: Promise<T>, signal: AbortSignal | undefined, flag: Int32Array | null): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => {
      if (flag) Atomics.store(flag, 0, 1);
      timer = setTimeout(() => void this.dispose(), this.#options.abortGraceMs ?? 3_000);
    };
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
    try {
      return await running;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

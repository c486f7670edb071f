/**
 * The llama.cpp adapter, over the project's own WebAssembly build of llama.cpp
 * (`native/llamacpp/engine.cpp`, built with its SIMD kernels by scripts/build-llamacpp.mjs). It
 * runs in a dedicated Worker that this adapter starts, so it lives in a page (a service worker
 * can start no Worker): the service worker reaches it through the page-hosted channel.
 *
 * It feeds llama.cpp the token ids of our rendering of the model's official template: the model
 * sees exactly the prompt we counted, and a control-token string in a message stays text. It
 * reuses the KV cache for the longest prefix it already holds (an earlier turn). Constraints are
 * our grammars, in llama.cpp's GBNF notation. Each step (a prefill batch, a sampled token) is one
 * call to the Worker, so an abort lands between steps.
 */
import { chooseGgufBuild, type DeviceFeatures } from "../../model/builds.js";
import { ggufFiles, type GgufBuild, type ModelEntry } from "../../model/entry.js";
import { EngineError } from "../../errors/engine.js";
import { toGbnf } from "../../grammar/gbnf.js";
import { grammarFor } from "../../grammar/schema-grammar.js";
import { resolveUrl } from "../urls.js";
import { StopScanner } from "../stop-text.js";
import type {
  Engine,
  FinishReason,
  GenerationPart,
  GenerationRequest,
  LoadProgress,
  ModelStatus,
  TokenLogprob,
} from "../contract.js";
import { deleteDownload, download, isDownloaded } from "./download.js";
import type { LoadResult, StepResult } from "./protocol.js";
import { LlamaWorker, usableThreads } from "./runtime.js";

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
   * Tokens per prefill batch. An abort lands between batches, so small batches stop a long
   * prefill quickly at little cost in speed.
   */
  batchSize?: number;
  onProgress?: (modelId: string, progress: LoadProgress) => void;
  fetch?: typeof fetch;
}

/** JSON mode without a schema: any JSON object, as llama.cpp's server constrains `json_object`. */
function anyObject(): string {
  return toGbnf(grammarFor({ type: "object" }));
}

const utf8 = new TextDecoder("utf-8");

/** What a wasm32 build of llama.cpp can address (scripts/build-llamacpp.mjs: MAXIMUM_MEMORY=4GB). */
const addressSpaceMB = 4_096;

function logprobsOf(step: StepResult, alternatives: number): TokenLogprob[] {
  const [chosen, ...rest] = step.logprobs ?? [];
  if (!chosen) return [];
  const entry = (item: { bytes: Uint8Array; logprob: number }) => ({
    token: utf8.decode(item.bytes),
    logprob: item.logprob,
    bytes: [...item.bytes],
  });
  return [{ ...entry(chosen), alternatives: alternatives > 0 ? rest.map(entry) : [] }];
}

/** How many leading ids two prompts share. */
function sharedPrefix(cached: readonly number[], prompt: readonly number[]): number {
  let length = 0;
  while (length < cached.length && length < prompt.length && cached[length] === prompt[length]) length++;
  return length;
}

/**
 * The prompt's batches from `first` to `end`: as few as `size` allows, of lengths that differ by
 * at most one. Why near-equal: a batch of one token runs at the generation rate (ggml's dot
 * product, a row at a time), while our build's Q4_0 kernel takes a batch's tokens six at a time
 * (native/llamacpp/q4_0-tiles.c); 33 tokens in batches of 32 are 17 and 16, not 32 and 1.
 */
export function prefillBatches(first: number, end: number, size: number): [number, number][] {
  const count = Math.ceil((end - first) / size);
  const batches: [number, number][] = [];
  for (let index = 0; index < count; index++) {
    const next = first + Math.ceil((end - first) / (count - index));
    batches.push([first, next]);
    first = next;
  }
  return batches;
}

interface Loaded {
  url: string;
  contextWindow: number;
  info: LoadResult;
  /** The ids in llama.cpp's KV cache, in order: the next prompt reuses their longest shared prefix. */
  cached: number[];
}

export class LlamaCppEngine implements Engine {
  readonly name = "llamacpp";
  readonly #options: LlamaCppEngineOptions;
  #worker: Promise<LlamaWorker> | undefined;
  #loaded: Loaded | undefined;
  /** One generation at a time: the KV cache and the sampler are the model's, not a request's. */
  #turn: Promise<void> = Promise.resolve();

  constructor(options: LlamaCppEngineOptions) {
    this.#options = options;
  }

  async device(): Promise<DeviceFeatures> {
    const deviceMemory = (globalThis.navigator as { deviceMemory?: number } | undefined)?.deviceMemory;
    const budget = this.#options.memoryBudgetMB ?? (deviceMemory ? deviceMemory * 1024 : undefined);
    // The build is wasm32: one model, its KV cache and buffers share a 4 GB address space.
    const memoryBudgetMB = Math.min(budget ?? addressSpaceMB, addressSpaceMB);
    return { webgpu: false, features: new Set(), memoryBudgetMB, threads: this.#threads() };
  }

  #threads(): number {
    return usableThreads(this.#options.threads);
  }

  /** The Worker, started once; a failed start is not kept, so the next load tries again. */
  #runtime(): Promise<LlamaWorker> {
    this.#worker ??= LlamaWorker.start(this.#options.assetsUrl, this.#threads(), this.#options.fetch);
    return this.#worker.catch((error: unknown) => {
      this.#worker = undefined;
      throw error;
    });
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
    if (this.#loaded?.url === url && this.#loaded.contextWindow === model.contextWindow) return;
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
    const worker = await this.#runtime();
    const files = await this.#files(build, url, report);
    try {
      const info = await worker.call<LoadResult>({
        call: "load",
        files,
        contextWindow: model.contextWindow,
        batchSize: this.#options.batchSize ?? 32,
        threads: worker.threads,
      });
      this.#loaded = { url, contextWindow: model.contextWindow, info, cached: [] };
    } catch (error) {
      throw new EngineError(
        "load_failed",
        `Could not load ${build.modelId} from ${url}: ${(error as Error).message}. The file is there but llama.cpp could not load it: it may be corrupt, or not a GGUF file.`,
        { cause: error },
      );
    }
  }

  async dispose(): Promise<void> {
    this.#loaded = undefined;
    const worker = this.#worker;
    this.#worker = undefined;
    (await worker?.catch(() => undefined))?.terminate();
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

  #sampler(request: GenerationRequest) {
    const { sampling, constraint } = request;
    return {
      call: "sampler" as const,
      temperature: sampling.temperature,
      topP: sampling.topP,
      presencePenalty: sampling.presencePenalty,
      frequencyPenalty: sampling.frequencyPenalty,
      seed: sampling.seed ?? Math.floor(Math.random() * 2 ** 32),
      bias: Object.entries(sampling.logitBias ?? {}).map(([token, bias]) => [Number(token), bias] as [number, number]),
      grammar: constraint?.grammar !== undefined ? toGbnf(constraint.grammar) : constraint ? anyObject() : "",
    };
  }

  /** Prefills what the KV cache lacks, a batch per call; returns how many ids were reused. */
  async #prefill(worker: LlamaWorker, loaded: Loaded, prompt: number[], signal: AbortSignal): Promise<number | null> {
    // The last id is always decoded again: its logits are the first token's distribution.
    const reused = Math.min(sharedPrefix(loaded.cached, prompt), prompt.length - 1);
    await worker.call({ call: "forget", keep: reused });
    loaded.cached = prompt.slice(0, reused);
    for (const [first, end] of prefillBatches(reused, prompt.length, loaded.info.batchSize)) {
      if (signal.aborted) return null;
      const tokens = prompt.slice(first, end);
      await worker.call({ call: "decode", tokens, first });
      loaded.cached.push(...tokens);
    }
    return reused;
  }

  /**
   * Samples from `position` on, a token per Worker call, decoding each (its logits are the next
   * step's) unless it is the last the request allows. Yields the text as it settles.
   */
  async *#sample(
    worker: LlamaWorker,
    loaded: Loaded,
    position: number,
    request: GenerationRequest,
    signal: AbortSignal,
  ): AsyncGenerator<GenerationPart, { reason: FinishReason; produced: number }> {
    const { maxTokens, stop, logprobs: alternatives } = request.sampling;
    const window = loaded.info.contextWindow;
    const stops = new StopScanner(stop);
    const decoder = new TextDecoder("utf-8");
    let produced = 0;
    let ended = false;
    while (produced < maxTokens && position < window) {
      if (signal.aborted) return { reason: "abort", produced };
      const decode = produced + 1 < maxTokens && position + 1 < window;
      const step = await worker.call<StepResult>({ call: "step", alternatives: alternatives ?? -1, position, decode });
      produced++;
      if (decode && !step.end) {
        loaded.cached.push(step.token);
        position++;
      }
      const logprobs = alternatives !== undefined ? logprobsOf(step, alternatives) : [];
      const { text, stopped } = step.end
        ? { text: "", stopped: false }
        : stops.push(decoder.decode(step.bytes, { stream: true }));
      if (text || logprobs.length) yield { type: "text-delta", text, ...(logprobs.length ? { logprobs } : {}) };
      if (stopped) return { reason: "stop", produced };
      if (step.end) {
        ended = true;
        break;
      }
      if (!decode) break;
    }
    // What was held back as a possible stop sequence (or a character's first bytes) is text after all.
    const rest = stops.push(decoder.decode()).text + stops.flush();
    if (rest && !signal.aborted) yield { type: "text-delta", text: rest };
    return { reason: ended ? "stop" : "length", produced };
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    let release = () => {};
    const previous = this.#turn;
    this.#turn = new Promise((resolve) => (release = resolve));
    try {
      await previous;
      yield* this.#generate(request, signal);
    } catch (error) {
      // A failed call can leave llama.cpp's KV cache unlike our record of it (a token answered,
      // then its decode failed): the next prompt is prefilled whole.
      if (this.#loaded) this.#loaded.cached = [];
      throw error;
    } finally {
      release();
    }
  }

  async *#generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    await this.load(request.model);
    const worker = await this.#runtime();
    const loaded = this.#loaded!;
    const prompt = await this.#prompt(request, worker);
    const window = loaded.info.contextWindow;
    if (prompt.length === 0 || prompt.length >= window)
      throw new EngineError(
        "context_length",
        `This prompt is ${prompt.length} tokens; the model's context window is ${window}.`,
      );
    await worker.call(this.#sampler(request));
    const reused = await this.#prefill(worker, loaded, prompt, signal);
    if (reused === null) {
      yield { type: "finish", reason: "abort", usage: { promptTokens: null, completionTokens: 0 } };
      return;
    }
    const { reason, produced } = yield* this.#sample(worker, loaded, prompt.length, request, signal);
    yield {
      type: "finish",
      reason: signal.aborted ? "abort" : reason,
      usage: { promptTokens: prompt.length - reused, cachedPromptTokens: reused, completionTokens: produced },
    };
  }
}

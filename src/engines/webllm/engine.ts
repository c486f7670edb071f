/**
 * The WebLLM adapter. It takes the web-llm module as a dependency, so the production build
 * (current web-llm) and the offline test tier (web-llm 0.2.79) run this same code.
 */
import { chooseBuild, memoryEstimateMB, type DeviceFeatures } from "../../catalogue/builds.js";
import { type MlcBuild, type ModelEntry } from "../../catalogue/entry.js";
import { EngineError, fetchAsset, networkRetrySeconds, notLoaded } from "../../core/errors/engine.js";
import { resolveUrl } from "../urls.js";
import { isSoftwareAdapter } from "./software-adapter.js";
import type {
  EmbeddingRequest,
  Embeddings,
  Engine,
  PromptSegment,
  FinishReason,
  GenerationPart,
  GenerationRequest,
  LoadProgress,
  ModelStatus,
  OutputConstraint,
  SamplingOptions,
  TokenLogprob,
  TokenUsage,
} from "../contract.js";

interface WebLlmProgressReport {
  progress: number;
  timeElapsed: number;
  text: string;
}

export interface WebLlmLogprob {
  token: string;
  logprob: number | null;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number | null; bytes: number[] | null }[];
}

interface WebLlmChunk {
  choices: {
    delta?: { content?: string | null };
    text?: string;
    finish_reason?: string | null;
    logprobs?: { content?: WebLlmLogprob[] | null } | null;
  }[];
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
}

/** The part of an `MLCEngine` this adapter uses; the same in every web-llm version we support. */
export interface WebLlmEngineInstance {
  setAppConfig(appConfig: unknown): void;
  setInitProgressCallback(callback: (report: WebLlmProgressReport) => void): void;
  reload(modelId: string, chatOptions?: Record<string, unknown>): Promise<void>;
  unload(): Promise<void>;
  interruptGenerate(): void | Promise<void>;
  /** Forgets the conversation and its KV cache, so the next chat request prefills in full. */
  resetChat(keepStats?: boolean): Promise<void>;
  // Typed loosely on purpose: the request shapes differ slightly between web-llm versions.
  chat: { completions: { create(request: never): Promise<unknown> } };
  completions: { create(request: never): Promise<unknown> };
  /** An embedding model's (`model_type` embedding) vectors: floats only, without `dimensions` or `user`. */
  embeddings: {
    create(request: { input: string[] | number[][] }): Promise<{
      data: { index: number; embedding: number[] }[];
      usage: { prompt_tokens: number };
    }>;
  };
  /** Public in web-llm's declarations; the streaming paths of both create() methods end here. */
  asyncGenerate(
    request: unknown,
    model: string,
    pipeline: unknown,
    chatConfig: unknown,
    genConfig: Record<string, unknown>,
    ...rest: unknown[]
  ): AsyncGenerator<unknown>;
}

/**
 * web-llm's `completion()` builds its generation config without `response_format` (0.2.79
 * through 0.2.86): a grammar given to a raw completion is accepted and then silently dropped, so
 * a tool call on our own prompt would decode unconstrained. Its streaming path passes that config
 * to `asyncGenerate`, where we restore the request's `response_format`. Chat requests already
 * carry it and are left alone.
 */
export function keepCompletionGrammar(engine: WebLlmEngineInstance): void {
  const original = engine.asyncGenerate;
  engine.asyncGenerate = function (request, model, pipeline, chatConfig, genConfig, ...rest) {
    const format = (request as { prompt?: unknown; response_format?: unknown }).response_format;
    const isCompletion = typeof (request as { prompt?: unknown }).prompt === "string";
    const restored =
      isCompletion && format && genConfig.response_format === undefined
        ? { ...genConfig, response_format: format }
        : genConfig;
    return original.call(this, request, model, pipeline, chatConfig, restored, ...rest);
  };
}

/** web-llm's tokenizer (tokenizers-cpp), which parses special-token strings in any text it encodes. */
interface WebLlmTokenizer {
  encode(text: string): Int32Array;
}

/** Token ids for a text web-llm is about to encode, when it is our prompt's (see `promptTokenLookup`). */
export type TokenLookup = (text: string) => number[] | undefined;

/**
 * web-llm takes text only, and its tokenizer turns a control-token string in a message into that
 * token. So while a request of ours generates, its pipeline's tokenizer answers the texts of our
 * prompt with our token ids (the template's control tokens, the messages' text as text), and any
 * other text as before. Every path of both create() methods prefills inside `asyncGenerate`.
 */
function feedPromptTokens(engine: WebLlmEngineInstance, current: () => TokenLookup | undefined): void {
  const original = engine.asyncGenerate;
  engine.asyncGenerate = function (request, model, pipeline, ...rest) {
    const inner = original.call(this, request, model, pipeline, ...rest);
    const lookup = current();
    const tokenizer = (pipeline as { tokenizer?: WebLlmTokenizer } | null)?.tokenizer;
    if (!lookup || !tokenizer) return inner;
    return (async function* () {
      const own = Object.prototype.hasOwnProperty.call(tokenizer, "encode");
      const encode = tokenizer.encode;
      tokenizer.encode = (text) => {
        const ids = lookup(text);
        return ids ? Int32Array.from(ids) : encode.call(tokenizer, text);
      };
      try {
        yield* inner;
      } finally {
        if (own) tokenizer.encode = encode;
        else delete (tokenizer as Partial<WebLlmTokenizer>).encode;
      }
    })();
  };
}

/**
 * The ids of a text web-llm encodes from our messages: one message, or a run of them from the
 * first or to the last (the whole prompt, or a new round after a cached one). Linear in the text.
 */
export function promptTokenLookup(messages: readonly { content: string; tokens: number[] }[]): TokenLookup {
  const whole = messages.map((message) => message.content).join("");
  const starts = new Map<number, number>();
  let offset = 0;
  messages.forEach((message, index) => {
    starts.set(offset, index);
    offset += message.content.length;
  });
  starts.set(offset, messages.length);
  const idsBetween = (from: number, to: number) => messages.slice(from, to).flatMap((message) => message.tokens);
  return (text) => {
    if (text === "") return undefined;
    if (whole.startsWith(text) && starts.has(text.length)) return idsBetween(0, starts.get(text.length)!);
    const from = starts.get(whole.length - text.length);
    if (from !== undefined && whole.endsWith(text)) return idsBetween(from, messages.length);
    return messages.find((message) => message.content === text)?.tokens;
  };
}

/** The part of the `@mlc-ai/web-llm` module this adapter uses. */
export interface WebLlmModule {
  MLCEngine: new (config: { logLevel: "WARN" }) => WebLlmEngineInstance;
  hasModelInCache(modelId: string, appConfig?: unknown): Promise<boolean>;
  deleteModelAllInfoInCache(modelId: string, appConfig?: unknown): Promise<void>;
  modelLibURLPrefix: string;
  modelVersion: string;
}

export interface WebLlmEngineOptions {
  webllm: WebLlmModule;
  /** Weights folders are `modelBaseUrl + build.model` unless `build.model` is absolute. Default: MLC's Hugging Face organisation. */
  modelBaseUrl?: string;
  /** Model libraries are `modelLibBaseUrl + build.modelLib` unless absolute. Default: the web-llm module's own library folder. */
  modelLibBaseUrl?: string;
  /** Where WebGPU comes from; `navigator.gpu` by default. */
  gpu?: GPU | undefined;
  /** GPU memory the device may spend on one model, in MB. Default: from `navigator.deviceMemory` when the browser tells it. */
  memoryBudgetMB?: number;
  onProgress?: (modelId: string, progress: LoadProgress) => void;
  /** The network, for diagnosing a failed load; the global fetch by default. */
  fetch?: typeof fetch;
}

const fetchedPattern = /(\d+(?:\.\d+)?)\s*MB fetched/i;

function toProgress(report: WebLlmProgressReport): LoadProgress {
  const fetched = fetchedPattern.exec(report.text);
  return {
    progress: report.progress,
    text: report.text,
    elapsedSeconds: report.timeElapsed,
    ...(fetched?.[1] ? { loadedBytes: Math.round(Number(fetched[1]) * 1024 * 1024) } : {}),
  };
}

/**
 * A conversation template under which web-llm adds nothing to the messages it is given: no
 * system prompt, role names, separators or BOS of its own (its `conv_config` chat option is
 * merged over the model's template; stop tokens stay the model's). The messages are then the
 * pieces of our rendering of the model's official template, so the model sees exactly the prompt
 * we counted, and web-llm still recognises a conversation it has in its KV cache: earlier pieces
 * unchanged, and the replies it generated given back as their own (assistant) pieces.
 */
export const verbatimConversation = {
  system_template: "{system_message}",
  system_message: "",
  system_prefix_token_ids: null,
  roles: { user: "", assistant: "", tool: "" },
  role_templates: {},
  seps: [""],
  role_content_sep: "",
  role_empty_sep: "",
  add_role_after_system_message: true,
};

/** Our prompt's pieces as web-llm messages: replies as assistant turns, what lies between as user turns. */
export function verbatimMessages(
  segments: readonly PromptSegment[],
): { role: "user" | "assistant"; content: string; tokens: number[] }[] {
  const messages: { role: "user" | "assistant"; content: string; tokens: number[] }[] = [];
  for (const segment of segments) {
    const role = segment.reply ? "assistant" : "user";
    const last = messages.at(-1);
    if (last && last.role === role) {
      last.content += segment.text;
      last.tokens = [...last.tokens, ...segment.tokens];
    } else messages.push({ role, content: segment.text, tokens: segment.tokens });
  }
  return messages;
}

const utf8 = new TextEncoder();

/**
 * web-llm takes the log of the sampling distribution, after temperature: at temperature 0 every
 * token but the chosen one has probability 0, and its log is -Infinity (null once serialised).
 * OpenAI reports such a token as -9999.
 */
const noChance = -9999;

export function toTokenLogprob(entry: WebLlmLogprob): TokenLogprob {
  const bytesOf = (token: string, bytes: number[] | null) => bytes ?? [...utf8.encode(token)];
  const finite = (logprob: number | null) =>
    typeof logprob === "number" && Number.isFinite(logprob) ? logprob : noChance;
  return {
    token: entry.token,
    logprob: finite(entry.logprob),
    bytes: bytesOf(entry.token, entry.bytes),
    alternatives: entry.top_logprobs.map((alternative) => ({
      token: alternative.token,
      logprob: finite(alternative.logprob),
      bytes: bytesOf(alternative.token, alternative.bytes),
    })),
  };
}

/** A build's pinned hashes in web-llm's `ModelRecord.integrity` shape; any mismatch fails the load. */
function webllmIntegrity(integrity: NonNullable<MlcBuild["integrity"]>) {
  return {
    ...(integrity.modelLib ? { model_lib: integrity.modelLib } : {}),
    ...(integrity.config ? { config: integrity.config } : {}),
    ...(integrity.tokenizer ? { tokenizer: integrity.tokenizer } : {}),
    onFailure: "error" as const,
  };
}

/** The fix, where web-llm is the configured engine and the device cannot run a model on it. */
const withoutWebLlm =
  "To serve it without a usable GPU, start the inference with engine: 'auto' and a page-hosted llama.cpp " +
  "(pageEngine: { llamacpp: true }) with the model's GGUF files, or give the model an upstream (routing: 'auto').";

/** web-llm's request validation errors are the request's fault: they surface as 400. */
function classify(error: unknown): unknown {
  if (error instanceof EngineError || !(error instanceof Error)) return error;
  if (
    error.name === "ContextWindowSizeExceededError" ||
    error.name === "EmbeddingExceedContextWindowSizeError" ||
    /exceed context window/i.test(error.message)
  ) {
    return new EngineError("context_length", error.message, { cause: error });
  }
  return new EngineError("unsupported", `WebLLM cannot honour this request: ${error.message}`, { cause: error });
}

export class WebLlmEngine implements Engine {
  readonly name = "webllm";
  readonly #options: WebLlmEngineOptions;
  #engine: WebLlmEngineInstance | undefined;
  #loaded: { modelId: string; contextWindow: number } | undefined;
  #device: Promise<DeviceFeatures> | undefined;
  /** The running request's prompt ids, for web-llm's tokenizer (see `feedPromptTokens`). */
  #lookup: TokenLookup | undefined;
  /** Whose conversation web-llm's KV cache holds (`GenerationRequest.cacheScope`). */
  #cacheScope: string | null = null;

  constructor(options: WebLlmEngineOptions) {
    this.#options = options;
  }

  device(): Promise<DeviceFeatures> {
    this.#device ??= this.#probeDevice();
    return this.#device;
  }

  async #probeDevice(): Promise<DeviceFeatures> {
    const gpu = this.#options.gpu ?? (typeof navigator !== "undefined" ? navigator.gpu : undefined);
    const adapter = gpu ? await gpu.requestAdapter().catch(() => null) : null;
    const deviceMemory =
      typeof navigator !== "undefined" ? (navigator as { deviceMemory?: number }).deviceMemory : undefined;
    const memoryBudgetMB = this.#options.memoryBudgetMB ?? (deviceMemory ? deviceMemory * 1024 : undefined);
    return {
      webgpu: adapter !== null,
      features: new Set(adapter ? [...adapter.features] : []),
      softwareAdapter: adapter !== null && isSoftwareAdapter(adapter),
      ...(memoryBudgetMB !== undefined ? { memoryBudgetMB } : {}),
    };
  }

  #record(model: ModelEntry, build: MlcBuild) {
    const { webllm } = this.#options;
    return {
      model: resolveUrl(build.model, this.#options.modelBaseUrl ?? "https://huggingface.co/mlc-ai/"),
      model_id: build.modelId,
      model_lib: resolveUrl(
        build.modelLib,
        this.#options.modelLibBaseUrl ?? webllm.modelLibURLPrefix + webllm.modelVersion,
      ),
      required_features: build.requiredFeatures,
      vram_required_MB: memoryEstimateMB(model, build),
      overrides: { ...build.overrides, context_window_size: model.contextWindow },
      // web-llm's ModelType: 1 is an embedding model, run by engine.embeddings.create.
      ...(model.kind === "embedding" ? { model_type: 1 } : {}),
      ...(build.integrity ? { integrity: webllmIntegrity(build.integrity) } : {}),
    };
  }

  #appConfig(model: ModelEntry, build: MlcBuild) {
    return { model_list: [this.#record(model, build)], useIndexedDBCache: false };
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    const choice = chooseBuild(model, await this.device());
    const build = choice.build;
    const downloaded = build
      ? await this.#options.webllm.hasModelInCache(build.modelId, this.#appConfig(model, build)).catch(() => false)
      : false;
    return {
      downloaded,
      loaded: build !== null && this.#loaded?.modelId === build.modelId,
      runnable: choice.ok ? { ok: true, reason: null } : { ok: false, reason: choice.reason },
      build,
    };
  }

  /** Whether `model` is loaded as the build `modelId`, with its window. */
  #holds(model: ModelEntry, modelId: string): boolean {
    return this.#loaded?.modelId === modelId && this.#loaded.contextWindow === model.contextWindow;
  }

  async load(model: ModelEntry, onProgress?: (progress: LoadProgress) => void): Promise<void> {
    const choice = chooseBuild(model, await this.device());
    if (!choice.ok)
      throw new EngineError("device", `${model.id} cannot run on this device: ${choice.reason}. ${withoutWebLlm}`);
    const { build } = choice;
    if (this.#holds(model, build.modelId)) return;
    if (!this.#engine) {
      this.#engine = new this.#options.webllm.MLCEngine({ logLevel: "WARN" });
      keepCompletionGrammar(this.#engine);
      feedPromptTokens(this.#engine, () => this.#lookup);
    }
    const engine = this.#engine;
    engine.setAppConfig(this.#appConfig(model, build));
    engine.setInitProgressCallback((report) => {
      const progress = toProgress(report);
      onProgress?.(progress);
      this.#options.onProgress?.(model.id, progress);
    });
    this.#loaded = undefined;
    try {
      await engine.reload(build.modelId, { conv_config: verbatimConversation });
    } catch (error) {
      throw await this.#diagnose(model, build, error);
    }
    this.#loaded = { modelId: build.modelId, contextWindow: model.contextWindow };
  }

  /**
   * web-llm reports a missing file as "Failed to fetch" or a JSON error, naming no URL. So a
   * failed load fetches the two files every load starts with (the weights' config and the model
   * library) itself: the first that fails names its URL and the option that points at it. When
   * both are there the files are corrupt or incompatible (permanent), unless the failure was the
   * network dropping mid-download (transient: the finished shards are kept and resumed). A write
   * the browser refused for its quota is a storage failure, whatever else holds.
   */
  async #diagnose(model: ModelEntry, build: MlcBuild, error: unknown): Promise<EngineError> {
    const record = this.#record(model, build);
    if ((error as Error).name === "IntegrityError") {
      const { url, expected, actual } = error as Error & { url: string; expected: string; actual: string };
      return new EngineError(
        "load_failed",
        `Could not load ${build.modelId}: ${url} hashes to ${actual}, not the pinned ${expected}, so it was not run. The file at that URL is not the one pinned: point the build at the revision that has this hash, or pin the new file's hash in \`integrity\`.`,
        { cause: error },
      );
    }
    const detail = (error as Error).message ?? String(error);
    if ((error as Error).name === "QuotaExceededError")
      return new EngineError(
        "storage",
        `Could not keep the weights of ${build.modelId} on this device: the browser refused to store them (${detail}). Free space on the device, or delete models this site no longer needs (the app's \`deleteModel\`); then try again, and what finished downloading is kept.`,
        { cause: error },
      );
    const weights = record.model.endsWith("/") ? record.model : `${record.model}/`;
    const configUrl = new URL(
      "mlc-chat-config.json",
      /\/resolve\/.+\//.test(weights) ? weights : `${weights}resolve/main/`,
    ).href;
    const fetcher = this.#options.fetch ?? ((input, init) => fetch(input, init));
    try {
      await fetchAsset(
        configUrl,
        `the weights of ${build.modelId} (mlc-chat-config.json)`,
        "set `artifacts.modelBaseUrl` to a folder that holds the model's MLC weights (the default is MLC's Hugging Face organisation)",
        {
          kind: "load_failed",
          fetcher,
        },
      );
      await fetchAsset(
        record.model_lib,
        `the model library of ${build.modelId}`,
        "set `artifacts.modelLibBaseUrl` to a folder that holds the model libraries built for this web-llm version",
        {
          kind: "load_failed",
          fetcher: (input) => fetcher(input, { method: "HEAD" }),
        },
      );
    } catch (diagnosis) {
      if (diagnosis instanceof EngineError)
        return new EngineError("load_failed", `${diagnosis.message} (web-llm said: ${detail})`, {
          cause: error,
          ...(diagnosis.retryAfterSeconds ? { retryAfterSeconds: diagnosis.retryAfterSeconds } : {}),
        });
      throw diagnosis;
    }
    const network = error instanceof TypeError || /failed to fetch|network/i.test(detail);
    return new EngineError(
      "load_failed",
      network
        ? `Could not load ${build.modelId}: the network failed mid-download (${detail}). What finished downloading is kept; try again.`
        : `Could not load ${build.modelId} from ${record.model}: ${detail}. Its files are there but could not be loaded: they may be corrupt, or built for another web-llm version.`,
      { cause: error, ...(network ? { retryAfterSeconds: networkRetrySeconds } : {}) },
    );
  }

  async dispose(): Promise<void> {
    this.#loaded = undefined;
    await this.#engine?.unload();
  }

  async deleteCached(model: ModelEntry): Promise<void> {
    const { build } = chooseBuild(model, await this.device());
    for (const candidate of build ? [build] : model.builds) {
      if (this.#loaded?.modelId === candidate.modelId) {
        await this.#engine?.unload();
        this.#loaded = undefined;
      }
      await this.#options.webllm.deleteModelAllInfoInCache(candidate.modelId, this.#appConfig(model, candidate));
    }
  }

  /**
   * web-llm's `engine.embeddings.create`, asked for floats alone: it refuses `encoding_format`,
   * `dimensions` and `user`, which the endpoint applies itself. It cannot stop midway: an abort
   * is seen before and after.
   */
  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    signal.throwIfAborted();
    if (request.onlyIfLoaded) {
      const choice = chooseBuild(request.model, await this.device());
      if (!(choice.ok && this.#holds(request.model, choice.build.modelId)))
        throw notLoaded(this.name, request.model.id);
    }
    await this.load(request.model);
    const engine = this.#engine;
    if (!engine) throw new Error("engine missing after load");
    const texts = request.inputs.flatMap((input) => (input.kind === "text" ? [input.text] : []));
    const ids = request.inputs.flatMap((input) => (input.kind === "tokens" ? [input.tokens] : []));
    // An input past the model's window is the client's to shorten (`classify`).
    const reply = await engine.embeddings.create({ input: texts.length > 0 ? texts : ids }).catch((error: unknown) => {
      throw classify(error);
    });
    signal.throwIfAborted();
    const vectors = [...reply.data].sort((a, b) => a.index - b.index).map((item) => Float32Array.from(item.embedding));
    return { vectors, promptTokens: reply.usage.prompt_tokens };
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    await this.load(request.model);
    const engine = this.#engine;
    if (!engine) throw new Error("engine missing after load");
    // web-llm reuses the KV cache of the conversation it last ran: only for the same scope.
    const scope = request.cacheScope ?? null;
    if (scope !== this.#cacheScope) await engine.resetChat();
    this.#cacheScope = scope;
    const { sampling, input } = request;
    const chunks = await this.#start(engine, request);
    const interrupt = () => void engine.interruptGenerate();
    signal.addEventListener("abort", interrupt, { once: true });
    const state: StreamState = { reason: "stop", usage: undefined, deltas: 0 };
    try {
      for await (const chunk of chunks) yield* partsOf(chunk, sampling, state);
    } finally {
      signal.removeEventListener("abort", interrupt);
      this.#lookup = undefined;
    }
    // A reply cut at a stop string leaves the string's tokens in web-llm's KV cache while the
    // reply text (which a client sends back) lacks them: a next turn must not reuse that cache.
    if (input.kind === "chat" && sampling.stop.length > 0) await engine.resetChat();
    // web-llm streams one delta per decoded token, so when an interrupted stream carries no
    // usage the count of deltas is the count of tokens produced.
    const usage = state.usage ?? { promptTokens: null, completionTokens: state.deltas };
    yield { type: "finish", reason: signal.aborted ? "abort" : state.reason, usage };
  }

  /** Starts web-llm's stream for the request, its prompt fed as our token ids (see `feedPromptTokens`). */
  async #start(
    engine: WebLlmEngineInstance,
    { sampling, constraint, input }: GenerationRequest,
  ): Promise<AsyncIterable<WebLlmChunk>> {
    const common = { stream: true, stream_options: { include_usage: true }, ...requestOptions(sampling, constraint) };
    const messages = input.kind === "chat" ? verbatimMessages(input.segments) : [];
    this.#lookup =
      input.kind === "chat"
        ? promptTokenLookup(messages)
        : input.tokens
          ? promptTokenLookup([{ content: input.prompt, tokens: input.tokens }])
          : undefined;
    try {
      return (await (input.kind === "chat"
        ? engine.chat.completions.create(<never>{
            ...common,
            messages: messages.map(({ role, content }) => ({ role, content })),
          })
        : engine.completions.create(<never>{ ...common, prompt: input.prompt }))) as AsyncIterable<WebLlmChunk>;
    } catch (error) {
      this.#lookup = undefined;
      throw classify(error);
    }
  }
}

/** What a stream has said so far: how it finished, its usage, and how many text deltas it sent. */
interface StreamState {
  reason: FinishReason;
  usage: TokenUsage | undefined;
  deltas: number;
}

/**
 * The least `top_p` web-llm is sent: it refuses 0 (its range is (0, 1]), which OpenAI takes as the
 * nucleus of the most likely token alone. A nucleus of this much mass is that token too, unless it
 * is less likely than this (a flat vocabulary of over a million tokens), and the value is far
 * from the 32-bit floats' least, in which the sampler runs.
 */
const leastTopP = 1e-6;

/**
 * web-llm's generator takes its seed modulo this (2³¹ − 1) and fails on a negative remainder,
 * while OpenAI's seeds may be negative: they are sent as their remainder in [0, modulus), the
 * seed web-llm would use for the same class.
 */
const seedModulus = 2_147_483_647;

/** Our sampling options and constraint in web-llm's OpenAI-style request fields. */
function requestOptions(sampling: SamplingOptions, constraint: OutputConstraint | undefined): Record<string, unknown> {
  return {
    temperature: sampling.temperature,
    top_p: Math.max(sampling.topP, leastTopP),
    max_tokens: sampling.maxTokens,
    presence_penalty: sampling.presencePenalty,
    frequency_penalty: sampling.frequencyPenalty,
    ...(sampling.stop.length ? { stop: sampling.stop } : {}),
    ...(sampling.seed !== undefined ? { seed: ((sampling.seed % seedModulus) + seedModulus) % seedModulus } : {}),
    ...(sampling.logprobs !== undefined ? { logprobs: true, top_logprobs: sampling.logprobs } : {}),
    ...(sampling.logitBias ? { logit_bias: sampling.logitBias } : {}),
    ...(constraint === undefined
      ? {}
      : constraint.grammar !== undefined
        ? { response_format: { type: "grammar", grammar: constraint.grammar } }
        : {
            response_format: {
              type: "json_object",
              ...(constraint.kind === "json" && constraint.schema ? { schema: constraint.schema } : {}),
            },
          }),
  };
}

/** One web-llm chunk as our parts (a text delta, when it carries text or log probabilities), noting its finish and usage. */
function* partsOf(chunk: WebLlmChunk, sampling: SamplingOptions, state: StreamState): Generator<GenerationPart> {
  const choice = chunk.choices[0];
  const text = choice?.delta?.content ?? choice?.text ?? "";
  // One entry per chunk, for the token just decoded. web-llm sends no chunk for a token
  // that completes no character yet (part of an emoji), so that token's entry is missing.
  const logprobs = sampling.logprobs !== undefined ? (choice?.logprobs?.content ?? []).map(toTokenLogprob) : [];
  if (text) state.deltas++;
  if (text || logprobs.length) yield { type: "text-delta", text, ...(logprobs.length ? { logprobs } : {}) };
  if (choice?.finish_reason)
    state.reason = choice.finish_reason === "length" ? "length" : choice.finish_reason === "abort" ? "abort" : "stop";
  // web-llm's completion_tokens counts decode steps only; the token sampled at the end of
  // prefill is one more (its output is decode steps + 1 tokens, and max_tokens bounds that
  // total), as in web-llm 0.2.79 through 0.2.86. A usage chunk means prefill ran.
  if (chunk.usage)
    state.usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens + 1 };
}

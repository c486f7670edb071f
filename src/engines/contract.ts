/**
 * The engine contract, in the manner of the Vercel AI provider spec: a request goes in and a
 * typed stream of parts comes out. Engines know nothing of HTTP, IndexedDB, money or keys.
 */
import type { DeviceFeatures } from "../catalogue/builds.js";
import type { GgufBuild, LocalEngine, MlcBuild, ModelEntry } from "../catalogue/entry.js";
import type { ToolSpec } from "../prompt/templates.js";
import type { EngineMessage } from "../prompt/messages.js";
import type { PromptPiece } from "../prompt/tokenizer.js";

/** A generated token's log probability, and the most likely tokens at its position (the token itself among them). */
export interface TokenLogprob {
  token: string;
  logprob: number;
  /** The token's UTF-8 bytes: a token may hold part of a character. */
  bytes: number[];
  alternatives: { token: string; logprob: number; bytes: number[] }[];
}

export interface SamplingOptions {
  temperature: number;
  topP: number;
  /** Always set: the HTTP layer fills it from the context window when the client did not. */
  maxTokens: number;
  stop: string[];
  presencePenalty: number;
  frequencyPenalty: number;
  seed?: number;
  /** Report each token's log probability, with this many alternatives (0 to 5). */
  logprobs?: number;
  /** Added to the logits of these token ids before sampling; -100 bans a token, 100 all but forces it. */
  logitBias?: Record<number, number>;
}

export type ToolChoiceSpec = "auto" | "required" | { name: string };

/**
 * Constrained decoding. WebLLM enforces an EBNF grammar (or, for `json` without one, its own
 * JSON mode), the forms every supported web-llm version has. `json` and `tools` also carry
 * what they mean (the schema, the tools) for engines that build replies rather than decode
 * them (the deterministic engine).
 */
export type OutputConstraint =
  | { kind: "json"; schema?: string; grammar?: string }
  | { kind: "grammar"; grammar: string }
  | {
      kind: "tools";
      grammar: string;
      tools: ToolSpec[];
      choice: ToolChoiceSpec;
      parallel: boolean;
      /** The conversation's last turn is a tool result. */
      afterToolResult: boolean;
      /** Under `auto` with a response_format: a reply that is no call is JSON (of `schema`, else any object). */
      text?: { schema?: string };
    };

/** A piece of a conversation's prompt (see `renderChatSegments`): `reply` marks an earlier reply given back verbatim. */
export interface PromptSegment {
  text: string;
  reply: boolean;
  /** The piece's token ids: the template's control tokens, and the messages' text as text. */
  tokens: number[];
}

export type GenerationInput =
  /**
   * A conversation, and the prompt the family's template renders for it, whole (`tokens`), in
   * segments, and as the template's pieces (its control tokens, and text): an engine feeds the
   * model exactly those token ids, or (an engine with the model's own vocabulary, llama.cpp) the
   * pieces tokenized with control tokens only where the template wrote them, so the prompt it
   * sees is the one counted and billed, and a control-token string in a message stays text.
   */
  | { kind: "chat"; messages: EngineMessage[]; segments: PromptSegment[]; tokens: number[]; pieces: PromptPiece[] }
  /**
   * A raw prompt. `tokens` and `pieces` when it is our template's rendering (tool calls); without
   * them it is a client's own prompt (legacy completions), in which special-token strings are its to write.
   */
  | { kind: "text"; prompt: string; tokens?: number[]; pieces?: PromptPiece[] };

export interface GenerationRequest {
  model: ModelEntry;
  input: GenerationInput;
  sampling: SamplingOptions;
  constraint?: OutputConstraint;
  /**
   * The engine chosen for this request when it was routed (`Engine.choice`): an engine that
   * chooses per model runs this one rather than choosing again, so the reply's
   * `x-inference-engine` names the engine that ran.
   */
  engine?: LocalEngine;
  /**
   * Whose cache the request may reuse (the account that sends it). An engine reuses a cached
   * prompt prefix only from an earlier request of the same scope, so no account can learn from
   * cached token counts or from timing what another account's prompts held.
   */
  cacheScope?: string;
}

export type FinishReason = "stop" | "length" | "abort";

export interface TokenUsage {
  /**
   * The prompt tokens the engine prefilled for this request; fewer than the prompt's when it
   * reused a cached prefix. Null when the engine could not tell (an interrupted stream); the
   * caller then uses its own count.
   */
  promptTokens: number | null;
  /** Of the prompt, the tokens the engine reused from its cache, where it says (llama.cpp does; web-llm does not). */
  cachedPromptTokens?: number;
  completionTokens: number;
}

/** One generated sequence: any number of text deltas, then exactly one `finish`. */
export type GenerationPart =
  /** `logprobs`, when asked for: the tokens this delta completes (a delta may wait for a character's last byte). */
  | { type: "text-delta"; text: string; logprobs?: TokenLogprob[] }
  | { type: "finish"; reason: FinishReason; usage: TokenUsage };

/** An input to embed: text, or token ids of the model's own vocabulary. */
export type EmbeddingInput = { kind: "text"; text: string } | { kind: "tokens"; tokens: number[] };

export interface EmbeddingRequest {
  model: ModelEntry;
  inputs: EmbeddingInput[];
  /** The engine chosen for this request when it was routed, as for a generation. */
  engine?: LocalEngine;
  /**
   * Embed only with the model already loaded, else refuse at once (`notLoaded`): for work that
   * starts before its admission is decided, which must never load or switch a model.
   */
  onlyIfLoaded?: boolean;
}

/** One vector per input, in order (not yet normalised), and the tokens the model embedded. */
export interface Embeddings {
  vectors: Float32Array[];
  /** Every input's tokens together, in the model's tokenizer, with the special tokens it adds. */
  promptTokens: number;
}

export interface LoadProgress {
  /** 0..1 */
  progress: number;
  text: string;
  loadedBytes?: number;
  totalBytes?: number;
  elapsedSeconds?: number;
}

export interface ModelStatus {
  downloaded: boolean;
  loaded: boolean;
  runnable: { ok: boolean; reason: string | null };
  /** The build this engine would run: an MLC build for web-llm, a GGUF build for llama.cpp. */
  build: MlcBuild | GgufBuild | null;
  /** The engine that serves the model on this device, and why (when engines are chosen per model). */
  engine?: { name: string; reason: string; threads?: number };
  /** The CPU threads llama.cpp runs the loaded model on (several only in a cross-origin isolated page). */
  threads?: number;
}

export interface Engine {
  readonly name: string;
  /** What this device offers; used to choose builds and to answer `/model/info`. */
  device(): Promise<DeviceFeatures>;
  status(model: ModelEntry): Promise<ModelStatus>;
  load(model: ModelEntry, onProgress?: (progress: LoadProgress) => void): Promise<void>;
  /** Deletes the model's downloaded files, where the engine keeps any. */
  deleteCached?(model: ModelEntry): Promise<void>;
  /** Frees what the engine holds (a loaded model's GPU memory) when a new configuration replaces it. */
  dispose?(): Promise<void>;
  /** Which engine serves `model` here and why, for engines that choose per model (src/engines/choice.ts). */
  choice?(model: ModelEntry): Promise<{ name: string; reason: string; threads?: number }>;
  /** Embeds every input of an embedding model (`kind: "embedding"`); rejects when `signal` aborts first. */
  embed?(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings>;
  /** Ends with a `finish` part even when `signal` aborts; then the reason is `abort`. */
  generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationPart>;
  /**
   * The same generation, posted onto `port` (src/engines/part-stream.ts) by whatever thread runs
   * it, for engines that run off the caller's thread: the parts then reach the port's other end
   * without waking the caller. Rejects, with nothing more to come on the port, when it could not
   * generate; the caller reports that. `signal` is the reader's abort as the caller hears it
   * (the reader also posts it on the port), for an engine that can stop a step midway.
   */
  streamTo?(request: GenerationRequest, port: MessagePort, signal?: AbortSignal): Promise<void>;
}

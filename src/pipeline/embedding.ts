/**
 * Embedding on the one engine: queueing for it as a generation does, running every input, and
 * settling the meter with the tokens the model embedded. Vectors leave as the engine gave them;
 * the endpoint normalises and encodes them.
 */
import { BadRequestError } from "../core/errors/api.js";
import { cannotEmbed, EngineError } from "../core/errors/engine.js";
import type { ModelEntry, Upstream } from "../catalogue/entry.js";
import { rawPromptPrefixTokens } from "../catalogue/families.js";
import type { Tokenizer } from "../prompt/tokenizer.js";
import type { Engine, EmbeddingInput, EmbeddingRequest, Embeddings } from "../engines/contract.js";
import { admit, nothingUsed, type Admitted, type Meter } from "./metering.js";
import { chosenEngine, type Placement } from "./placement.js";
import type { ServeRequest } from "./request.js";
import type { Scheduler } from "./scheduler.js";
import type { Services } from "./services.js";
import { forwardEmbeddings } from "./upstream/embeddings.js";

/** Inputs to embed with a model, counted before admission. */
export interface EmbeddingCall {
  model: ModelEntry;
  inputs: EmbeddingInput[];
  /**
   * Counted with the family's tokenizer: exact for the deterministic engine, an estimate for an
   * upstream. For an engine that counts in a vocabulary of its own, `mostTokens`, unless the
   * call needed the family's count to be bounded (src/endpoints/embeddings/embeddings.ts).
   */
  promptTokens: number;
  /**
   * The most tokens the inputs can be billed, in any vocabulary: a text no more than its UTF-8
   * bytes and two special tokens (a BPE token, a WordPiece and a byte are each a byte at least),
   * token ids as they are, and no input more than the model's window (an engine refuses a longer
   * one, and the call is billed nothing). What an engine with its own vocabulary is admitted for,
   * so its count is billed whole.
   */
  mostTokens: number;
  /** The request as an upstream is sent it: floats, whole. */
  body: Record<string, unknown>;
}

const utf8 = new TextEncoder();

/** The most tokens `inputs` can be billed on a model of `window` tokens, in any vocabulary (`EmbeddingCall.mostTokens`). */
export function mostTokensOf(inputs: readonly EmbeddingInput[], window: number): number {
  return inputs.reduce(
    (sum, input) =>
      sum + Math.min(window, input.kind === "text" ? utf8.encode(input.text).length + 2 : input.tokens.length),
    0,
  );
}

/**
 * Whether the family's tokenizer must count a call's inputs where it is placed: the
 * deterministic engine counts with it, and an upstream is billed as a forwarded chat is, its
 * count at most ours. Another local engine counts in its own vocabulary and is admitted for
 * the most the inputs can be (`mostTokensOf`).
 */
export function familyCounts(placement: Placement): boolean {
  return placement.decision.target === "remote" || placement.engine?.name === "deterministic";
}

/**
 * What an embedding is admitted for where it is placed: the family's count where that is billed
 * (`familyCounts`), else the most the inputs can be, so the engine's own count is billed whole.
 */
export function embeddingAdmission(placement: Placement, call: EmbeddingCall): Admitted {
  return {
    promptTokens: familyCounts(placement) ? call.promptTokens : Math.max(call.promptTokens, call.mostTokens),
    maxCompletionTokens: 0,
  };
}

/**
 * The most tokens (`EmbeddingCall.mostTokens`) a call may be to start before its admission is
 * decided: a search box's query, not a batch, so what a refused call ran is small.
 */
const earlyTokens = 256;

/** An embedding started while its admission is decided (`embedEarly`). */
export interface EarlyEmbedding {
  /** The engine's vectors; undefined when the engine did not hold the model, so nothing ran. */
  result: Promise<Embeddings | undefined>;
  /** The admission refused the call: it leaves the engine's queue if it has not started. */
  refused(): void;
}

/**
 * Starts a short call on this device while its admission's transaction runs, so that a query
 * waits for the engine alone. Only on a model the engine already holds (`onlyIfLoaded`): a call
 * that may be refused never loads or switches a model. One the admission refuses is dropped from
 * the engine's queue, or, once running, finishes unread: stopping a running decode can cost the
 * engine its Worker and model. What a refused call runs is bounded by `earlyTokens` and by its
 * key's requests per minute, counted before it got here.
 */
function embedEarly(
  services: { engine: Engine; scheduler: Scheduler },
  request: ServeRequest,
  placement: Placement,
  call: EmbeddingCall,
): EarlyEmbedding | undefined {
  if (placement.decision.target !== "local" || call.mostTokens > earlyTokens || !services.engine.embed)
    return undefined;
  const refusal = new AbortController();
  const engine = chosenEngine(placement);
  const embedding = { model: call.model, inputs: call.inputs, onlyIfLoaded: true, ...(engine ? { engine } : {}) };
  const turn = AbortSignal.any([request.signal, refusal.signal]);
  const result = embedInTurn(services, embedding, request.signal, "request", turn).catch((error: unknown) => {
    if (error instanceof EngineError && error.kind === "not_loaded") return undefined;
    throw error;
  });
  // Unread when the admission refuses the call.
  result.catch(() => undefined);
  return { result, refused: () => refusal.abort(new Error("the admission refused the request")) };
}

/** Admits `call` (429 or 403 when refused), a short one embedding on this device meanwhile (`embedEarly`). */
export async function admitEmbedding(
  services: Services,
  request: ServeRequest,
  placement: Placement,
  call: EmbeddingCall,
): Promise<{ meter: Meter; early?: EarlyEmbedding }> {
  const early = embedEarly(services, request, placement, call);
  try {
    const meter = await admit(services, request, call.model, embeddingAdmission(placement, call));
    return { meter, ...(early ? { early } : {}) };
  } catch (error) {
    early?.refused();
    throw error;
  }
}

/**
 * Embeds an admitted call where it was placed, on this device or by the model's upstreams; the
 * meter is settled either way. `early` is the call already started on this device (`embedEarly`).
 */
export async function embedAdmitted(
  services: Services,
  request: ServeRequest,
  placement: Placement,
  call: EmbeddingCall,
  meter: Meter,
  options: { priority?: "request" | "background"; early?: EarlyEmbedding | undefined } = {},
): Promise<{ vectors: readonly Float32Array[]; promptTokens: number; upstream?: Upstream }> {
  const { model } = call;
  if (placement.decision.target === "remote") {
    const plan = {
      model,
      decision: placement.decision,
      endpoint: "embeddings" as const,
      body: call.body,
      stream: false,
    };
    const counts = { promptTokens: call.promptTokens, inputs: call.inputs.length };
    return forwardEmbeddings(services, request, { ...plan, ...counts }, meter);
  }
  const engine = chosenEngine(placement);
  const embedding = { model, inputs: call.inputs, ...(engine ? { engine } : {}) };
  return runEmbedding(services, meter, embedding, request.signal, options).catch((error: unknown) => {
    // An input past what the engine embeds at once, counted in its own vocabulary: the client's input to shorten.
    if (error instanceof EngineError && error.kind === "context_length")
      throw new BadRequestError(error.message, { code: "context_length_exceeded", param: "input" });
    throw error;
  });
}

/** Texts the API embeds for itself (a store's chunks, a search's queries), counted as `/v1/embeddings` counts text. */
export function textEmbeddingCall(model: ModelEntry, tokenizer: Tokenizer, texts: readonly string[]): EmbeddingCall {
  const inputs: EmbeddingInput[] = texts.map((text) => ({ kind: "text", text }));
  const prefix = rawPromptPrefixTokens[model.family];
  const promptTokens = texts.reduce((sum, text) => sum + prefix + tokenizer.encodeText(text).length, 0);
  const body = { model: model.id, input: [...texts], encoding_format: "float" };
  return { model, inputs, promptTokens, mostTokens: mostTokensOf(inputs, model.contextWindow), body };
}

/** A vector's first `size` values, scaled to length 1 (a zero vector stays zero). */
export function normalised(vector: Float32Array, size: number = vector.length): Float32Array {
  const length = Math.min(size, vector.length);
  let squares = 0;
  for (let index = 0; index < length; index++) squares += vector[index]! * vector[index]!;
  const scale = squares > 0 ? 1 / Math.sqrt(squares) : 0;
  const unit = new Float32Array(length);
  for (let index = 0; index < length; index++) unit[index] = vector[index]! * scale;
  return unit;
}

/** What the engine embedded (or had embedded early), with the tokens billed: the engine's own count of each input. */
async function runEmbedding(
  services: { engine: Engine; scheduler: Scheduler },
  meter: Meter,
  request: EmbeddingRequest,
  signal: AbortSignal,
  options: { priority?: "request" | "background"; early?: EarlyEmbedding },
): Promise<Embeddings> {
  let embedded: Embeddings;
  try {
    embedded =
      (await options.early?.result) ?? (await embedInTurn(services, request, signal, options.priority ?? "request"));
  } catch (error) {
    // Nothing was delivered: an embedding is all or nothing, so a failed or abandoned one costs nothing.
    await meter.settle(signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
  }
  meter.firstToken();
  settleBehind(meter, embedded.promptTokens);
  return embedded;
}

/** The engine's vectors, once it is this call's turn on the engine; `turn` abandons the wait (default `signal`). */
async function embedInTurn(
  services: { engine: Engine; scheduler: Scheduler },
  request: EmbeddingRequest,
  signal: AbortSignal,
  priority: "request" | "background",
  turn: AbortSignal = signal,
): Promise<Embeddings> {
  const { engine, scheduler } = services;
  if (!engine.embed) throw cannotEmbed(engine.name, request.model.id);
  const release = await scheduler.acquire(turn, priority);
  try {
    const embedded = await engine.embed(request, signal);
    if (embedded.vectors.length !== request.inputs.length)
      throw new Error(
        `the ${engine.name} engine gave ${embedded.vectors.length} vectors for ${request.inputs.length} inputs`,
      );
    return embedded;
  } finally {
    release();
  }
}

/**
 * Settles a completed embedding without holding its reply for the commit: a search box's query
 * waits for the engine, not for a second transaction. Safe because the settlement's transaction
 * is created before the reply leaves (`Accounts.settle` opens it on its first step), and IndexedDB
 * runs transactions on the same stores in the order they were created, in every tab: whatever a
 * client reads or admits after the reply sees the charge. A settlement that fails keeps its
 * reservation (never an overspend), and a worker that dies first leaves it to the orphan sweep.
 */
function settleBehind(meter: Meter, promptTokens: number): void {
  meter
    .settle("completed", { promptTokens, completionTokens: 0 })
    .catch((error: unknown) => console.error("[webgpu-inference] settling an embedding failed", error));
}

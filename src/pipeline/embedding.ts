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
import { nothingUsed, type Admitted, type Meter } from "./metering.js";
import { chosenEngine, type Placement } from "./placement.js";
import type { ServeRequest } from "./request.js";
import type { Scheduler } from "./scheduler.js";
import type { Services } from "./services.js";
import { forwardEmbeddings } from "./upstream/embeddings.js";

/** Inputs to embed with a model, counted before admission. */
export interface EmbeddingCall {
  model: ModelEntry;
  inputs: EmbeddingInput[];
  /** Counted with the family's tokenizer: exact for the deterministic engine, an estimate for an engine or upstream with a vocabulary of its own. */
  promptTokens: number;
  /**
   * The most tokens the inputs can be in any vocabulary: a text no more than its UTF-8 bytes and
   * two special tokens (a BPE token, a WordPiece and a byte are each a byte at least), token ids
   * as they are. What an engine with its own vocabulary is admitted for, so its count is billed whole.
   */
  mostTokens: number;
  /** The request as an upstream is sent it: floats, whole. */
  body: Record<string, unknown>;
}

const utf8 = new TextEncoder();

/** The most tokens `inputs` can be, in any vocabulary (`EmbeddingCall.mostTokens`). */
export function mostTokensOf(inputs: readonly EmbeddingInput[]): number {
  return inputs.reduce(
    (sum, input) => sum + (input.kind === "text" ? utf8.encode(input.text).length + 2 : input.tokens.length),
    0,
  );
}

/**
 * What an embedding is admitted for where it is placed. The deterministic engine counts with the
 * family's tokenizer, as the call was counted; another local engine with its own, so it is
 * admitted for the most the inputs can be. An upstream is billed as a forwarded chat is: its
 * count, at most what was counted here.
 */
export function embeddingAdmission(placement: Placement, call: EmbeddingCall): Admitted {
  const counted = placement.decision.target === "remote" || placement.engine?.name === "deterministic";
  return {
    promptTokens: counted ? call.promptTokens : Math.max(call.promptTokens, call.mostTokens),
    maxCompletionTokens: 0,
  };
}

/** Embeds an admitted call where it was placed, on this device or by the model's upstreams; the meter is settled either way. */
export async function embedAdmitted(
  services: Services,
  request: ServeRequest,
  placement: Placement,
  call: EmbeddingCall,
  meter: Meter,
  priority: "request" | "background" = "request",
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
  return runEmbedding(services, meter, embedding, request.signal, priority).catch((error: unknown) => {
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
  return { model, inputs, promptTokens, mostTokens: mostTokensOf(inputs), body };
}

/** A vector's first `size` values, scaled to length 1 (a zero vector stays zero). */
export function normalised(vector: Float32Array, size: number = vector.length): Float32Array {
  const cut = vector.subarray(0, size);
  let squares = 0;
  for (const value of cut) squares += value * value;
  const scale = squares > 0 ? 1 / Math.sqrt(squares) : 0;
  return Float32Array.from(cut, (value) => value * scale);
}

/** What the engine embedded, with the tokens billed: the engine's own count of each input. */
async function runEmbedding(
  services: { engine: Engine; scheduler: Scheduler },
  meter: Meter,
  request: EmbeddingRequest,
  signal: AbortSignal,
  priority: "request" | "background" = "request",
): Promise<Embeddings> {
  const { engine, scheduler } = services;
  const inputs = request.inputs.length;
  if (!engine.embed) {
    await meter.settle("failed", nothingUsed);
    throw cannotEmbed(engine.name, request.model.id);
  }
  let release: () => void;
  try {
    release = await scheduler.acquire(signal, priority);
  } catch (error) {
    await meter.settle(signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
  }
  try {
    const embedded = await engine.embed(request, signal);
    if (embedded.vectors.length !== inputs)
      throw new Error(`the ${engine.name} engine gave ${embedded.vectors.length} vectors for ${inputs} inputs`);
    meter.firstToken();
    settleBehind(meter, embedded.promptTokens);
    return embedded;
  } catch (error) {
    // Nothing was delivered: an embedding is all or nothing, so a failed or abandoned one costs nothing.
    await meter.settle(signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
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

/**
 * `POST /v1/embeddings`: parse, count, place, then embed on this device or forward to the
 * model's upstreams; either way admitted and settled by the one meter, and answered in OpenAI's
 * list of vectors, as floats or base64.
 */
import { BadRequestError } from "../../core/errors/api.js";
import { EngineError } from "../../core/errors/engine.js";
import type { ModelEntry } from "../../catalogue/entry.js";
import { rawPromptPrefixTokens } from "../../catalogue/families.js";
import { embeddingRequestSchema, type EmbeddingList } from "../../core/wire/embeddings.js";
import { itemsOfFourForms } from "../../core/wire/shared.js";
import type { EmbeddingInput } from "../../engines/contract.js";
import type { Tokenizer } from "../../prompt/tokenizer.js";
import { contextExceeded, countTextTokens } from "../../pipeline/budget.js";
import { runEmbedding } from "../../pipeline/embedding.js";
import { admit } from "../../pipeline/metering.js";
import { chosenEngine, placementOf, type Placement } from "../../pipeline/placement.js";
import { forwardEmbeddings } from "../../pipeline/upstream/embeddings.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { jsonResponse } from "../../http/json-response.js";
import { admitted, placed, type Outcome } from "../../http/outcome.js";
import { abortWith } from "../../http/respond.js";
import { serveRequest } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";
import { embeddingItems } from "./vectors.js";

export const embeddingsPath = /^\/embeddings\/?$/;

/** OpenAI's bound on the tokens of one request, all inputs together. */
const maxEmbeddingTokens = 300_000;

/** A parsed embedding request: its inputs as the engines take them, counted, and how the vectors are written. */
interface EmbeddingCall {
  json: Record<string, unknown>;
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
  format: "float" | "base64";
  /** The size asked for (`dimensions`), where it cuts the model's vectors. */
  size: number | undefined;
}

const utf8 = new TextEncoder();

/** OpenAI's words for an input it cannot embed (an empty one). */
function invalidInput(): BadRequestError {
  return new BadRequestError(
    "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
    { param: "input", code: "invalid_value" },
  );
}

/** The inputs, one per item of OpenAI's four forms; an empty one is refused. */
function inputsSent(items: (string | number[])[]): EmbeddingInput[] {
  return items.map((item) => {
    if (item.length === 0) throw invalidInput();
    return typeof item === "string" ? { kind: "text", text: item } : { kind: "tokens", tokens: item };
  });
}

/** One input's tokens as the model embeds it: text as text after the family's BOS, token ids as they are. */
function countInput(input: EmbeddingInput, tokenizer: Tokenizer, model: ModelEntry, param: string): number {
  if (input.kind === "text")
    return rawPromptPrefixTokens[model.family] + countTextTokens(tokenizer, input.text, model, param);
  if (input.tokens.length > model.contextWindow)
    throw contextExceeded(model.contextWindow, param, String(input.tokens.length));
  const outside = input.tokens.find((id) => id < 0 || id >= tokenizer.size);
  if (outside !== undefined)
    throw new BadRequestError(
      `Invalid token in '${param}': ${outside}. Token ids of this model's tokenizer run from 0 to ${tokenizer.size - 1}.`,
      { param, code: "invalid_value" },
    );
  return input.tokens.length;
}

/** Every input counted, stopping at the first one past the window or once the request is past its bound. */
function countInputs(inputs: EmbeddingInput[], tokenizer: Tokenizer, model: ModelEntry, single: boolean): number {
  let total = 0;
  inputs.forEach((input, index) => {
    const tokens = countInput(input, tokenizer, model, single ? "input" : `input[${index}]`);
    if (tokens > model.contextWindow) throw contextExceeded(model.contextWindow, "input", String(tokens));
    total += tokens;
    if (total > maxEmbeddingTokens)
      throw new BadRequestError(
        `Requested ${inputs.length > index + 1 ? "more than " : ""}${total} tokens, max ${maxEmbeddingTokens} tokens per request`,
        { param: "input", code: "max_tokens_per_request" },
      );
  });
  return total;
}

/** The size `dimensions` asks for: refused, in OpenAI's words, for a model not trained to be cut, or to that size. */
function sizeAsked(model: ModelEntry, dimensions: number | null | undefined): number | undefined {
  if (dimensions == null) return undefined;
  const sizes = model.matryoshkaDimensions;
  if (!sizes) throw new BadRequestError("This model does not support specifying dimensions.", { param: "dimensions" });
  if (dimensions !== model.dimensions && !sizes.includes(dimensions))
    throw new BadRequestError(
      `This model does not support ${dimensions} dimensions: it can be cut to ${sizes.join(", ")} dimensions, or be given whole (${model.dimensions}).`,
      { param: "dimensions", code: "invalid_value" },
    );
  return dimensions;
}

async function parseEmbeddings(dependencies: EndpointDependencies, body: Promise<Uint8Array>): Promise<EmbeddingCall> {
  const json = await readJson(body);
  const request = parseWith(embeddingRequestSchema, json);
  const model = findModel(dependencies, request.model, "model", { kind: "embedding", endpoint: "v1/embeddings" });
  const size = sizeAsked(model, request.dimensions);
  const { items, single } = itemsOfFourForms(request.input);
  const inputs = inputsSent(items);
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  const promptTokens = countInputs(inputs, tokenizer, model, single);
  const mostTokens = inputs.reduce(
    (sum, input) => sum + (input.kind === "text" ? utf8.encode(input.text).length + 2 : input.tokens.length),
    0,
  );
  const format = request.encoding_format ?? "float";
  return { json: json as Record<string, unknown>, model, inputs, promptTokens, mostTokens, format, size };
}

function reply(call: EmbeddingCall, vectors: readonly Float32Array[], promptTokens: number): EmbeddingList {
  return {
    object: "list",
    data: embeddingItems(vectors, call.size, call.format),
    model: call.model.id,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

export function embeddingsRoute(dependencies: EndpointDependencies): InferenceRoute {
  return {
    method: "POST",
    path: embeddingsPath,
    handler: async (context) => {
      const call = await parseEmbeddings(dependencies, context.body);
      const placement = await placementOf(dependencies.engine, call.model);
      return placed(placement, () => embed(dependencies, context, placement, call));
    },
  };
}

async function embed(
  dependencies: EndpointDependencies,
  context: RequestContext,
  placement: Placement,
  call: EmbeddingCall,
): Promise<Outcome> {
  const controller = abortWith(context.request);
  const request = serveRequest(context, controller.signal);
  // The deterministic engine counts with the family's tokenizer, as here; another local engine
  // with its own, so it is admitted for the most the inputs can be. An upstream is billed as a
  // forwarded chat is: its count, at most what was counted here.
  const counted = placement.decision.target === "remote" || placement.engine?.name === "deterministic";
  const promptTokens = counted ? call.promptTokens : Math.max(call.promptTokens, call.mostTokens);
  const meter = await admit(dependencies, request, call.model, { promptTokens, maxCompletionTokens: 0 });
  return admitted(meter, placement, async () => {
    if (placement.decision.target === "remote") {
      const { json, model } = call;
      // Floats whole from every upstream: the size is cut and the encoding written here, alike for all.
      const { dimensions: _dimensions, ...asked } = json;
      const body = { ...asked, encoding_format: "float" };
      const plan = { model, decision: placement.decision, endpoint: "embeddings" as const, body, stream: false };
      const counts = { promptTokens: call.promptTokens, inputs: call.inputs.length };
      const forwarded = await forwardEmbeddings(dependencies, request, { ...plan, ...counts }, meter);
      return {
        response: jsonResponse(reply(call, forwarded.vectors, forwarded.promptTokens)),
        upstream: forwarded.upstream,
      };
    }
    const engine = chosenEngine(placement);
    const embedded = await runEmbedding(
      dependencies,
      meter,
      { model: call.model, inputs: call.inputs, ...(engine ? { engine } : {}) },
      controller.signal,
    ).catch((error: unknown) => {
      // An input past what the engine embeds at once, counted in its own vocabulary: the client's input to shorten.
      if (error instanceof EngineError && error.kind === "context_length")
        throw new BadRequestError(error.message, { code: "context_length_exceeded", param: "input" });
      throw error;
    });
    return { response: jsonResponse(reply(call, embedded.vectors, embedded.promptTokens)) };
  });
}

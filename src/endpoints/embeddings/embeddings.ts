/**
 * `POST /v1/embeddings`: parse, count, place, then embed on this device or forward to the
 * model's upstreams; either way admitted and settled by the one meter, and answered in OpenAI's
 * list of vectors, as floats or base64.
 */
import { BadRequestError } from "../../core/errors/api.js";
import type { ModelEntry } from "../../catalogue/entry.js";
import { rawPromptPrefixTokens } from "../../catalogue/families.js";
import { embeddingRequestSchema, type EmbeddingList } from "../../core/wire/embeddings.js";
import { itemsOfFourForms } from "../../core/wire/shared.js";
import type { EmbeddingInput } from "../../engines/contract.js";
import type { Tokenizer } from "../../prompt/tokenizer.js";
import { contextExceeded, countTextTokens } from "../../pipeline/budget.js";
import {
  admitEmbedding,
  embedAdmitted,
  familyCounts,
  mostTokensOf,
  type EmbeddingCall,
} from "../../pipeline/embedding.js";
import { placementOf, type Placement } from "../../pipeline/placement.js";
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

/** A parsed embedding request: its inputs as the engines take them, and how the vectors are written. */
interface ParsedEmbeddings extends Omit<EmbeddingCall, "promptTokens"> {
  format: "float" | "base64";
  /** The size asked for (`dimensions`), where it cuts the model's vectors. */
  size: number | undefined;
  /** `input` was one item, not a list: refusals name `input`, not `input[i]`. */
  single: boolean;
}

/** A parsed request, its inputs counted where it is placed (`countedEmbeddings`). */
type CountedEmbeddings = ParsedEmbeddings & EmbeddingCall;

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

async function parseEmbeddings(
  dependencies: EndpointDependencies,
  body: Promise<Uint8Array>,
): Promise<ParsedEmbeddings> {
  const json = await readJson(body);
  const request = parseWith(embeddingRequestSchema, json);
  const model = findModel(dependencies, request.model, "model", { kind: "embedding", endpoint: "v1/embeddings" });
  const size = sizeAsked(model, request.dimensions);
  const { items, single } = itemsOfFourForms(request.input);
  const inputs = inputsSent(items);
  const format = request.encoding_format ?? "float";
  // Floats whole from every upstream: the size is cut and the encoding written here, alike for all.
  const { dimensions: _dimensions, ...asked } = json as Record<string, unknown>;
  const forwarded = { ...asked, encoding_format: "float" };
  return {
    model,
    inputs,
    mostTokens: mostTokensOf(inputs, model.contextWindow),
    body: forwarded,
    format,
    size,
    single,
  };
}

/**
 * The request counted where it is placed. The family's tokenizer counts every input where its
 * count is billed (`familyCounts`), where token ids are checked against its vocabulary, and
 * where the inputs' most tokens could pass the request's bound. Else no text is tokenized here:
 * an engine with a vocabulary of its own counts the inputs, and refuses one past its window, in
 * that vocabulary (a count in the family's would be an estimate), and the text is admitted for
 * the most it can be billed, each input at most the window. So a batch does not pay for a count
 * that is never billed, and an input too long is the engine's 400, not a 429 or 403 for tokens
 * it would never embed.
 */
async function countedEmbeddings(
  dependencies: EndpointDependencies,
  parsed: ParsedEmbeddings,
  placement: Placement,
): Promise<CountedEmbeddings> {
  const { model, inputs, mostTokens } = parsed;
  const texts = inputs.every((input) => input.kind === "text");
  if (texts && mostTokens <= maxEmbeddingTokens && !familyCounts(placement))
    return { ...parsed, promptTokens: mostTokens };
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  return { ...parsed, promptTokens: countInputs(inputs, tokenizer, model, parsed.single) };
}

function reply(call: CountedEmbeddings, vectors: readonly Float32Array[], promptTokens: number): EmbeddingList {
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
      const parsed = await parseEmbeddings(dependencies, context.body);
      const placement = await placementOf(dependencies.engine, parsed.model);
      const call = await countedEmbeddings(dependencies, parsed, placement);
      return placed(placement, () => embed(dependencies, context, placement, call));
    },
  };
}

async function embed(
  dependencies: EndpointDependencies,
  context: RequestContext,
  placement: Placement,
  call: CountedEmbeddings,
): Promise<Outcome> {
  const controller = abortWith(context.request);
  const request = serveRequest(context, controller.signal);
  const { meter, early } = await admitEmbedding(dependencies, request, placement, call);
  return admitted(meter, placement, async () => {
    const embedded = await embedAdmitted(dependencies, request, placement, call, meter, { early });
    return {
      response: jsonResponse(reply(call, embedded.vectors, embedded.promptTokens)),
      ...(embedded.upstream ? { upstream: embedded.upstream } : {}),
    };
  });
}

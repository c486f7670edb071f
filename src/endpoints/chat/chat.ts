/**
 * `POST /v1/chat/completions`: parse, place, plan, respond. The request is checked and its
 * prompt rendered and counted here (templates and JSON grammars are the HTTP layer's, as in
 * llama.cpp's server), then served on this device or forwarded to the model's upstreams.
 */
import { BadRequestError } from "../../core/errors/api.js";
import type { PromptSegment } from "../../engines/contract.js";
import type { ModelEntry } from "../../catalogue/entry.js";
import { encodePrompt, type Tokenizer } from "../../prompt/tokenizer.js";
import {
  joinedPieces,
  piecesText,
  renderChatPieces,
  renderChatSegments,
  toolSyntax,
  type ChatSegment,
} from "../../prompt/templates.js";
import { completionBudget, promptTokenIds } from "../../pipeline/budget.js";
import type { Generation, GenerationPlan } from "../../pipeline/generation.js";
import { placementOf, type Placement } from "../../pipeline/placement.js";
import { chatCompletionRequestSchema, type ChatCompletionRequest } from "../../core/wire/chat-request.js";
import { narrowedToAllowedTools } from "./allowed-tools.js";
import { defusedJson } from "../../prompt/defused.js";
import { checkToolReplies, refuseCapabilities, toEngineMessages, upstreamMessages } from "./messages.js";
import { chatChunks, chatCompletion } from "./reply.js";
import { checkedGeneration } from "./checked-reply.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { samplingOf } from "./convert.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";
import { fromLegacyFunctions, inLegacyTerms, legacyReshape } from "./legacy-functions.js";
import { chatLogprobsOption, logitBiasOption } from "./logprobs.js";
import { placed, type Outcome } from "../../http/outcome.js";
import { checkStreamOptions, forwardRemotely, generateLocally, type Reshape } from "../../http/serving.js";
import { keptMessage, storingReshape } from "../stored/completions.js";
import { jsonBytes } from "../../accounts/json-bytes.js";
import { planStructured } from "./structured.js";
import { checkStrictSchemas } from "../../structured/strict-refusals.js";
import { parseWith, readJson } from "../../http/validate.js";

export const chatPath = /^\/chat\/completions\/?$/;

/** A parsed chat request, with its JSON as sent (forwarded as is) and how its answer is written. */
interface ChatCall {
  request: ChatCompletionRequest;
  json: Record<string, unknown>;
  reshape: Reshape | undefined;
  model: ModelEntry;
  /** The strict schemas' maps, taken beyond OpenAI's strict mode (structured/strict-refusals.ts). */
  strictMaps: string[];
}

/**
 * How a chat request that came in other terms is served: `legacy`, the deprecated `functions`
 * (whose history has no pairing rule for tool turns); `reshape`, its answer in those terms.
 */
export interface ChatTerms {
  legacy: boolean;
  reshape?: Reshape;
}

export function chatRoute(dependencies: EndpointDependencies): InferenceRoute {
  return {
    method: "POST",
    path: chatPath,
    handler: async (context) => {
      const { json, legacy } = fromLegacyFunctions(await readJson(context.body));
      if (!legacy) return serveChat(dependencies, context, json, { legacy });
      // A refusal of the rewritten request names what the client sent: `functions[0].name`.
      const legacyTerms = (error: unknown) => (error instanceof BadRequestError ? inLegacyTerms(error) : error);
      try {
        const outcome = await serveChat(dependencies, context, json, { legacy, reshape: legacyReshape });
        return "error" in outcome ? { ...outcome, error: legacyTerms(outcome.error) } : outcome;
      } catch (error) {
        throw legacyTerms(error);
      }
    },
  };
}

/** A chat request's JSON parsed and checked (its fields, then its model's), `allowed_tools` narrowed. */
function checkedChat(dependencies: EndpointDependencies, json: unknown, legacy: boolean): Omit<ChatCall, "reshape"> {
  const parsed = parseWith(chatCompletionRequestSchema, json);
  // Every strict schema given is held to the rules, before `allowed_tools` narrows the tools.
  const strictMaps = checkStrictSchemas(parsed);
  const { request, json: sent } = narrowedToAllowedTools(parsed, json as Record<string, unknown>);
  checkStreamOptions(request);
  const model = findModel(dependencies, request.model, "model", { kind: "chat", endpoint: "v1/chat/completions" });
  refuseCapabilities(request, model.id);
  if (!legacy) checkToolReplies(request.messages);
  return { request, json: sent, model, strictMaps };
}

/**
 * The prompt tokens a chat request's JSON would be billed, counted as serving it counts them (on
 * this device, or for its upstream); nothing is admitted or generated.
 */
export async function countChatPrompt(dependencies: EndpointDependencies, json: unknown): Promise<number> {
  return promptCount(dependencies, checkedChat(dependencies, json, false));
}

async function promptCount(
  dependencies: EndpointDependencies,
  { request, model }: Pick<ChatCall, "request" | "model">,
) {
  const placement = await placementOf(dependencies.engine, model);
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  return placement.decision.target === "remote"
    ? upstreamPromptTokens(tokenizer, model, defusedRequest(request, tokenizer))
    : renderedPrompt(tokenizer, model, request).tokens.length;
}

/**
 * Whether a chat request's prompt, with its completion limit (or one token, without one), fits
 * its model's context window, as serving it would find; its other faults are thrown as serving
 * would throw them.
 */
export async function chatFits(dependencies: EndpointDependencies, json: unknown): Promise<boolean> {
  try {
    const checked = checkedChat(dependencies, json, false);
    const { request, model } = checked;
    completionBudget(
      model,
      await promptCount(dependencies, checked),
      request.max_completion_tokens ?? request.max_tokens,
      "messages",
    );
    return true;
  } catch (error) {
    if (error instanceof BadRequestError && error.code === "context_length_exceeded") return false;
    throw error;
  }
}

/** Serves a chat request's JSON: checked, placed, generated here or forwarded, written in `terms`. */
export async function serveChat(
  dependencies: EndpointDependencies,
  context: RequestContext,
  json: unknown,
  { legacy, reshape }: ChatTerms,
): Promise<Outcome> {
  const checked: ChatCall = { ...checkedChat(dependencies, json, legacy), reshape };
  // Kept when asked, in chat's own shape only: a `functions` or Responses request is not.
  const call =
    checked.request.store === true && !legacy && !reshape ? await stored(dependencies, context, checked) : checked;
  const placement = await placementOf(dependencies.engine, call.model);
  const outcome = await placed(placement, () =>
    placement.decision.target === "remote"
      ? forwardChat(dependencies, context, placement, call)
      : generateChat(dependencies, context, placement, call),
  );
  return call.strictMaps.length ? { ...outcome, strictMaps: call.strictMaps } : outcome;
}

/**
 * A `store: true` request, its answer kept for the key's account with its messages and metadata.
 * A stream asks for its usage, which is kept, and shown to the client only if it asked too.
 */
async function stored(dependencies: EndpointDependencies, context: RequestContext, call: ChatCall): Promise<ChatCall> {
  const { request, json } = call;
  const messages = request.messages.map(keptMessage);
  await dependencies.storage.ensureRoom(context.key.accountId, { bytes: jsonBytes(messages), items: 1 });
  const usageAsked = request.stream_options?.include_usage === true;
  const withUsage =
    request.stream === true && !usageAsked
      ? { stream_options: { ...request.stream_options, include_usage: true } }
      : {};
  const save = (completion: unknown) =>
    dependencies.completions.save({
      id: (completion as { id: string }).id,
      accountId: context.key.accountId,
      model: request.model,
      metadata: request.metadata ?? {},
      completion,
      messages,
    });
  return {
    ...call,
    request: { ...request, ...withUsage },
    json: { ...json, ...withUsage },
    reshape: storingReshape(save, {
      id: dependencies.newId("chatcmpl-"),
      usageAsked: request.stream !== true || usageAsked,
    }),
  };
}

/**
 * The client's body with every completion limit it sent (`max_tokens`, `max_completion_tokens`)
 * set to what was reserved, or `max_tokens` where it sent none: an upstream honours whichever it
 * reads, so no reply can cost more than was admitted.
 */
function boundedBody(body: Record<string, unknown>, maxTokens: number): Record<string, unknown> {
  const limits = ["max_tokens", "max_completion_tokens"].filter((name) => body[name] != null);
  return { ...body, ...Object.fromEntries((limits.length ? limits : ["max_tokens"]).map((name) => [name, maxTokens])) };
}

/**
 * JSON mode as every upstream holds a reply to it: `json_object` is sent as the JSON Schema it
 * means, any object. llama-server reads a bare `json_object` as no constraint at all and answers
 * with plain text; it, vLLM and Ollama all constrain a reply to a `json_schema`.
 */
function upstreamFormat(request: ChatCompletionRequest): Record<string, unknown> {
  if (request.response_format?.type !== "json_object") return {};
  return { response_format: { type: "json_schema", json_schema: { name: "json_object", schema: { type: "object" } } } };
}

/**
 * An upstream's prompt as counted here, for the context window and the reservation: the upstream
 * applies its own template and tool syntax, so the family's template and the tools' JSON stand in.
 */
function upstreamPromptTokens(tokenizer: Tokenizer, model: ModelEntry, request: ChatCompletionRequest): number {
  const pieces = [
    ...renderChatPieces(model.family, toEngineMessages(request.messages), []),
    { text: request.tools ? JSON.stringify(request.tools) : "", control: false },
  ];
  return promptTokenIds(tokenizer, pieces, model, "messages").length;
}

/**
 * The request as an upstream is sent it, and as it is counted: a control-token string in its
 * messages or tool definitions made text (a function's name cannot hold one: it is a plain pattern).
 */
function defusedRequest(request: ChatCompletionRequest, tokenizer: Tokenizer): ChatCompletionRequest {
  const defuse = (text: string) => tokenizer.defuse(text);
  return {
    ...request,
    messages: defusedJson(request.messages, defuse),
    ...(request.tools ? { tools: defusedJson(request.tools, defuse, true) } : {}),
  };
}

/**
 * The upstream applies its own template and tool syntax; here the messages are checked and the
 * prompt counted, for the context window and the reservation.
 */
async function forwardChat(
  dependencies: EndpointDependencies,
  context: RequestContext,
  placement: Placement,
  call: ChatCall,
): Promise<Outcome> {
  const { model, reshape } = call;
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  const request = defusedRequest(call.request, tokenizer);
  const promptTokens = upstreamPromptTokens(tokenizer, model, request);
  const maxTokens = completionBudget(
    model,
    promptTokens,
    request.max_completion_tokens ?? request.max_tokens,
    "messages",
  );
  // The upstream is sent tools (`functions` were rewritten as such); its answer is written back in the old shape.
  return forwardRemotely(
    dependencies,
    context,
    placement,
    {
      model,
      endpoint: "chat/completions",
      body: {
        ...boundedBody(call.json, maxTokens),
        messages: upstreamMessages(request.messages),
        // The JSON's tools are the request's item for item (their schema keeps each as sent), defused once.
        ...(request.tools ? { tools: request.tools } : {}),
        ...upstreamFormat(request),
      },
      stream: request.stream === true,
      includeUsage: request.stream_options?.include_usage === true,
      promptTokens,
      maxCompletionTokens: maxTokens * (request.n ?? 1),
      countTokens: (text) => tokenizer.encode(text).length,
    },
    reshape,
  );
}

/** Each segment's ids; a prompt left whole (a first turn) has the ids already counted, so it is not tokenized twice. */
function segmentsWithTokens(segments: readonly ChatSegment[], whole: number[], tokenizer: Tokenizer): PromptSegment[] {
  if (segments.length === 1) return [{ text: segments[0]!.text, reply: segments[0]!.reply, tokens: whole }];
  return segments.map((segment) => ({
    text: segment.text,
    reply: segment.reply,
    tokens: encodePrompt(tokenizer, segment.pieces),
  }));
}

/** The prompt this device's engines are given: the structured-output rewrite, rendered in the family's template, and its ids. */
function renderedPrompt(tokenizer: Tokenizer, model: ModelEntry, request: ChatCompletionRequest) {
  const structured = planStructured(request, model.family, toEngineMessages(request.messages));
  // One rendering gives both the whole prompt's pieces and its segments (cut at earlier replies).
  const segments = renderChatSegments(model.family, structured.messages, structured.tools ?? []);
  const pieces = joinedPieces(segments);
  return { structured, segments, pieces, tokens: promptTokenIds(tokenizer, pieces, model, "messages") };
}

/** The local generation's plan: the structured-output rewrite, the prompt rendered and counted, and the sampling. */
async function planChat(dependencies: EndpointDependencies, { request, model }: ChatCall) {
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  const { structured, segments, pieces, tokens } = renderedPrompt(tokenizer, model, request);
  const maxTokens = completionBudget(
    model,
    tokens.length,
    request.max_completion_tokens ?? request.max_tokens,
    "messages",
  );
  const logprobs = chatLogprobsOption(request);
  const logitBias = logitBiasOption(request.logit_bias, tokenizer);
  // Tool requests are one raw prompt under a grammar; plain chat is the same rendering, in
  // segments, so an engine can reuse the conversation's cached prefix.
  const input = structured.ownPrompt
    ? { kind: "text" as const, prompt: piecesText(pieces), tokens, pieces }
    : {
        kind: "chat" as const,
        messages: structured.messages,
        segments: segmentsWithTokens(segments, tokens, tokenizer),
        tokens,
        pieces,
      };
  const plan: GenerationPlan = {
    model,
    prompts: [{ input, promptTokens: tokens.length }],
    choicesPerPrompt: request.n ?? 1,
    sampling: {
      ...samplingOf(request, maxTokens),
      // A reply that must be a call (tool_choice `required` or a named function) is the call's
      // JSON: a stop sequence could only cut it into text that is no call.
      ...(structured.constraint?.kind === "tools" && structured.constraint.choice !== "auto" ? { stop: [] } : {}),
      ...(logprobs !== undefined ? { logprobs } : {}),
      ...(logitBias ? { logitBias } : {}),
    },
    ...(structured.constraint ? { constraint: structured.constraint } : {}),
  };
  return {
    plan,
    syntax: structured.tools ? (structured.syntax ?? toolSyntax[model.family]) : null,
    logprobsAsked: logprobs !== undefined,
    rules: structured.rules,
  };
}

async function generateChat(
  dependencies: EndpointDependencies,
  context: RequestContext,
  placement: Placement,
  call: ChatCall,
): Promise<Outcome> {
  const { request, reshape, model } = call;
  const { plan, syntax, logprobsAsked, rules } = await planChat(dependencies, call);
  const checked = (running: Generation) => (rules ? checkedGeneration(running, rules, syntax) : running);
  const base = {
    id: dependencies.newId("chatcmpl-"),
    created: Math.floor(dependencies.clock() / 1000),
    model: model.id,
    system_fingerprint: null,
    // The tier that served it, as OpenAI says when asked: there is one.
    ...(request.service_tier ? { service_tier: "default" } : {}),
  };
  const includeUsage = request.stream_options?.include_usage === true;
  return generateLocally(dependencies, context, placement, plan, {
    stream: request.stream === true,
    named: reshape?.named === true,
    toEvents: (running) => {
      const stream = chatChunks(
        checked(running),
        { ...base, object: "chat.completion.chunk" },
        includeUsage,
        syntax,
        dependencies.newId,
      );
      return reshape ? reshape.chunks(stream) : stream;
    },
    toBody: async (running) => {
      const completion = await chatCompletion(
        checked(running),
        base,
        request.n ?? 1,
        syntax,
        dependencies.newId,
        logprobsAsked,
      );
      return reshape ? await reshape.whole(completion) : completion;
    },
  });
}

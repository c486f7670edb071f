/**
 * `POST /v1/completions`, the legacy endpoint: parse, place, plan, respond. Several prompts, `n`
 * and `best_of` candidates per prompt (the best ranked by mean log probability), and `echo`.
 */
import { BadRequestError } from "../../core/errors/api.js";
import type { TokenLogprob } from "../../engines/contract.js";
import type { ModelEntry } from "../../catalogue/entry.js";
import { rawPromptPrefixTokens } from "../../catalogue/families.js";
import type { PromptPiece, Tokenizer } from "../../prompt/tokenizer.js";
import { completionBudget, countPromptIds, countPromptTokens } from "../../pipeline/budget.js";
import type { Generation } from "../../pipeline/generation.js";
import { placementOf, type Placement } from "../../pipeline/placement.js";
import { completionRequestSchema, type CompletionRequest } from "../../core/wire/completion-request.js";
import { type TextCompletion } from "../../core/wire/text-completion.js";
import { itemsOfFourForms, legacyLogprobsOf } from "../../core/wire/shared.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { collect, samplingOf, toWireFinishReason, wireUsage } from "../chat/convert.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";
import { legacyLogprobsOption, logitBiasOption } from "../chat/logprobs.js";
import { placed, type Outcome } from "../../http/outcome.js";
import { checkStreamOptions, forwardRemotely, generateLocally } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";

export const completionsPath = /^\/completions\/?$/;

/** The legacy endpoint's default, as on the hosted API. */
const defaultMaxTokens = 16;

type Base = Omit<TextCompletion, "choices" | "usage">;

async function* chunks(
  generation: Generation,
  base: Base,
  includeUsage: boolean,
  echo: (choice: number) => string,
  logprobsAsked: boolean,
): AsyncGenerator<TextCompletion> {
  const usageField = includeUsage ? { usage: null } : {};
  const started = new Set<number>();
  /** Each choice's text so far, for the tokens' `text_offset`. */
  const lengths = new Map<number, number>();
  for await (const { choice, part } of generation.parts) {
    const prefix = started.has(choice) ? "" : echo(choice);
    started.add(choice);
    if (part.type === "text-delta") {
      const offset = lengths.get(choice) ?? 0;
      lengths.set(choice, offset + prefix.length + part.text.length);
      const logprobs = logprobsAsked ? legacyLogprobsOf(part.logprobs ?? [], offset + prefix.length) : null;
      yield {
        ...base,
        choices: [{ index: choice, text: prefix + part.text, logprobs, finish_reason: null }],
        ...usageField,
      };
    } else {
      yield {
        ...base,
        choices: [{ index: choice, text: prefix, logprobs: null, finish_reason: toWireFinishReason(part.reason) }],
        ...usageField,
      };
    }
  }
  if (includeUsage) {
    const usage = generation.usage();
    yield { ...base, choices: [], usage: wireUsage(usage) };
  }
}

interface ChoiceCounts {
  prompts: number;
  /** Choices returned per prompt (`n`). */
  perPrompt: number;
  /** Candidates generated per prompt (`best_of`), the best `perPrompt` of which are returned. */
  bestOf: number;
}

/** Mean log probability per token: "the best" as the hosted API ranks `best_of` candidates. */
function meanLogprob(tokens: readonly TokenLogprob[]): number {
  return tokens.length === 0
    ? Number.NEGATIVE_INFINITY
    : tokens.reduce((sum, token) => sum + token.logprob, 0) / tokens.length;
}

async function complete(
  generation: Generation,
  base: Base,
  counts: ChoiceCounts,
  echo: (choice: number) => string,
  logprobsAsked: boolean,
): Promise<TextCompletion> {
  const { texts, reasons, logprobs, usage } = await collect(generation, counts.prompts * counts.bestOf, (candidate) =>
    echo(Math.floor(candidate / counts.bestOf) * counts.perPrompt),
  );
  const chosen = Array.from({ length: counts.prompts }, (_, prompt) => {
    const candidates = Array.from({ length: counts.bestOf }, (_, copy) => prompt * counts.bestOf + copy);
    // A stable sort keeps generation order among equals, so best_of == n returns every candidate in order.
    return counts.bestOf === counts.perPrompt
      ? candidates
      : candidates
          .sort((a, b) => meanLogprob(logprobs[b] ?? []) - meanLogprob(logprobs[a] ?? []))
          .slice(0, counts.perPrompt);
  }).flat();
  return {
    ...base,
    choices: chosen.map((candidate, index) => ({
      index,
      text: texts[candidate] ?? "",
      logprobs: logprobsAsked ? legacyLogprobsOf(logprobs[candidate] ?? [], echo(index).length) : null,
      finish_reason: reasons[candidate] ?? "stop",
    })),
    usage,
  };
}

/** A prompt as the engines take it: its text, and a token-id prompt's ids and pieces (see `GenerationInput`). */
interface CountedPrompt {
  input: { kind: "text"; prompt: string; tokens?: number[]; pieces?: PromptPiece[] };
  promptTokens: number;
}

/**
 * A parsed legacy completion: its JSON as sent (forwarded as is), its prompts as sent (text or
 * token ids) and as text (echoed), counted, and the completion budget.
 */
interface CompletionCall {
  request: CompletionRequest;
  json: Record<string, unknown>;
  model: ModelEntry;
  tokenizer: Tokenizer;
  sent: (string | number[])[];
  prompts: string[];
  counted: CountedPrompt[];
  counts: ChoiceCounts;
  maxTokens: number;
}

/**
 * A prompt counted. Text is the client's own raw prompt (special-token strings in it are its to
 * write). Token ids are fed as they are, each checked against the vocabulary, and decoded for
 * `echo` and for the engines that take text.
 */
function countPrompt(sent: string | number[], tokenizer: Tokenizer, model: ModelEntry): CountedPrompt {
  if (typeof sent === "string")
    return {
      input: { kind: "text", prompt: sent },
      promptTokens: rawPromptPrefixTokens[model.family] + countPromptTokens(tokenizer, sent, model, "prompt"),
    };
  const promptTokens = countPromptIds(sent, model, "prompt");
  const outside = sent.find((id) => id < 0 || id >= tokenizer.size);
  if (outside !== undefined)
    throw new BadRequestError(
      `Invalid token in 'prompt': ${outside}. Token ids of this model's tokenizer run from 0 to ${tokenizer.size - 1}.`,
      { param: "prompt", code: "invalid_value" },
    );
  const input = {
    kind: "text" as const,
    prompt: tokenizer.decode(sent),
    tokens: sent,
    pieces: tokenizer.piecesOf(sent),
  };
  return { input, promptTokens };
}

/** OpenAI's checks of `suffix`, `n` and `best_of`; returns the candidates per prompt. */
function checkCandidates(request: CompletionRequest): number {
  if (request.suffix != null)
    throw new BadRequestError("Unsupported parameter: 'suffix' is not supported with this model.", {
      param: "suffix",
      code: "unsupported_parameter",
    });
  const bestOf = request.best_of ?? request.n ?? 1;
  if (bestOf < (request.n ?? 1))
    throw new BadRequestError("best_of must be greater than or equal to n.", {
      param: "best_of",
      code: "invalid_value",
    });
  if (bestOf > (request.n ?? 1) && request.stream) {
    throw new BadRequestError(
      "best_of greater than n cannot be streamed: the best candidates are known only once all have finished.",
      { param: "best_of", code: "invalid_value" },
    );
  }
  return bestOf;
}

async function parseCompletion(dependencies: EndpointDependencies, body: Promise<Uint8Array>): Promise<CompletionCall> {
  const json = await readJson(body);
  const request = parseWith(completionRequestSchema, json);
  checkStreamOptions(request);
  const bestOf = checkCandidates(request);
  const model = findModel(dependencies, request.model, "model", { kind: "chat", endpoint: "v1/completions" });
  const sent = itemsOfFourForms(request.prompt).items;
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  const counted = sent.map((prompt) => countPrompt(prompt, tokenizer, model));
  const prompts = counted.map((prompt) => prompt.input.prompt);
  const longest = counted.reduce((most, prompt) => Math.max(most, prompt.promptTokens), 0);
  const maxTokens = completionBudget(model, longest, request.max_tokens ?? defaultMaxTokens, "prompt");
  const counts = { prompts: prompts.length, perPrompt: request.n ?? 1, bestOf };
  const call = { request, json: json as Record<string, unknown>, model, tokenizer, sent, prompts, counted };
  return { ...call, counts, maxTokens };
}

export function completionsRoute(dependencies: EndpointDependencies): InferenceRoute {
  return {
    method: "POST",
    path: completionsPath,
    handler: async (context) => {
      const call = await parseCompletion(dependencies, context.body);
      const placement = await placementOf(dependencies.engine, call.model);
      return placed(placement, () =>
        placement.decision.target === "remote"
          ? forwardCompletion(dependencies, context, placement, call)
          : generateCompletion(dependencies, context, placement, call),
      );
    },
  };
}

function forwardCompletion(
  dependencies: EndpointDependencies,
  context: RequestContext,
  placement: Placement,
  call: CompletionCall,
): Promise<Outcome> {
  const { request, prompts, maxTokens } = call;
  // Prompt tokens are not scored upstream either: `echo` is done here, from the text.
  legacyLogprobsOption(request);
  return forwardRemotely(dependencies, context, placement, {
    model: call.model,
    endpoint: "completions",
    // The hosted default made explicit, so the upstream's own default cannot exceed the reservation.
    body: { ...call.json, max_tokens: maxTokens },
    ...(prompts.length > 1 ? { prompts: call.sent } : {}),
    ...(request.echo ? { echo: prompts } : {}),
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    promptTokens: call.counted.reduce((sum, prompt) => sum + prompt.promptTokens, 0),
    // best_of candidates are generated (and billed) upstream too, so each is reserved for.
    maxCompletionTokens: maxTokens * prompts.length * call.counts.bestOf,
    countTokens: (text) => call.tokenizer.encode(text).length,
  });
}

function generateCompletion(
  dependencies: EndpointDependencies,
  context: RequestContext,
  placement: Placement,
  call: CompletionCall,
): Promise<Outcome> {
  const { request, counts, prompts } = call;
  const logprobs = legacyLogprobsOption(request);
  const logitBias = logitBiasOption(request.logit_bias, call.tokenizer);
  // Candidates beyond n are ranked by their tokens' mean log probability, so the engine reports them.
  const scored = counts.bestOf > counts.perPrompt;
  const plan = {
    model: call.model,
    prompts: call.counted,
    choicesPerPrompt: counts.bestOf,
    sampling: {
      ...samplingOf(request, call.maxTokens),
      ...(logprobs !== undefined || scored ? { logprobs: logprobs ?? 0 } : {}),
      ...(logitBias ? { logitBias } : {}),
    },
  };
  const echo = (choice: number) => (request.echo ? (prompts[Math.floor(choice / counts.perPrompt)] ?? "") : "");
  const base: Base = {
    id: dependencies.newId("cmpl-"),
    object: "text_completion",
    created: Math.floor(dependencies.clock() / 1000),
    model: call.model.id,
    system_fingerprint: null,
  };
  return generateLocally(dependencies, context, placement, plan, {
    stream: request.stream === true,
    toEvents: (running) =>
      chunks(running, base, request.stream_options?.include_usage === true, echo, logprobs !== undefined),
    toBody: (running) => complete(running, base, counts, echo, logprobs !== undefined),
  });
}

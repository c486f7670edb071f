import { BadRequestError } from "../errors/api.js";
import type { TokenLogprob } from "../engine/contract.js";
import { completionRequestSchema, type TextCompletion } from "../wire/schemas.js";
import { forward, routeRequest } from "../serve/upstream.js";
import { abortWith, respond } from "./respond.js";
import { findModel, type HttpDependencies } from "../serve/dependencies.js";
import { collect, completionBudget, countPromptTokens, samplingOf, startGeneration, toWireFinishReason, wireUsage, type Generation } from "../serve/generation.js";
import type { Route } from "./router.js";
import { legacyLogprobsOption, logitBiasOption, toLegacyLogprobs } from "./logprobs.js";
import { parseWith, readJson } from "./validate.js";

/** The legacy endpoint's default, as on the hosted API. */
const defaultMaxTokens = 16;

type Base = Omit<TextCompletion, "choices" | "usage">;

async function* chunks(generation: Generation, base: Base, includeUsage: boolean, echo: (choice: number) => string, logprobsAsked: boolean): AsyncGenerator<TextCompletion> {
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
      const logprobs = logprobsAsked ? toLegacyLogprobs(part.logprobs ?? [], offset + prefix.length) : null;
      yield { ...base, choices: [{ index: choice, text: prefix + part.text, logprobs, finish_reason: null }], ...usageField };
    } else {
      yield { ...base, choices: [{ index: choice, text: prefix, logprobs: null, finish_reason: toWireFinishReason(part.reason) }], ...usageField };
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
  return tokens.length === 0 ? Number.NEGATIVE_INFINITY : tokens.reduce((sum, token) => sum + token.logprob, 0) / tokens.length;
}

async function complete(generation: Generation, base: Base, counts: ChoiceCounts, echo: (choice: number) => string, logprobsAsked: boolean): Promise<TextCompletion> {
  const { texts, reasons, logprobs, usage } = await collect(generation, counts.prompts * counts.bestOf, (candidate) => echo(Math.floor(candidate / counts.bestOf) * counts.perPrompt));
  const chosen = Array.from({ length: counts.prompts }, (_, prompt) => {
    const candidates = Array.from({ length: counts.bestOf }, (_, copy) => prompt * counts.bestOf + copy);
    // A stable sort keeps generation order among equals, so best_of == n returns every candidate in order.
    return counts.bestOf === counts.perPrompt ? candidates : candidates.sort((a, b) => meanLogprob(logprobs[b] ?? []) - meanLogprob(logprobs[a] ?? [])).slice(0, counts.perPrompt);
  }).flat();
  return {
    ...base,
    choices: chosen.map((candidate, index) => ({
      index,
      text: texts[candidate] ?? "",
      logprobs: logprobsAsked ? toLegacyLogprobs(logprobs[candidate] ?? [], echo(index).length) : null,
      finish_reason: reasons[candidate] ?? "stop",
    })),
    usage,
  };
}

export function completionsRoute(dependencies: HttpDependencies): Route {
  return {
    method: "POST",
    generates: true,
    path: /^\/completions\/?$/,
    handler: async (context) => {
      const json = await readJson(context.body);
      const request = parseWith(completionRequestSchema, json);
      if (request.stream_options && request.stream !== true) {
        throw new BadRequestError("The 'stream_options' parameter is only allowed when 'stream' is enabled.", { param: "stream_options" });
      }
      if (request.suffix != null) throw new BadRequestError("Unsupported parameter: 'suffix' is not supported with this model.", { param: "suffix", code: "unsupported_parameter" });
      const bestOf = request.best_of ?? request.n ?? 1;
      if (bestOf < (request.n ?? 1)) throw new BadRequestError("best_of must be greater than or equal to n.", { param: "best_of", code: "invalid_value" });
      if (bestOf > (request.n ?? 1) && request.stream) {
        throw new BadRequestError("best_of greater than n cannot be streamed: the best candidates are known only once all have finished.", { param: "best_of", code: "invalid_value" });
      }
      const model = findModel(dependencies, request.model);
      const prompts = typeof request.prompt === "string" ? [request.prompt] : request.prompt;
      const tokenizer = await dependencies.tokenizers.forFamily(model.family);
      const counted = prompts.map((prompt) => ({ input: { kind: "text" as const, prompt }, promptTokens: countPromptTokens(tokenizer, prompt, model, "prompt") }));
      const longest = Math.max(...counted.map((prompt) => prompt.promptTokens));
      const maxTokens = completionBudget(model, longest, request.max_tokens ?? defaultMaxTokens, "prompt");
      const perPrompt = request.n ?? 1;
      const decision = await routeRequest(dependencies, context, model);
      if (decision.target === "remote") {
        return forward(dependencies, context, {
          model,
          decision,
          endpoint: "completions",
          // The hosted default made explicit, so the upstream's own default cannot exceed the reservation.
          body: { ...(json as Record<string, unknown>), max_tokens: maxTokens },
          ...(prompts.length > 1 ? { prompts } : {}),
          stream: request.stream === true,
          includeUsage: request.stream_options?.include_usage === true,
          promptTokens: counted.reduce((sum, prompt) => sum + prompt.promptTokens, 0),
          // best_of candidates are generated (and billed) upstream too, so each is reserved for.
          maxCompletionTokens: maxTokens * prompts.length * bestOf,
          countTokens: (text) => tokenizer.encode(text).length,
        });
      }

      const logprobs = legacyLogprobsOption(request);
      const logitBias = logitBiasOption(request.logit_bias, tokenizer);
      // Candidates beyond n are ranked by their tokens' mean log probability, so the engine reports them.
      const scored = bestOf > perPrompt;
      const controller = abortWith(context.request);
      const generation = await startGeneration(
        dependencies,
        context,
        {
          model,
          prompts: counted,
          choicesPerPrompt: bestOf,
          sampling: { ...samplingOf(request, maxTokens), ...(logprobs !== undefined || scored ? { logprobs: logprobs ?? 0 } : {}), ...(logitBias ? { logitBias } : {}) },
        },
        controller.signal,
      );
      const echo = (choice: number) => (request.echo ? (prompts[Math.floor(choice / perPrompt)] ?? "") : "");
      const base: Base = {
        id: dependencies.newId("cmpl-"),
        object: "text_completion",
        created: Math.floor(dependencies.clock() / 1000),
        model: model.id,
        system_fingerprint: null,
      };
      return respond(
        context,
        controller,
        generation,
        request.stream === true,
        (running) => chunks(running, base, request.stream_options?.include_usage === true, echo, logprobs !== undefined),
        (running) => complete(running, base, { prompts: prompts.length, perPrompt, bestOf }, echo, logprobs !== undefined),
        dependencies.respond,
      );
    },
  };
}

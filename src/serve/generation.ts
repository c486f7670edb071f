/**
 * What both generation endpoints share: the context-window check, queueing for the one
 * engine, running each (prompt, choice) in turn, and the usage totals. Wire formatting is
 * left to the endpoint.
 */
import type { ModelEntry } from "../model/entry.js";
import { BadRequestError, engineErrorToApi } from "../errors/api.js";
import { EngineError } from "../errors/engine.js";
import type { FinishReason, GenerationInput, GenerationPart, GenerationRequest, OutputConstraint, SamplingOptions, TokenLogprob, TokenUsage } from "../engine/contract.js";
import type { Usage } from "../wire/schemas.js";
import { encodePrompt, type Tokenizer } from "../model/tokenizer.js";
import { piecesText } from "../prompt/templates.js";
import { type PromptPiece } from "../model/tokenizer.js";
import type { HttpDependencies } from "./dependencies.js";
import type { RouteContext } from "../http/router.js";

export interface GenerationPlan {
  model: ModelEntry;
  /** One entry per prompt; each is generated `choicesPerPrompt` times. */
  prompts: { input: GenerationInput; promptTokens: number }[];
  choicesPerPrompt: number;
  sampling: SamplingOptions;
  constraint?: OutputConstraint;
}

export interface ChoicePart {
  choice: number;
  part: GenerationPart;
}

export interface UsageTotals {
  promptTokens: number;
  completionTokens: number;
  /** Of `promptTokens`, those the engine reused from its cache rather than prefilled. */
  cachedTokens?: number;
}

/** OpenAI's usage object; `total_tokens` is always prompt + completion. */
export function wireUsage(totals: UsageTotals): Usage {
  return {
    prompt_tokens: totals.promptTokens,
    completion_tokens: totals.completionTokens,
    total_tokens: totals.promptTokens + totals.completionTokens,
    ...(totals.cachedTokens ? { prompt_tokens_details: { cached_tokens: totals.cachedTokens } } : {}),
  };
}

/**
 * Adds one generated prompt's usage to `totals`. The prompt is billed whole, the way the hosted
 * API bills a cached prefix: an engine that reused a prefix of this very prompt from its KV cache
 * reports fewer prefilled tokens than the prompt has, and the difference is reported as cached.
 * An engine that saw more than we counted (llama.cpp puts a BOS token before a raw prompt) is
 * billed for what it saw; an engine that says how many it reused (`cachedPromptTokens`) is taken
 * at its word.
 */
function addPromptUsage(totals: UsageTotals, counted: number, usage: TokenUsage): void {
  const prefilled = usage.promptTokens;
  if (prefilled !== null && usage.cachedPromptTokens !== undefined) {
    totals.promptTokens += Math.max(prefilled + usage.cachedPromptTokens, counted);
    if (usage.cachedPromptTokens > 0) totals.cachedTokens = (totals.cachedTokens ?? 0) + usage.cachedPromptTokens;
    return;
  }
  if (prefilled === null || prefilled >= counted) {
    totals.promptTokens += prefilled ?? counted;
    return;
  }
  totals.promptTokens += counted;
  totals.cachedTokens = (totals.cachedTokens ?? 0) + counted - prefilled;
}

function contextExceeded(window: number, param: string, tokens: string): BadRequestError {
  return new BadRequestError(`This model's maximum context length is ${window} tokens. However, your ${param} resulted in ${tokens} tokens. Please reduce the length of the ${param}.`, {
    code: "context_length_exceeded",
    param,
  });
}

/**
 * `max_tokens` as the engine must see it. Prompt plus completion must fit the window; when the
 * client gives no `max_tokens`, the completion may use what the prompt leaves.
 */
export function completionBudget(model: ModelEntry, promptTokens: number, requested: number | null | undefined, param: string): number {
  const window = model.contextWindow;
  if (requested != null && promptTokens + requested > window) {
    throw new BadRequestError(
      `This model's maximum context length is ${window} tokens. However, you requested ${promptTokens + requested} tokens ` +
        `(${promptTokens} in the ${param}, ${requested} in the completion). Please reduce the length of the ${param} or completion.`,
      { code: "context_length_exceeded", param },
    );
  }
  if (requested == null && promptTokens >= window) throw contextExceeded(window, param, String(promptTokens));
  return requested ?? window - promptTokens;
}

/** Pieces of a long prompt are this many characters at most. */
const pieceCharacters = 2_048;
/**
 * How many tokens a cut between two pieces can save the whole text over the pieces counted apart,
 * at most: only tokens that would span the cut can merge, and cuts fall before a space where one
 * is near, which no token of these tokenizers spans.
 */
const tokensPerCut = 64;

/**
 * Refuses a prompt too long for the window as soon as that is certain, without tokenizing the
 * rest, so a giant prompt costs milliseconds and blocks no other request: a long prompt is first
 * counted in pieces, and the pieces' counts less `tokensPerCut` per cut are a lower bound of the
 * whole's.
 */
function refuseCertainlyTooLong(text: string, encode: (text: string) => number[], tokenizer: Tokenizer, model: ModelEntry, param: string): void {
  // A sound bound, known at once: no prompt of more characters than the window times the
  // longest token is tokenized before it is refused.
  const fewest = tokenizer.fewestTokens(text);
  if (fewest > model.contextWindow) throw contextExceeded(model.contextWindow, param, `at least ${fewest}`);
  // A prompt of up to 4 characters per token of window is cheap to count whole, and most fit:
  // only longer ones are counted in pieces first, so a prompt is not tokenized twice on the way.
  if (text.length <= Math.max(pieceCharacters, model.contextWindow * 4)) return;
  let lowerBound = 0;
  // Repeated text gives repeated pieces, and a run without spaces is the slowest to encode
  // (about 25 ms a piece here): a piece seen before is counted once.
  const counted = new Map<string, number>();
  for (let start = 0, cuts = 0; start < text.length; cuts++) {
    let end = Math.min(text.length, start + pieceCharacters);
    // A cut before a space in the piece's second half, looked for there only (lastIndexOf would
    // scan back to the start of a text without spaces, each piece: quadratic).
    if (end < text.length) {
      for (let index = end; index > start + pieceCharacters / 2; index--) {
        if (text.charCodeAt(index) === 32) {
          end = index;
          break;
        }
      }
    }
    const piece = text.slice(start, end);
    let tokens = counted.get(piece);
    if (tokens === undefined) counted.set(piece, (tokens = encode(piece).length));
    lowerBound += tokens;
    if (lowerBound - cuts * tokensPerCut > model.contextWindow) throw contextExceeded(model.contextWindow, param, `at least ${lowerBound - cuts * tokensPerCut}`);
    start = end;
  }
}

/** A client's raw prompt's exact token count (legacy completions: special-token strings in it are its own to write). */
export function countPromptTokens(tokenizer: Tokenizer, text: string, model: ModelEntry, param: string): number {
  refuseCertainlyTooLong(text, (piece) => tokenizer.encode(piece), tokenizer, model, param);
  return tokenizer.encode(text).length;
}

/** A rendered chat prompt's token ids, its messages' text encoded as text (see `encodePrompt`). */
export function promptTokenIds(tokenizer: Tokenizer, pieces: readonly PromptPiece[], model: ModelEntry, param: string): number[] {
  refuseCertainlyTooLong(piecesText(pieces.filter((piece) => !piece.control)), (piece) => tokenizer.encodeText(piece), tokenizer, model, param);
  return encodePrompt(tokenizer, pieces);
}

/** The sampling fields both endpoints share, from the wire to the engine, with OpenAI's defaults. */
export function samplingOf(
  request: { temperature?: number | null; top_p?: number | null; stop?: string | string[] | null; presence_penalty?: number | null; frequency_penalty?: number | null; seed?: number | null },
  maxTokens: number,
): SamplingOptions {
  return {
    temperature: request.temperature ?? 1,
    topP: request.top_p ?? 1,
    maxTokens,
    stop: request.stop == null ? [] : typeof request.stop === "string" ? [request.stop] : request.stop,
    presencePenalty: request.presence_penalty ?? 0,
    frequencyPenalty: request.frequency_penalty ?? 0,
    ...(request.seed != null ? { seed: request.seed } : {}),
  };
}

export function toWireFinishReason(reason: FinishReason): "stop" | "length" {
  return reason === "length" ? "length" : "stop";
}

/** Drains a generation into each choice's text (after `prefix`), token log probabilities and finish reason, and the usage. */
export async function collect(generation: Generation, choiceCount: number, prefix: (choice: number) => string = () => "") {
  const texts = Array.from({ length: choiceCount }, (_, choice) => prefix(choice));
  const logprobs: TokenLogprob[][] = Array.from({ length: choiceCount }, () => []);
  const reasons: ("stop" | "length")[] = Array.from({ length: choiceCount }, () => "stop");
  for await (const { choice, part } of generation.parts) {
    if (part.type === "text-delta") {
      texts[choice] += part.text;
      if (part.logprobs) logprobs[choice]?.push(...part.logprobs);
    } else reasons[choice] = toWireFinishReason(part.reason);
  }
  return { texts, reasons, logprobs, usage: wireUsage(generation.usage()) };
}

/** A running generation: its parts, in order, and the usage once they are drained. */
export interface Generation {
  parts: AsyncGenerator<ChoicePart>;
  usage(): UsageTotals;
}

/** Prompt tokens plus the most the plan may generate: what is admitted against limits and reserved. */
function admittedTokens(plan: GenerationPlan): { promptTokens: number; maxCompletionTokens: number } {
  return {
    promptTokens: plan.prompts.reduce((sum, prompt) => sum + prompt.promptTokens, 0),
    maxCompletionTokens: plan.prompts.length * plan.choicesPerPrompt * plan.sampling.maxTokens,
  };
}

/**
 * Admits the request (limits and reservation), then runs the plan on the engine, holding the
 * engine until the last part or until the caller stops iterating, and settles when it ends:
 * `completed`, `aborted` (the client left; the tokens produced are charged) or `failed` (the
 * tokens delivered before the failure are charged). Waiting for a turn happens before any byte is sent, so a full queue is a 503 and
 * not a broken stream.
 */
export async function startGeneration(dependencies: HttpDependencies, context: RouteContext, plan: GenerationPlan, signal: AbortSignal): Promise<Generation> {
  const { engine, scheduler, policy, clock } = dependencies;
  const admission = await policy.admit({
    keyId: context.key.id,
    key: context.key,
    requestId: context.requestId,
    model: plan.model.id,
    price: plan.model.price,
    ...admittedTokens(plan),
  });
  context.rate = admission.rate;
  const totals: UsageTotals = { promptTokens: 0, completionTokens: 0 };
  let firstTokenAt: number | undefined;
  const settle = (status: "completed" | "aborted" | "failed") =>
    policy.settle(admission, {
      ...totals,
      status,
      timings: { receivedAt: context.receivedAt, ...(firstTokenAt !== undefined ? { firstTokenAt } : {}), finishedAt: clock() },
    });

  let release: () => void;
  try {
    release = await scheduler.acquire(signal);
  } catch (error) {
    await settle(signal.aborted ? "aborted" : "failed");
    throw error instanceof EngineError ? engineErrorToApi(error) : error;
  }

  /** What the choice under way has delivered and not yet billed: its prompt's count when it is the prompt's first, and one token per delta. */
  const unbilled = { promptTokens: 0, completionTokens: 0 };
  async function* run(): AsyncGenerator<ChoicePart> {
    let status: "completed" | "aborted" | "failed" = "completed";
    try {
      let choice = 0;
      for (const prompt of plan.prompts) {
        for (let copy = 0; copy < plan.choicesPerPrompt; copy++, choice++) {
          const request: GenerationRequest = {
            model: plan.model,
            input: prompt.input,
            sampling: plan.sampling,
            ...(plan.constraint ? { constraint: plan.constraint } : {}),
          };
          for await (const part of engine.generate(request, signal)) {
            if (part.type === "finish") {
              // The prompt is billed once however many choices it has, as the hosted API does.
              if (copy === 0) addPromptUsage(totals, prompt.promptTokens, part.usage);
              totals.completionTokens += part.usage.completionTokens;
              Object.assign(unbilled, { promptTokens: 0, completionTokens: 0 });
            } else {
              firstTokenAt ??= clock();
              // Engines send one delta per token at most (a token that completes no character sends none).
              Object.assign(unbilled, { promptTokens: copy === 0 ? prompt.promptTokens : 0, completionTokens: unbilled.completionTokens + 1 });
            }
            yield { choice, part };
          }
          if (signal.aborted) return;
        }
      }
    } catch (error) {
      status = "failed";
      // Tokens delivered before the failure are billed, as an abort's are.
      totals.promptTokens += unbilled.promptTokens;
      totals.completionTokens += unbilled.completionTokens;
      throw error instanceof EngineError ? engineErrorToApi(error) : error;
    } finally {
      if (status === "completed" && signal.aborted) status = "aborted";
      release();
      await settle(status);
    }
  }

  return { parts: run(), usage: () => ({ ...totals }) };
}

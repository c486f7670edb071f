/**
 * Conversions at the boundary between OpenAI's wire objects and the serving layer's: sampling
 * options in, usage and finish reasons out, and a drained generation's choices.
 */
import type { FinishReason, SamplingOptions, TokenLogprob } from "../../engines/contract.js";
import type { Generation, UsageTotals } from "../../pipeline/generation.js";
import type { Usage } from "../../core/wire/shared.js";

/** OpenAI's usage object; `total_tokens` is always prompt + completion. */
export function wireUsage(totals: UsageTotals): Usage {
  return {
    prompt_tokens: totals.promptTokens,
    completion_tokens: totals.completionTokens,
    total_tokens: totals.promptTokens + totals.completionTokens,
    ...(totals.cachedTokens ? { prompt_tokens_details: { cached_tokens: totals.cachedTokens } } : {}),
  };
}

/** The sampling fields both endpoints share, from the wire to the engine, with OpenAI's defaults. */
export function samplingOf(
  request: {
    temperature?: number | null;
    top_p?: number | null;
    stop?: string | string[] | null;
    presence_penalty?: number | null;
    frequency_penalty?: number | null;
    seed?: number | null;
  },
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
export async function collect(
  generation: Generation,
  choiceCount: number,
  prefix: (choice: number) => string = () => "",
) {
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

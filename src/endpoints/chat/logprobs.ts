/**
 * `logprobs`, `top_logprobs` and `logit_bias`: from the wire to the engine's sampling options,
 * refused as OpenAI refuses them, and the engine's token log probabilities back to the wire in
 * the chat form (`{content: [...]}`) or the legacy completion form (parallel lists).
 */
import type { TokenLogprob } from "../../engines/contract.js";
import { BadRequestError } from "../../core/errors/api.js";
import type { Tokenizer } from "../../prompt/tokenizer.js";
import type { TokenLogprobWire } from "../../core/wire/shared.js";

/** web-llm computes at most 5 alternatives per token; OpenAI allows 20 on chat. */
const maxAlternatives = 5;

/** The engine's `logprobs` option for a chat request: the number of alternatives, or undefined when not asked. */
export function chatLogprobsOption(request: {
  logprobs?: boolean | null;
  top_logprobs?: number | null;
}): number | undefined {
  if (request.top_logprobs != null && request.logprobs !== true) {
    throw new BadRequestError(
      "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.",
      { param: "top_logprobs", code: "invalid_value" },
    );
  }
  if (request.logprobs !== true) return undefined;
  const alternatives = request.top_logprobs ?? 0;
  if (alternatives > maxAlternatives) {
    throw new BadRequestError(
      `Invalid 'top_logprobs': integer above maximum value. Expected a value <= ${maxAlternatives}, but got ${alternatives} instead: the on-device engines compute at most ${maxAlternatives} alternatives per token.`,
      { param: "top_logprobs", code: "integer_above_max_value" },
    );
  }
  return alternatives;
}

/** The engine's `logprobs` option for a legacy completion, where `logprobs` is the number of alternatives. */
export function legacyLogprobsOption(request: {
  logprobs?: number | false | null;
  echo?: boolean | null;
}): number | undefined {
  if (typeof request.logprobs !== "number") return undefined;
  if (request.echo) {
    // OpenAI's own refusal for its instruct models: the prompt's tokens are not scored, there or here.
    throw new BadRequestError("Setting 'echo' and 'logprobs' at the same time is not supported for this model.", {
      param: "echo",
      code: "unsupported_parameter",
    });
  }
  return request.logprobs;
}

/** `logit_bias` as token id → bias, every id within the model's vocabulary. */
export function logitBiasOption(
  bias: Record<string, number> | null | undefined,
  tokenizer: Tokenizer,
): Record<number, number> | undefined {
  if (!bias || Object.keys(bias).length === 0) return undefined;
  const result: Record<number, number> = {};
  for (const [key, value] of Object.entries(bias)) {
    const id = Number(key);
    if (!Number.isSafeInteger(id) || id >= tokenizer.size) {
      throw new BadRequestError(`Invalid key in 'logit_bias': ${key}. Maximum value is ${tokenizer.size - 1}.`, {
        param: "logit_bias",
        code: "invalid_value",
      });
    }
    result[id] = value;
  }
  return result;
}

export function toWireLogprobs(tokens: readonly TokenLogprob[]): TokenLogprobWire[] {
  return tokens.map((token) => ({
    token: token.token,
    logprob: token.logprob,
    bytes: token.bytes,
    top_logprobs: token.alternatives.map((alternative) => ({
      token: alternative.token,
      logprob: alternative.logprob,
      bytes: alternative.bytes,
    })),
  }));
}

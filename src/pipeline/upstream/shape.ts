/**
 * An upstream's answer in OpenAI's exact shape: our model id, the fields some servers leave out,
 * several answers merged into one, and the usage as billed. Upstream objects are re-framed, not
 * rebuilt: whatever else they carry passes through.
 */
import { upstreamChatLogprobsSchema, type UpstreamChoice, type UpstreamUsage } from "../../core/wire/upstream.js";
import { legacyLogprobsOf, withTokenDetails, type Usage as WireUsage } from "../../core/wire/shared.js";
import type { Usage } from "../metering.js";
import type { ForwardPlan } from "./plan.js";

/** The usage as billed, with `estimated` when it was counted here; a chat completion's with its token details. */
export function wireUsageOf(usage: Usage, plan: ForwardPlan): WireUsage & { estimated?: true } {
  const counts = {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    ...(usage.estimated ? { estimated: true as const } : {}),
  };
  return plan.endpoint === "chat/completions" ? withTokenDetails(counts) : counts;
}

/** The text a choice produced, for counting: content, text, and tool calls' names and arguments. */
export function producedText(choice: UpstreamChoice): string {
  const message = choice.delta ?? choice.message;
  const calls = message?.tool_calls ?? [];
  return (
    (choice.text ?? "") +
    (message?.content ?? "") +
    calls.map((call) => (call.function?.name ?? "") + (call.function?.arguments ?? "")).join("")
  );
}

/**
 * Billed counts: the upstream's when it gave them, else ours (`estimated`), over what was produced.
 * With `n` above 1, an upstream may report one choice's tokens for all (llama-server does, whole
 * and streamed), so that `n: 16` would cost what one choice costs: such a count is replaced by
 * ours (`estimated`). Of `n` choices of like length, one choice's count is about 1/n of ours and
 * a count of them all about ours; the midpoint tells the two apart, whatever small differences
 * our tokenizer and the server's have.
 */
export function billed(plan: ForwardPlan, usage: UpstreamUsage | null | undefined, produced: string[]): Usage {
  const counted = () => countedTokens(plan, produced);
  if (!usage) return { promptTokens: plan.promptTokens, completionTokens: counted(), estimated: true };
  const reported = { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, estimated: false };
  const choices = choicesPerCall(plan);
  if (choices < 2) return reported;
  const ours = counted();
  const oneChoiceOnly = reported.completionTokens < (ours * (choices + 1)) / (2 * choices);
  return oneChoiceOnly ? { ...reported, completionTokens: ours, estimated: true } : reported;
}

/** Characters counted at a time (the tokenizer takes about half a second a MiB). */
const countedPiece = 65_536;

/**
 * Our count of the tokens produced, its work bounded by the reservation: the charge stops there,
 * so the count stops once past it, and an upstream that ignores `max_tokens` and sends megabytes
 * cannot hold the worker, and every tab's requests, for seconds. Text is counted in pieces, each
 * cut before a space or a newline where one is near, as the tokenizers split there anyway.
 */
export function countedTokens(plan: ForwardPlan, produced: readonly string[]): number {
  let total = 0;
  for (const text of produced) {
    for (let start = 0; text && start < text.length && total <= plan.maxCompletionTokens;) {
      const end = pieceEnd(text, start);
      total += plan.countTokens(text.slice(start, end));
      start = end;
    }
  }
  return total;
}

/** Where a piece from `start` ends: at most `countedPiece` on, before the last space or newline of its second half, else not inside a character. */
function pieceEnd(text: string, start: number): number {
  const limit = start + countedPiece;
  if (limit >= text.length) return text.length;
  for (let end = limit; end > start + countedPiece / 2; end--) {
    const code = text.charCodeAt(end);
    if (code === 0x20 || code === 0x0a) return end;
  }
  const lowSurrogate = text.charCodeAt(limit) >= 0xdc00 && text.charCodeAt(limit) <= 0xdfff;
  return lowSurrogate ? limit - 1 : limit;
}

/** Fields OpenAI always sends that some upstreams leave out, given OpenAI's values; the rest passes through. */
export function withOpenAiDefaults<
  Body extends { choices: UpstreamChoice[]; system_fingerprint?: string | null | undefined },
>(body: Body, modelId: string): Body & { model: string } {
  return {
    ...body,
    model: modelId,
    system_fingerprint: body.system_fingerprint ?? null,
    choices: body.choices.map((choice) => ({
      ...choice,
      logprobs: choice.logprobs ?? null,
      ...(choice.message ? { message: { refusal: null, ...choice.message } } : {}),
    })),
  };
}

/**
 * Several completion objects (llama-server answers a legacy completion with several prompts as a
 * JSON array, one object per prompt) as the one object OpenAI sends: the choices in prompt order,
 * indexed 0..n-1, and the usage summed (none when any part has none).
 */
export function mergeCompletions(parts: unknown[]): unknown {
  const objects = parts as { choices?: { index?: number }[]; usage?: UpstreamUsage | null }[];
  const choices = objects.flatMap((part) => part.choices ?? []).map((choice, index) => ({ ...choice, index }));
  const usage = objects.map((part) => part.usage ?? null).reduce((total, each) => sumUsage(total, each));
  return { ...objects[0], choices, usage };
}

/** Two usages summed; none when either is missing. */
export function sumUsage(total: UpstreamUsage | null, each: UpstreamUsage | null): UpstreamUsage | null {
  if (!total || !each) return null;
  return {
    prompt_tokens: total.prompt_tokens + each.prompt_tokens,
    completion_tokens: total.completion_tokens + each.completion_tokens,
    total_tokens: total.prompt_tokens + each.prompt_tokens + total.completion_tokens + each.completion_tokens,
  };
}

/** The chat deltas' first per choice carries `role`, as OpenAI's do; some upstreams (llama-server) leave it out. */
export function withRoles(choices: UpstreamChoice[], started: Set<number>): UpstreamChoice[] {
  return choices.map((choice) => {
    const index = choice.index ?? 0;
    if (started.has(index) || !choice.delta) return choice;
    started.add(index);
    return { ...choice, delta: { role: "assistant", ...choice.delta } };
  });
}

/**
 * Every streamed tool-call delta carries `index`, which clients put calls together by; some
 * upstreams (older Ollama) leave it out. There, a delta with an `id` begins the choice's next
 * call and one without continues the latest. `begun` counts each choice's calls so far.
 */
export function withCallIndexes(choices: UpstreamChoice[], begun: Map<number, number>): UpstreamChoice[] {
  return choices.map((choice) => {
    const calls = choice.delta?.tool_calls;
    if (!calls?.length) return choice;
    const key = choice.index ?? 0;
    const indexed = calls.map((call) => {
      const count = begun.get(key) ?? 0;
      if (typeof call.index === "number") {
        begun.set(key, Math.max(count, call.index + 1));
        return call;
      }
      const begins = Boolean(call.id) || count === 0;
      if (begins) begun.set(key, count + 1);
      return { ...call, index: begins ? count : count - 1 };
    });
    return { ...choice, delta: { ...choice.delta, tool_calls: indexed } };
  });
}

/** Choices asked of each upstream call: `n` (a legacy completion's prompts are one call each). */
export function choicesPerCall(plan: ForwardPlan): number {
  return typeof plan.body.n === "number" ? plan.body.n : 1;
}

/**
 * A completion object with the choices that were asked for: an upstream that sends more than `n`
 * (a bug, or a hostile server) does not pass its extra choices on to the client.
 */
export function askedChoicesOf(part: unknown, perCall: number): unknown {
  if (typeof part !== "object" || part === null || !Array.isArray((part as { choices?: unknown }).choices)) return part;
  const { choices } = part as { choices: unknown[] };
  return choices.length > perCall ? { ...part, choices: choices.slice(0, perCall) } : part;
}

/** The prompt to put before choice `index` of a legacy completion, when `echo` asked: choices come `n` per prompt. */
export function echoOf(plan: ForwardPlan, index: number): string {
  return plan.echo?.[Math.floor(index / choicesPerCall(plan))] ?? "";
}

/**
 * A legacy completion's choice as OpenAI sends it: `echoed` (its prompt, on its first chunk) put
 * before its text, and log probabilities in the legacy form. `offset` is where this piece starts
 * in the client's text of the choice; the tokens' `text_offset` count from after `echoed`.
 */
export function asLegacyChoice(choice: UpstreamChoice, echoed: string, offset: number): UpstreamChoice {
  const logprobs = choice.logprobs == null ? choice.logprobs : legacyLogprobs(choice.logprobs, offset + echoed.length);
  return { ...choice, text: echoed + (choice.text ?? ""), logprobs };
}

/** The chat form (llama-server's) in the legacy form; any other form (vLLM's is the legacy one) as sent. */
function legacyLogprobs(logprobs: unknown, offset: number): unknown {
  const chat = upstreamChatLogprobsSchema.safeParse(logprobs);
  if (!chat.success || (logprobs as { tokens?: unknown }).tokens !== undefined) return logprobs;
  const tokens = chat.data.content.map((token) => ({ ...token, alternatives: token.top_logprobs }));
  return legacyLogprobsOf(tokens, offset);
}

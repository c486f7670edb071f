/** A whole (non-streamed) answer from an upstream: read, checked, re-framed and billed. */
import { ServiceUnavailableError } from "../../core/errors/api.js";
import type { Upstream } from "../../catalogue/entry.js";
import { maxNesting, nestsTooDeep } from "../../core/wire/nesting.js";
import { upstreamCompletionSchema } from "../../core/wire/upstream.js";
import type { Meter } from "../metering.js";
import { readBounded } from "../read-bounded.js";
import type { Answering } from "./failover.js";
import type { ForwardPlan } from "./plan.js";
import {
  askedChoicesOf,
  asLegacyChoice,
  billed,
  choicesPerCall,
  echoOf,
  mergeCompletions,
  producedText,
  wireUsageOf,
  withOpenAiDefaults,
} from "./shape.js";

/** Far above any completion's JSON (its text is bounded by the model's window and `n`); a stream's text is held to it too. */
export const maxReplyBytes = 64 * 2 ** 20;

/** Every answer's JSON, an array answer's objects one by one, as one completion object. */
async function readWhole(upstream: Upstream, responses: AsyncGenerator<Response>, perCall: number): Promise<unknown> {
  const parts: unknown[] = [];
  for await (const response of responses) {
    const { text, cut } = await readBounded(response.body, maxReplyBytes);
    if (cut)
      throw new ServiceUnavailableError(
        `${upstream.name} sent a reply over ${maxReplyBytes} bytes, far more than any completion: it was not read further`,
        { code: "upstream_invalid_response" },
      );
    if (nestsTooDeep(text))
      throw new ServiceUnavailableError(
        `${upstream.name} sent a reply that nests deeper than ${maxNesting} levels, which no completion does`,
        { code: "upstream_invalid_response" },
      );
    const body = JSON.parse(text) as unknown;
    for (const part of Array.isArray(body) ? body : [body]) parts.push(askedChoicesOf(part, perCall));
  }
  return parts.length === 1 ? parts[0] : mergeCompletions(parts);
}

/** The completion as OpenAI sends it, with the usage as billed; the meter settled either way. */
export async function wholeAnswer(
  { upstream, responses }: Answering,
  plan: ForwardPlan,
  meter: Meter,
  signal: AbortSignal,
): Promise<unknown> {
  const nothing = { promptTokens: 0, completionTokens: 0, upstream: upstream.name };
  let json: unknown;
  try {
    json = await readWhole(upstream, responses, choicesPerCall(plan));
  } catch (error) {
    if (error instanceof ServiceUnavailableError) {
      await meter.settle("failed", nothing);
      throw error;
    }
    // A client that left once the upstream had the prompt is billed the prompt, as counted here.
    await meter.settle(
      signal.aborted ? "aborted" : "failed",
      signal.aborted ? { ...nothing, promptTokens: plan.promptTokens, estimated: true } : nothing,
    );
    throw signal.aborted
      ? error
      : new ServiceUnavailableError(`${upstream.name} sent a body that is not JSON: ${(error as Error).message}`, {
          code: "upstream_invalid_response",
        });
  }
  const parsed = upstreamCompletionSchema.safeParse(json);
  if (!parsed.success) {
    await meter.settle("failed", nothing);
    throw new ServiceUnavailableError(
      `${upstream.name} sent a reply that is not a completion: ${parsed.error.issues[0]?.message ?? "unknown shape"}`,
      { code: "upstream_invalid_response" },
    );
  }
  meter.firstToken();
  const bill = { ...billed(plan, parsed.data.usage, parsed.data.choices.map(producedText)), upstream: upstream.name };
  await meter.settle("completed", bill);
  const choices =
    plan.endpoint === "completions"
      ? parsed.data.choices.map((choice, index) => asLegacyChoice(choice, echoOf(plan, choice.index ?? index), 0))
      : parsed.data.choices;
  return { ...withOpenAiDefaults({ ...parsed.data, choices }, plan.model.id), usage: wireUsageOf(bill, plan) };
}

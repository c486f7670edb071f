/**
 * Serving a model from its upstreams: remote engines that speak OpenAI's protocol (vLLM,
 * llama-server, Ollama, the hosted API). The request is admitted and settled by the same meter as
 * a local one (src/pipeline/metering.ts); only the generation happens elsewhere.
 *
 * - The client's validated JSON goes upstream with the upstream's model name (send.ts).
 * - The upstreams are tried in order (failover.ts); attempts that fail are charged nothing.
 * - The answer is re-framed whole (whole.ts) or as a stream of chunks (stream.ts). Without the
 *   upstream's usage, tokens are counted here with the family's tokenizer, marked `estimated`.
 * - The client's abort aborts the upstream fetch, and what was streamed until then is billed.
 */
import type { Upstream } from "../../catalogue/entry.js";
import type { Accounts } from "../../accounts/accounts.js";
import { nothingUsed, type Meter } from "../metering.js";
import type { ServeRequest } from "../request.js";
import { firstAnswering, type Answering } from "./failover.js";
import type { ForwardPlan } from "./plan.js";
import { streamedAnswer } from "./stream.js";
import { wholeAnswer } from "./whole.js";

/** The upstream that served, and its answer: a whole completion, or the chunks of a stream. */
export type Forwarded = { upstream: Upstream } & (
  { kind: "whole"; body: unknown } | { kind: "stream"; events: AsyncGenerator<unknown> }
);

export async function forward(
  services: { accounts: Accounts; fetch: typeof fetch },
  request: ServeRequest,
  plan: ForwardPlan,
  meter: Meter,
): Promise<Forwarded> {
  let answering: Answering;
  try {
    answering = await firstAnswering(services, request, plan);
  } catch (error) {
    await meter.settle(request.signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
  }
  if (plan.stream)
    return {
      upstream: answering.upstream,
      kind: "stream",
      events: streamedAnswer(answering, plan, meter, request.signal),
    };
  return {
    upstream: answering.upstream,
    kind: "whole",
    body: await wholeAnswer(answering, plan, meter, request.signal),
  };
}

/**
 * The two ways a generation endpoint is served once its request is parsed and planned: on this
 * device, or by the model's upstreams. Both admit through the one meter (src/pipeline/metering.ts),
 * follow the client's abort, and return the outcome with the admission's window.
 */
import { BadRequestError } from "../core/errors/api.js";
import { admit } from "../pipeline/metering.js";
import { admittedTokens, startGeneration, type Generation, type GenerationPlan } from "../pipeline/generation.js";
import type { ServeRequest } from "../pipeline/request.js";
import { chosenEngine, type Placement } from "../pipeline/placement.js";
import { forward, type Forwarded } from "../pipeline/upstream/forward.js";
import type { ForwardPlan } from "../pipeline/upstream/plan.js";
import type { RequestContext } from "./context.js";
import type { Services } from "../pipeline/services.js";
import { admitted, type Outcome } from "./outcome.js";
import { abortWith, respond, respondForwarded, type RespondOptions } from "./respond.js";

/** What serving a generation uses: the services, and how a response waits for a slow first token. */
export type ServingDependencies = Services & { respond?: RespondOptions };

/** OpenAI's refusal of `stream_options` without `stream`, which both generation endpoints make. */
export function checkStreamOptions(request: { stream?: boolean | null | undefined; stream_options?: unknown }): void {
  if (request.stream_options && request.stream !== true) {
    throw new BadRequestError("The 'stream_options' parameter is only allowed when 'stream' is enabled.", {
      param: "stream_options",
    });
  }
}

/** What serving needs of the request (src/pipeline/request.ts), with the abort it follows. */
export function serveRequest(context: RequestContext, signal: AbortSignal): ServeRequest {
  return {
    requestId: context.requestId,
    receivedAt: context.receivedAt,
    key: context.key,
    signal,
    origin: context.url.origin,
  };
}

/** How a generation becomes the endpoint's reply: streamed as events, or whole. */
export interface Reply<Event> {
  stream: boolean;
  /** Streamed in the Responses API's framing (src/http/sse.ts). */
  named?: boolean;
  toEvents: (generation: Generation) => AsyncGenerator<Event>;
  toBody: (generation: Generation) => Promise<unknown>;
}

/** Generates on this device with the engine the placement chose. */
export async function generateLocally<Event>(
  dependencies: ServingDependencies,
  context: RequestContext,
  placement: Placement,
  plan: GenerationPlan,
  reply: Reply<Event>,
): Promise<Outcome> {
  const controller = abortWith(context.request);
  const meter = await admit(dependencies, serveRequest(context, controller.signal), plan.model, admittedTokens(plan));
  return admitted(meter, placement, async () => {
    const engine = chosenEngine(placement);
    // The engine's cache is the account's own: another account's prefix is never reused.
    const scoped = { ...plan, ...(engine ? { engine } : {}), cacheScope: context.key.accountId };
    const generation = await startGeneration(dependencies, meter, scoped, controller.signal);
    return {
      response: await respond(
        context.requestId,
        controller,
        generation,
        reply.stream,
        reply.toEvents,
        reply.toBody,
        dependencies.respond,
        reply.named === true,
      ),
    };
  });
}

/**
 * How the http layer writes a chat answer, ours or an upstream's, in the terms the client asked
 * in: the deprecated `functions` shape, or the Responses API's objects and (`named`) framing.
 */
export interface Reshape {
  whole(body: unknown): unknown;
  chunks(events: AsyncGenerator<unknown>): AsyncGenerator<unknown>;
  named?: boolean;
}

/** Forwards to the model's upstreams, which generate; the answer is re-framed and billed here. */
export async function forwardRemotely(
  dependencies: ServingDependencies,
  context: RequestContext,
  placement: Placement,
  plan: Omit<ForwardPlan, "decision">,
  reshape?: Reshape,
): Promise<Outcome> {
  const controller = abortWith(context.request);
  const request = serveRequest(context, controller.signal);
  const meter = await admit(dependencies, request, plan.model, {
    promptTokens: plan.promptTokens,
    maxCompletionTokens: plan.maxCompletionTokens,
  });
  return admitted(meter, placement, async () => {
    const answer = await forward(dependencies, request, { ...plan, decision: placement.decision }, meter);
    const forwarded: Forwarded = !reshape
      ? answer
      : answer.kind === "whole"
        ? { ...answer, body: await reshape.whole(answer.body) }
        : { ...answer, events: reshape.chunks(answer.events) };
    return {
      response: respondForwarded(forwarded, context.requestId, controller, reshape?.named === true),
      upstream: forwarded.upstream,
    };
  });
}

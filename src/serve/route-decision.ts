/**
 * Where a request for a model is served: on this device, or by the model's upstreams. Pure: the
 * model and whether the engine can run it here in, the decision and its reason out, so `/v1/model/info`, the
 * response headers and the handlers all say the same thing.
 */
import type { ModelEntry, RoutingPolicy, Upstream } from "../model/entry.js";

export interface RouteDecision {
  target: "local" | "remote";
  policy: RoutingPolicy;
  reason: string;
  upstreams: Upstream[];
}

/** `runnable` is the engine's own verdict (`Engine.status`): the adapter's features and limits, and the build's memory estimate against the budget. */
export function decideRoute(model: ModelEntry, runnable: { ok: boolean; reason: string | null }): RouteDecision {
  const decision = (target: RouteDecision["target"], reason: string): RouteDecision => ({ target, policy: model.routing, reason, upstreams: target === "remote" ? model.upstreams : [] });
  if (model.routing === "local") return decision("local", "routing is 'local'");
  if (model.routing === "remote") return decision("remote", "routing is 'remote'");
  if (runnable.ok) return decision("local", "this device can run it");
  return decision("remote", `this device cannot run it: ${runnable.reason ?? "no reason given"}`);
}

/** A header value is a byte string: anything outside Latin-1 would make `Headers.set` throw. */
export function headerValue(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "?");
}

/** The headers every response of a generation carries, local or remote. */
export function routeHeaders(decision: RouteDecision, upstream?: Upstream): Record<string, string> {
  return {
    "x-inference-route": decision.target,
    "x-inference-route-reason": headerValue(decision.reason),
    ...(upstream ? { "x-inference-upstream": headerValue(upstream.name), "x-inference-generated-by": headerValue(`upstream ${new URL(upstream.baseUrl).host}`) } : {}),
  };
}

/** The engine that generates a local reply, and why it was chosen (the same as `/v1/model/info` says). */
export function engineHeaders(engine: { name: string; reason: string }): Record<string, string> {
  return { "x-inference-engine": headerValue(engine.name), "x-inference-engine-reason": headerValue(engine.reason), "x-inference-generated-by": headerValue(`device ${engine.name}`) };
}

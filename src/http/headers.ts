/**
 * Every header a response carries beyond its body's own, assembled in one place: where the
 * request was routed and which engine ran it, the key's `X-RateLimit-*` window, and the request id.
 */
import type { RateLimitState } from "../policy/policy.js";
import type { Upstream } from "../model/entry.js";
import type { Route, RouteDecision } from "../serve/route-decision.js";
import { durationText } from "../wire/duration.js";

/** A header value is a byte string: anything outside Latin-1 would make `Headers.set` throw. */
function headerValue(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "?");
}

/** The headers every response of a generation carries, local or remote. */
function routeHeaders(decision: RouteDecision, upstream?: Upstream): Record<string, string> {
  return {
    "x-inference-route": decision.target,
    "x-inference-route-reason": headerValue(decision.reason),
    ...(upstream
      ? {
          "x-inference-upstream": headerValue(upstream.name),
          "x-inference-generated-by": headerValue(`upstream ${new URL(upstream.baseUrl).host}`),
        }
      : {}),
  };
}

/** The engine that generates a local reply, and why it was chosen (the same as `/v1/model/info` says). */
function engineHeaders(engine: { name: string; reason: string; threads?: number }): Record<string, string> {
  return {
    "x-inference-engine": headerValue(engine.name),
    "x-inference-engine-reason": headerValue(engine.reason),
    "x-inference-generated-by": headerValue(`device ${engine.name}`),
    // llama.cpp's CPU threads, as model info's `threads` says.
    ...(engine.threads !== undefined ? { "x-inference-threads": String(engine.threads) } : {}),
  };
}

/** The key's window after this request, as the hosted API reports it. */
function rateLimitHeaders(state: RateLimitState, now: number): Record<string, string> {
  return {
    "x-ratelimit-limit-requests": String(state.limitRequests),
    "x-ratelimit-remaining-requests": String(state.remainingRequests),
    "x-ratelimit-reset-requests": durationText(state.resetRequests - now),
    "x-ratelimit-limit-tokens": String(state.limitTokens),
    "x-ratelimit-remaining-tokens": String(state.remainingTokens),
    "x-ratelimit-reset-tokens": durationText(state.resetTokens - now),
  };
}

/** The headers of a route's outcome: where it was served, by what, and the key's window. */
export function outcomeHeaders(
  route: Route | undefined,
  upstream: Upstream | undefined,
  rate: RateLimitState | undefined,
  now: number,
): Record<string, string> {
  return {
    ...(route ? routeHeaders(route.decision, upstream) : {}),
    ...(route?.engine ? engineHeaders(route.engine) : {}),
    ...(rate ? rateLimitHeaders(rate, now) : {}),
  };
}

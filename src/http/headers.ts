/**
 * Every header a response carries beyond its body's own, assembled in one place: where the
 * request was placed and which engine ran it, the key's `X-RateLimit-*` window, and the request id.
 */
import type { RateLimitState } from "../accounts/accounts.js";
import type { Upstream } from "../catalogue/entry.js";
import type { Outcome } from "./outcome.js";
import type { PlacementDecision } from "../pipeline/placement.js";
import { durationText } from "../core/wire/duration.js";

/** A header value is a byte string: anything outside Latin-1 would make `Headers.set` throw. */
function headerValue(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "?");
}

/** The headers every response of a generation carries, local or remote. */
function placementHeaders(decision: PlacementDecision, upstream?: Upstream): Record<string, string> {
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

/** How a reset is written: an ISO 8601 UTC timestamp (the contract), or the hosted API's duration until it. */
export type ResetForm = "timestamp" | "duration";

function resetText(reset: number, now: number, form: ResetForm): string {
  return form === "timestamp" ? new Date(reset).toISOString() : durationText(reset - now);
}

/** The key's window after this request. */
function rateLimitHeaders(state: RateLimitState, now: number, form: ResetForm): Record<string, string> {
  return {
    "x-ratelimit-limit-requests": String(state.limitRequests),
    "x-ratelimit-remaining-requests": String(state.remainingRequests),
    "x-ratelimit-reset-requests": resetText(state.resetRequests, now, form),
    "x-ratelimit-limit-tokens": String(state.limitTokens),
    "x-ratelimit-remaining-tokens": String(state.remainingTokens),
    "x-ratelimit-reset-tokens": resetText(state.resetTokens, now, form),
  };
}

/**
 * The headers of a request's outcome: where it was served, by what, the key's window, and where its
 * strict schemas went beyond OpenAI's strict mode (a map: the hosted API would refuse the schema).
 */
export function outcomeHeaders(
  outcome: Pick<Outcome, "placement" | "upstream" | "strictMaps">,
  rate: RateLimitState | undefined,
  now: number,
  resetForm: ResetForm,
): Record<string, string> {
  const { placement, upstream, strictMaps } = outcome;
  return {
    ...(placement ? placementHeaders(placement.decision, upstream) : {}),
    ...(placement?.engine ? engineHeaders(placement.engine) : {}),
    ...(rate ? rateLimitHeaders(rate, now, resetForm) : {}),
    ...(strictMaps?.length ? { "x-inference-beyond-strict": headerValue(strictMaps.join("; ")) } : {}),
  };
}

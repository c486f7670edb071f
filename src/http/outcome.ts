/**
 * What a route handler returns: its response, or the failure to answer with, together with what it
 * produced on the way: where the request was routed (and by which upstream), and the key's
 * rate-limit window once the request was counted. The app turns it into headers in one place.
 */
import type { Upstream } from "../catalogue/entry.js";
import type { RateLimitState } from "../accounts/accounts.js";
import { nothingUsed, type Meter } from "../pipeline/metering.js";
import type { Route } from "../pipeline/placement.js";

export type Outcome = ({ response: Response } | { error: unknown }) & {
  /** The key's window after this request was counted; absent when it was not (yet) counted. */
  rate?: RateLimitState;
  route?: Route;
  upstream?: Upstream;
  /** Where the request's strict schemas held a map, beyond OpenAI's strict mode (structured/strict-refusals.ts). */
  strictMaps?: string[];
};

/** Runs a routed request's remaining steps; a failure is answered with the route it was given. */
export async function routed(route: Route, run: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await run();
  } catch (error) {
    return { error, route };
  }
}

/**
 * Runs an admitted request's remaining steps; the outcome carries the admission's window, failed
 * or not. A failure before anything was generated releases the reservation, charging nothing
 * (a no-op where the generation or the forwarding settled it already: a meter settles once).
 */
export async function admitted(
  meter: Meter,
  route: Route,
  run: () => Promise<{ response: Response; upstream?: Upstream }>,
): Promise<Outcome> {
  try {
    return { ...(await run()), rate: meter.rate, route };
  } catch (error) {
    await meter.settle("failed", nothingUsed);
    return { error, rate: meter.rate, route };
  }
}

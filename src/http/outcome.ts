/**
 * What a route handler returns: its response, or the failure to answer with, together with what it
 * produced on the way: where the request was placed (and by which upstream), and the key's
 * rate-limit window once the request was counted. The app turns it into headers in one place.
 */
import type { Upstream } from "../catalogue/entry.js";
import type { RateLimitState } from "../accounts/accounts.js";
import { nothingUsed, type Meter } from "../pipeline/metering.js";
import type { Placement } from "../pipeline/placement.js";

export type Outcome = ({ response: Response } | { error: unknown }) & {
  /** The key's window after this request was counted; absent when it was not (yet) counted. */
  rate?: RateLimitState;
  placement?: Placement;
  upstream?: Upstream;
  /** Where the request's strict schemas held a map, beyond OpenAI's strict mode (structured/strict-refusals.ts). */
  strictMaps?: string[];
};

/** Runs a placed request's remaining steps; a failure is answered with the placement it was given. */
export async function placed(placement: Placement, run: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await run();
  } catch (error) {
    return { error, placement };
  }
}

/**
 * Runs an admitted request's remaining steps; the outcome carries the admission's window, failed
 * or not. A failure before anything was generated releases the reservation, charging nothing
 * (a no-op where the generation or the forwarding settled it already: a meter settles once).
 */
export async function admitted(
  meter: Meter,
  placement: Placement,
  run: () => Promise<{ response: Response; upstream?: Upstream }>,
): Promise<Outcome> {
  try {
    return { ...(await run()), rate: meter.rate, placement };
  } catch (error) {
    await meter.settle("failed", nothingUsed);
    return { error, rate: meter.rate, placement };
  }
}

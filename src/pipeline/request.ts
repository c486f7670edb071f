import type { KeyRecord } from "../accounts/database.js";

/**
 * What serving needs to know of a request, whatever carried it: who asks (the authenticated
 * key), when it arrived, and the client's abort. The HTTP layer builds it from a `Request`.
 */
export interface ServeRequest {
  requestId: string;
  /** Epoch ms at which the request arrived. */
  receivedAt: number;
  key: KeyRecord;
  /** Aborts when the client goes away: generation stops, and what was produced is billed. */
  signal: AbortSignal;
  /** The page's origin, which an upstream must allow cross-origin requests from. */
  origin: string;
}

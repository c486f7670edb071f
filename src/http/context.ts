import type { KeyRecord } from "../accounts/database.js";
import type { Outcome } from "./outcome.js";
import type { Route } from "./router.js";

/** What every handler is given: the request, and what the app learnt of it before routing. */
export interface RequestContext {
  request: Request;
  url: URL;
  requestId: string;
  /** Epoch ms at which the request arrived. */
  receivedAt: number;
  /** The body's bytes, read from the request's arrival on (none for GET), bounded by its kind. */
  body: Promise<Uint8Array>;
  /** The authenticated key; every route runs after authentication. */
  key: KeyRecord;
}

export type InferenceRoute = Route<RequestContext, Outcome>;

/**
 * Routes in the manner of workbox: each is a (match, handler) pair. Paths are matched after
 * the base URL's path and an optional `/v1`, so `/v1/models` and `/models` are one route.
 */
import { BadRequestError } from "../errors/api.js";
import type { RateLimitState } from "../policy/policy.js";
import type { KeyRecord } from "../policy/store.js";

export interface RouteContext {
  request: Request;
  url: URL;
  params: Record<string, string>;
  requestId: string;
  /** Epoch ms at which the request arrived. */
  receivedAt: number;
  /** The body's text, read from the request's arrival on (empty for GET). */
  body: Promise<string>;
  /** The authenticated key; every route runs after authentication. */
  key: KeyRecord;
  /** The key's rate-limit window after this request was counted; set by whoever counts it. */
  rate: RateLimitState | null;
  /** Headers for the response, error or not, e.g. where the request was routed. */
  headers: Record<string, string>;
}

/** A percent-encoded path segment; a malformed escape (`%`, `%zz`) is the request's fault: 400. */
function decodePathSegment(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new BadRequestError(`The URL path segment ${JSON.stringify(value)} is not valid percent-encoding: write '%' as '%25'.`, { code: "invalid_value" });
  }
}

export interface Route {
  method: "GET" | "POST";
  /** Generating routes count the request themselves, with its tokens, when they admit it. */
  generates?: boolean;
  /** Matched against the path below the base URL with any `/v1` prefix removed. */
  path: RegExp;
  handler: (context: RouteContext) => Promise<Response>;
}

export type RouteMatch = { route: Route; params: Record<string, string> } | { route: null };

export class Router {
  readonly #base: URL;
  readonly #routes: readonly Route[];

  constructor(baseUrl: string, routes: readonly Route[]) {
    const base = new URL(baseUrl);
    base.pathname = base.pathname.replace(/\/+$/, "");
    base.search = "";
    base.hash = "";
    this.#base = base;
    this.#routes = routes;
  }

  /** The path below the base URL (without `/v1`), or null when the URL is not ours. */
  relativePath(url: URL): string | null {
    if (url.origin !== this.#base.origin) return null;
    const basePath = this.#base.pathname;
    if (url.pathname !== basePath && !url.pathname.startsWith(`${basePath}/`)) return null;
    const rest = url.pathname.slice(basePath.length) || "/";
    return rest.replace(/^\/v1(?=\/|$)/, "") || "/";
  }

  match(method: string, url: URL): RouteMatch {
    const path = this.relativePath(url);
    if (path === null) return { route: null };
    for (const route of this.#routes) {
      if (route.method !== method) continue;
      const found = route.path.exec(path);
      if (found) {
        const params: Record<string, string> = {};
        for (const [name, value] of Object.entries(found.groups ?? {})) params[name] = decodePathSegment(value);
        return { route, params };
      }
    }
    return { route: null };
  }
}

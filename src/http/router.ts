/**
 * Routes in the manner of workbox: each is a (match, handler) pair. Paths are matched after
 * the base URL's path and an optional `/v1`, so `/v1/models` and `/models` are one route. The
 * router knows nothing of what a handler needs or returns.
 */
import { BadRequestError } from "../core/errors/api.js";

export interface Route<Context, Result> {
  method: "GET" | "POST" | "DELETE";
  /** Matched against the path below the base URL with any `/v1` prefix removed. */
  path: RegExp;
  handler: (context: Context, params: Record<string, string>) => Promise<Result>;
}

export type RouteMatch<Context, Result> =
  { route: Route<Context, Result>; params: Record<string, string> } | { route: null };

/** A percent-encoded path segment; a malformed escape (`%`, `%zz`) is the request's fault: 400. */
function decodePathSegment(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new BadRequestError(
      `The URL path segment ${JSON.stringify(value)} is not valid percent-encoding: write '%' as '%25'.`,
      { code: "invalid_value" },
    );
  }
}

/** `path` without a leading `/v1` segment. */
const withoutVersion = (path: string) => path.replace(/^\/v1(?=\/|$)/, "") || "/";

export class Router<Context, Result> {
  readonly #base: URL;
  readonly #routes: readonly Route<Context, Result>[];

  constructor(baseUrl: string, routes: readonly Route<Context, Result>[]) {
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
    return withoutVersion(url.pathname.slice(basePath.length) || "/");
  }

  match(method: string, url: URL): RouteMatch<Context, Result> {
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

/** The most segments an endpoint's path has, `/v1` included (`/v1/models/{id}`). */
const endpointSegments = 3;

/**
 * Whether `pathname` ends in one of `paths` (optionally after `/v1`), below any base path: how a
 * worker that does not yet know its base URL tells an endpoint from an app's own asset. Only the
 * last few segments are tried, so the work is linear in the path whatever its length.
 */
export function endsInRoute(pathname: string, paths: readonly RegExp[]): boolean {
  let index = pathname.length;
  for (let segments = 0; segments < endpointSegments; segments++) {
    index = pathname.lastIndexOf("/", index - 1);
    if (index === -1) return false;
    const path = withoutVersion(pathname.slice(index));
    if (path !== "/" && paths.some((pattern) => pattern.test(path))) return true;
    if (index === 0) return false;
  }
  return false;
}

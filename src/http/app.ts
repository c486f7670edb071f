/**
 * The HTTP surface: routing, request ids, and the one place where failures become responses.
 * It takes `Request`s and returns `Response`s, so it runs the same in a service worker and in
 * a unit test.
 */
import { errorResponse, NotFoundError, toApiError } from "../errors/api.js";
import { chatRoute } from "./chat.js";
import { completionsRoute } from "./completions.js";
import type { HttpDependencies } from "../serve/dependencies.js";
import { modelRoutes } from "./models.js";
import { rateLimitHeaders } from "../policy/policy.js";
import { Router, type RouteContext } from "./router.js";
import { startReadingBody } from "./validate.js";

export class InferenceApp {
  readonly #router: Router;
  readonly #dependencies: HttpDependencies;

  constructor(baseUrl: string, dependencies: HttpDependencies) {
    this.#dependencies = dependencies;
    this.#router = new Router(baseUrl, [chatRoute(dependencies), completionsRoute(dependencies), ...modelRoutes(dependencies)]);
  }

  /** Whether `url` is under the base URL, and so ours to answer (with an error if no route fits). */
  handles(url: URL): boolean {
    return this.#router.relativePath(url) !== null;
  }

  /**
   * Authenticates every request (401 before anything else, even for an unknown URL), counts it
   * against the key's limits, and puts the key's `X-RateLimit-*` headers on every response,
   * errors included, once the key is known.
   */
  async handle(request: Request): Promise<Response> {
    const { policy, ready, clock, newId } = this.#dependencies;
    const requestId = newId("req_");
    const url = new URL(request.url);
    const receivedAt = clock();
    // Read while the key is checked: both wait on the browser, not on each other.
    const body = request.method === "GET" || request.method === "HEAD" ? Promise.resolve("") : startReadingBody(request);
    let context: RouteContext | undefined;
    let response: Response;
    try {
      await ready;
      const key = await policy.authenticate(request.headers.get("authorization"));
      const found = this.#router.match(request.method, url);
      context = { request, url, params: found.route ? found.params : {}, requestId, receivedAt, body, key, rate: null, headers: {} };
      if (!found.route) {
        context.rate = await policy.countRequest(key);
        throw new NotFoundError(`Invalid URL (${request.method} ${url.pathname})`, { code: "unknown_url" });
      }
      if (!found.route.generates) context.rate = await policy.countRequest(key);
      response = await found.route.handler(context);
    } catch (error) {
      const apiError = toApiError(error, requestId);
      if (apiError.status === 500) console.error(`[webgpu-inference] ${requestId}`, error);
      response = errorResponse(apiError);
    }
    if (context) {
      for (const [name, value] of Object.entries(context.headers)) response.headers.set(name, value);
      const rate = context.rate ?? (await policy.state(context.key.id).catch(() => null));
      if (rate) for (const [name, value] of Object.entries(rateLimitHeaders(rate))) response.headers.set(name, value);
    }
    response.headers.set("x-request-id", requestId);
    return response;
  }
}

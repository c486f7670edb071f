/**
 * The HTTP surface: routing, request ids, and the one place where failures become responses.
 * It takes `Request`s and returns `Response`s, so it runs the same in a service worker and in
 * a unit test.
 */
import { errorResponse, NotFoundError, toApiError } from "../errors.js";
import { chatRoute } from "./chat.js";
import { completionsRoute } from "./completions.js";
import type { HttpDependencies } from "./dependencies.js";
import { modelRoutes } from "./models.js";
import { Router } from "./router.js";

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

  async handle(request: Request): Promise<Response> {
    const requestId = this.#dependencies.newId("req_");
    const url = new URL(request.url);
    let response: Response;
    try {
      const found = this.#router.match(request.method, url);
      if (!found.route) {
        throw new NotFoundError(`Invalid URL (${request.method} ${url.pathname})`, { code: "unknown_url" });
      }
      response = await found.route.handler({ request, url, params: found.params, requestId });
    } catch (error) {
      const apiError = toApiError(error, requestId);
      if (apiError.status === 500) console.error(`[webgpu-inference] ${requestId}`, error);
      response = errorResponse(apiError);
    }
    response.headers.set("x-request-id", requestId);
    return response;
  }
}

/**
 * The HTTP surface: authentication, routing, request ids, and the one place where an outcome
 * becomes a response: a failure is serialised (src/http/json-response.ts) and every header is put on
 * (src/http/headers.ts). It takes `Request`s and returns `Response`s, so it runs the same in a
 * service worker and in a unit test.
 */
import { NotFoundError, toApiError } from "../core/errors/api.js";
import type { KeyRecord } from "../accounts/database.js";
import type { Services } from "../pipeline/services.js";
import { outcomeHeaders, type ResetForm } from "./headers.js";
import type { Outcome } from "./outcome.js";
import { errorResponse } from "./json-response.js";
import type { InferenceRoute, RequestContext } from "./context.js";
import { Router } from "./router.js";
import { isUpload, startReadingBody } from "./validate.js";

/** What the app itself uses; its routes are given (src/endpoints/routes.ts). */
export type AppDependencies = Pick<Services, "accounts" | "ready" | "clock" | "newId"> & {
  /** How the `X-RateLimit-Reset-*` headers are written; an ISO 8601 timestamp by default. */
  rateLimitResets?: ResetForm;
};

export class InferenceApp {
  readonly #router: Router<RequestContext, Outcome>;
  readonly #dependencies: AppDependencies;
  readonly #background: () => Promise<void>;

  /** `background` runs (or joins) what requests left to do in the background, settling once it is done. */
  constructor(
    baseUrl: string,
    dependencies: AppDependencies,
    routes: readonly InferenceRoute[],
    background: () => Promise<void> = async () => {},
  ) {
    this.#dependencies = dependencies;
    this.#router = new Router(baseUrl, routes);
    this.#background = background;
  }

  /**
   * Runs the work requests left to do in the background (a vector store's files to index, after
   * a restart too), or joins it; settles once none is left. A service worker waits on it after
   * each request (`waitUntil`), so the browser keeps the worker alive while it works.
   */
  background(): Promise<void> {
    return this.#background().catch((error: unknown) =>
      console.error("[webgpu-inference] background work failed", error),
    );
  }

  /** Whether `url` is under the base URL, and so ours to answer (with an error if no route fits). */
  handles(url: URL): boolean {
    return this.#router.relativePath(url) !== null;
  }

  /**
   * Authenticates every request (401 before anything else, even for an unknown URL), counts it
   * against the key's requests per minute whatever its answer (429 before anything is read or
   * parsed), and puts the key's `X-RateLimit-*` headers on every response, errors included, once
   * the key is known.
   */
  async handle(request: Request): Promise<Response> {
    const { ready, clock, newId } = this.#dependencies;
    const requestId = newId("req_");
    const receivedAt = clock();
    // Read while the key is checked: both wait on the browser, not on each other. An upload,
    // which may be far larger, is read only for a key that may make it.
    const early =
      request.method === "GET" || request.method === "HEAD"
        ? Promise.resolve(new Uint8Array(0))
        : isUpload(request)
          ? undefined
          : startReadingBody(request);
    let key: KeyRecord | undefined;
    let outcome: Outcome;
    try {
      await ready;
      key = await this.#dependencies.accounts.authenticate(request.headers.get("authorization"));
      const rate = await this.#dependencies.accounts.countRequest(key);
      const body = early ?? startReadingBody(request);
      const context = { request, url: new URL(request.url), requestId, receivedAt, body, key };
      const routed = await this.#route(context).catch((error: unknown): Outcome => ({ error }));
      // A generation's admission reports the window with its tokens counted too.
      outcome = { ...routed, rate: routed.rate ?? rate };
    } catch (error) {
      outcome = { error };
    }
    return this.#respond(outcome, requestId, key);
  }

  async #route(context: RequestContext): Promise<Outcome> {
    const found = this.#router.match(context.request.method, context.url);
    if (found.route) return found.route.handler(context, found.params);
    return {
      error: new NotFoundError(`Invalid URL (${context.request.method} ${context.url.pathname})`, {
        code: "unknown_url",
      }),
    };
  }

  /** The outcome as a response: a failure serialised, and every header it implies. */
  async #respond(outcome: Outcome, requestId: string, key: KeyRecord | undefined): Promise<Response> {
    let response: Response;
    if ("response" in outcome) response = outcome.response;
    else {
      const apiError = toApiError(outcome.error, requestId);
      if (apiError.status === 500) console.error(`[webgpu-inference] ${requestId}`, outcome.error);
      response = errorResponse(apiError);
    }
    // A request refused before it was counted (its requests per minute used up) reports the window as it stands.
    const rate =
      outcome.rate ??
      (key ? ((await this.#dependencies.accounts.state(key.id).catch(() => null)) ?? undefined) : undefined);
    for (const [name, value] of Object.entries(
      outcomeHeaders(outcome, rate, this.#dependencies.clock(), this.#dependencies.rateLimitResets ?? "timestamp"),
    ))
      response.headers.set(name, value);
    response.headers.set("x-request-id", requestId);
    return response;
  }
}

/**
 * Failover: the upstreams in order until one answers. A connection failure (CORS included) or any
 * answer but a client error (400, 413, 422) moves on to the next, before the first byte reaches
 * the client. None left: 503 with every upstream's reason. A client error is every upstream's
 * alike, so it is the client's answer (400) at once.
 */
import { BadRequestError, ServiceUnavailableError } from "../../core/errors/api.js";
import type { Upstream } from "../../catalogue/entry.js";
import type { Accounts } from "../../accounts/accounts.js";
import type { ServeRequest } from "../request.js";
import type { UpstreamCall } from "./plan.js";
import { authorise, safeReason, send } from "./send.js";

/** Client errors: every upstream would refuse the request alike, so there is no failing over. */
const clientErrors = new Set([400, 413, 422]);

/** The upstream that answered, and its answers: the first prompt's, then each further prompt's. */
export interface Answering {
  upstream: Upstream;
  responses: AsyncGenerator<Response>;
}

export async function firstAnswering(
  services: { accounts: Accounts; fetch: typeof fetch },
  request: ServeRequest,
  plan: UpstreamCall,
): Promise<Answering> {
  const failures: string[] = [];
  let retryLater = false;
  for (const upstream of plan.decision.upstreams) {
    const authorised = await authorise(services.accounts, upstream, plan.stream);
    if ("refused" in authorised) {
      failures.push(authorised.refused);
      continue;
    }
    const call = (prompt: string | number[] | undefined) =>
      send(services.fetch, upstream, plan, authorised, prompt, request.signal);
    let response: Response;
    try {
      response = await call(plan.prompts?.[0]);
    } catch (error) {
      if (request.signal.aborted) throw error;
      // A refused connection, a missing CORS header, a Content Security Policy that leaves the
      // origin out and a redirect (not followed) look the same from inside the browser.
      const upstreamOrigin = new URL(upstream.baseUrl).origin;
      failures.push(
        `${upstream.name}: could not reach ${upstreamOrigin} (${failureText(error)}); if it is running, it must allow cross-origin requests from ${request.origin} (docs/remote-models.md has vLLM's, llama-server's and Ollama's CORS settings), a Content Security Policy the app serves must name ${upstreamOrigin} in connect-src, and a redirect is not followed (give the address it leads to as the upstream's baseUrl)`,
      );
      continue;
    }
    if (response.ok)
      return {
        upstream,
        responses: oneAfterAnother(
          response,
          upstream,
          plan,
          (index) => call(plan.prompts?.[index]),
          authorised.secret,
          request.signal,
        ),
      };
    const reason = await safeReason(response, upstream, authorised.secret);
    if (clientErrors.has(response.status))
      throw new BadRequestError(`${upstream.name} refused the request: ${reason.message}`, {
        code: reason.code ?? "upstream_rejected",
        param: reason.param,
      });
    if (response.status === 429 || response.status === 503) retryLater = true;
    failures.push(`${upstream.name}: HTTP ${response.status}: ${reason.message}`);
  }
  throw new ServiceUnavailableError(
    `No upstream could serve ${plan.model.id}. ${failures.join(". ") || "None is configured"}.`,
    {
      code: "upstream_unavailable",
      ...(retryLater ? { retryAfterSeconds: 1 } : {}),
    },
  );
}

/** The first call's answer, then each further prompt's, sent when the one before has been read. */
async function* oneAfterAnother(
  first: Response,
  upstream: Upstream,
  plan: UpstreamCall,
  call: (index: number) => Promise<Response>,
  secret: string | undefined,
  signal: AbortSignal,
): AsyncGenerator<Response> {
  yield first;
  for (let index = 1; index < (plan.prompts?.length ?? 1); index++) {
    let response: Response;
    try {
      response = await call(index);
    } catch (error) {
      if (signal.aborted) throw error;
      throw new ServiceUnavailableError(
        `${upstream.name} could not be reached for prompt ${index}: ${(error as Error).message}`,
        { code: "upstream_unavailable" },
      );
    }
    if (!response.ok) {
      const reason = await safeReason(response, upstream, secret);
      throw new ServiceUnavailableError(
        `${upstream.name} failed on prompt ${index}: HTTP ${response.status}: ${reason.message}`,
        { code: "upstream_error" },
      );
    }
    yield response;
  }
}

/** A failed fetch's message, with its cause's where it has one (Node's "fetch failed" names it there). */
function failureText(error: unknown): string {
  const { message, cause } = error as Error;
  return cause instanceof Error ? `${message}: ${cause.message}` : message;
}

/**
 * Serving a model from its upstreams: remote engines that speak OpenAI's protocol (vLLM,
 * llama-server, Ollama, the hosted API). The request is admitted, reserved and settled exactly as
 * a local one; only the generation happens elsewhere.
 *
 * - The client's validated JSON goes upstream with the upstream's model name, and a stream
 *   always asks for `stream_options.include_usage`, so the bill uses the upstream's own counts.
 *   Without them, tokens are counted here with the model family's tokenizer and the usage (and
 *   the ledger entry) is marked `estimated`.
 * - Upstream events are re-framed, not rebuilt: each is parsed whatever its framing, given our
 *   model id, and written by the one SSE writer; a usage chunk the client did not ask for is
 *   dropped.
 * - Failover: a connection failure (CORS included) or any answer but a client error (400, 413,
 *   422) moves on to the next upstream, before the first byte reaches the client. None left: 503
 *   with every upstream's reason. Those attempts are charged nothing, 429s and 5xx included.
 * - The client's abort aborts the upstream fetch, and what was streamed until then is billed.
 */
import type { ModelEntry, Upstream } from "../model/entry.js";
import { BadRequestError, ServiceUnavailableError, toApiError } from "../errors/api.js";
import type { LedgerEntry } from "../policy/store.js";
import { decideRoute, engineHeaders, routeHeaders, type RouteDecision } from "./route-decision.js";
import { upstreamChunkSchema, upstreamCompletionSchema, type UpstreamChoice, type UpstreamUsage, type Usage } from "../wire/schemas.js";
import { jsonResponse, type HttpDependencies } from "./dependencies.js";
import { abortWith } from "../http/respond.js";
import type { RouteContext } from "../http/router.js";
import { readSse, sseHeaders, sseStream } from "../http/sse.js";

export interface ForwardPlan {
  model: ModelEntry;
  decision: RouteDecision;
  endpoint: "chat/completions" | "completions";
  /** The client's request as validated; forwarded with the upstream's model name. */
  body: Record<string, unknown>;
  /**
   * A legacy completion's several prompts: sent one call per prompt to the same upstream (Ollama
   * takes one prompt only, llama-server answers several as an array), the choices re-indexed in
   * prompt order and the usages summed into the request's one bill.
   */
  prompts?: string[];
  stream: boolean;
  includeUsage: boolean;
  /** Counted here with the family tokenizer: what is admitted, and the estimate's prompt. */
  promptTokens: number;
  maxCompletionTokens: number;
  countTokens(text: string): number;
}

/**
 * Where `model` is served now, also put in the response's headers; the engine is asked only
 * when the policy is `auto`.
 */
export async function routeRequest(dependencies: HttpDependencies, context: RouteContext, model: ModelEntry): Promise<RouteDecision> {
  const { engine } = dependencies;
  const status = model.routing === "auto" ? await engine.status(model) : undefined;
  const decision = decideRoute(model, status?.runnable ?? { ok: false, reason: null });
  // Every local reply names its engine: the one chosen for the model, else the configured one (as model info says).
  const chosen = decision.target === "local" ? (status?.engine ?? (await engine.choice?.(model)) ?? { name: engine.name, reason: "the configured engine" }) : undefined;
  context.headers = { ...context.headers, ...routeHeaders(decision), ...(chosen ? engineHeaders(chosen) : {}) };
  return decision;
}

/** Client errors: every upstream would refuse the request alike, so there is no failing over. */
const clientErrors = new Set([400, 413, 422]);

/** Usage as billed, with whether it was counted here. */
interface Counted {
  promptTokens: number;
  completionTokens: number;
  estimated: boolean;
}

export function wireUsageOf(counted: Counted): Usage & { estimated?: true } {
  return {
    prompt_tokens: counted.promptTokens,
    completion_tokens: counted.completionTokens,
    total_tokens: counted.promptTokens + counted.completionTokens,
    ...(counted.estimated ? { estimated: true as const } : {}),
  };
}

/** The text a choice produced, for counting: content, text, and tool calls' names and arguments. */
function producedText(choice: UpstreamChoice): string {
  const message = choice.delta ?? choice.message;
  const calls = message?.tool_calls ?? [];
  return (choice.text ?? "") + (message?.content ?? "") + calls.map((call) => (call.function?.name ?? "") + (call.function?.arguments ?? "")).join("");
}

/** Upstream statuses that speak of our credential: their text is never passed on. */
const credentialRefusals = new Set([401, 403]);

/**
 * Whether `text` could carry part of `secret`: any 8 characters of it in a row (a server may echo
 * a key whole, cut, or masked at its ends). Linear in both.
 */
function mayCarry(text: string, secret: string | undefined): boolean {
  if (!secret) return false;
  const width = Math.min(8, secret.length);
  const slices = new Set<string>();
  for (let start = 0; start + width <= secret.length; start++) slices.add(secret.slice(start, start + width));
  for (let start = 0; start + width <= text.length; start++) if (slices.has(text.slice(start, start + width))) return true;
  return false;
}

/**
 * The reason an upstream gives for refusing, as a client may read it: a refusal of our credential
 * (401, 403) in our own words, and any text that could carry the credential withheld.
 */
async function safeReason(response: Response, upstream: Upstream, secret: string | undefined): Promise<{ message: string; code: string | null; param: string | null }> {
  if (credentialRefusals.has(response.status)) {
    await response.body?.cancel().catch(() => undefined);
    const which = upstream.credential ? `the credential stored as '${upstream.credential}'` : "no credential (this upstream has none configured)";
    return { message: `it refused the request as unauthorised; it was sent ${which}: store a valid one with admin.setUpstreamCredential`, code: "upstream_unauthorized", param: null };
  }
  const reason = await upstreamReason(response);
  return mayCarry(`${reason.message} ${reason.code ?? ""} ${reason.param ?? ""}`, secret) ? { message: "its reason is withheld: it quoted the credential", code: null, param: null } : reason;
}

/** The reason an upstream gives in its error body, in any of the shapes these servers use. */
async function upstreamReason(response: Response): Promise<{ message: string; code: string | null; param: string | null }> {
  const text = (await response.text().catch(() => "")).trim();
  try {
    const body = JSON.parse(text) as { error?: string | { message?: string; code?: string | number | null; param?: string | null }; message?: string; detail?: string };
    if (typeof body.error === "string") return { message: body.error, code: null, param: null };
    if (body.error?.message) return { message: body.error.message, code: body.error.code == null ? null : String(body.error.code), param: body.error.param ?? null };
    if (body.message ?? body.detail) return { message: String(body.message ?? body.detail), code: null, param: null };
  } catch {
    // Not JSON: the text itself is the reason.
  }
  return { message: text.slice(0, 300) || response.statusText || "no reason given", code: null, param: null };
}

/** Fields OpenAI always sends that some upstreams leave out, given OpenAI's values; the rest passes through. */
function withOpenAiDefaults<Body extends { choices: UpstreamChoice[]; system_fingerprint?: string | null | undefined }>(body: Body, modelId: string): Body & { model: string } {
  return {
    ...body,
    model: modelId,
    system_fingerprint: body.system_fingerprint ?? null,
    choices: body.choices.map((choice) => ({
      ...choice,
      logprobs: choice.logprobs ?? null,
      ...(choice.message ? { message: { refusal: null, ...choice.message } } : {}),
    })),
  };
}

/**
 * Several completion objects (llama-server answers a legacy completion with several prompts as a
 * JSON array, one object per prompt) as the one object OpenAI sends: the choices in prompt order,
 * indexed 0..n-1, and the usage summed (none when any part has none).
 */
function mergeCompletions(parts: unknown[]): unknown {
  const objects = parts as { choices?: { index?: number }[]; usage?: UpstreamUsage | null }[];
  const choices = objects.flatMap((part) => part.choices ?? []).map((choice, index) => ({ ...choice, index }));
  const usage = objects.map((part) => part.usage ?? null).reduce((total, each) => sumUsage(total, each));
  return { ...objects[0], choices, usage };
}

/** Two usages summed; none when either is missing. */
function sumUsage(total: UpstreamUsage | null, each: UpstreamUsage | null): UpstreamUsage | null {
  if (!total || !each) return null;
  return { prompt_tokens: total.prompt_tokens + each.prompt_tokens, completion_tokens: total.completion_tokens + each.completion_tokens, total_tokens: total.prompt_tokens + each.prompt_tokens + total.completion_tokens + each.completion_tokens };
}

/** The chat deltas' first per choice carries `role`, as OpenAI's do; some upstreams (llama-server) leave it out. */
function withRoles(choices: UpstreamChoice[], started: Set<number>): UpstreamChoice[] {
  return choices.map((choice) => {
    const index = choice.index ?? 0;
    if (started.has(index) || !choice.delta) return choice;
    started.add(index);
    return { ...choice, delta: { role: "assistant", ...choice.delta } };
  });
}

function endpointUrl(upstream: Upstream, endpoint: ForwardPlan["endpoint"]): string {
  return `${upstream.baseUrl.replace(/\/+$/, "")}/${endpoint}`;
}

export async function forward(dependencies: HttpDependencies, context: RouteContext, plan: ForwardPlan): Promise<Response> {
  const { policy, clock } = dependencies;
  const controller = abortWith(context.request);
  const signal = controller.signal;
  const admission = await policy.admit({
    keyId: context.key.id,
    key: context.key,
    requestId: context.requestId,
    model: plan.model.id,
    price: plan.model.price,
    promptTokens: plan.promptTokens,
    maxCompletionTokens: plan.maxCompletionTokens,
  });
  context.rate = admission.rate;
  let firstTokenAt: number | undefined;
  const settle = (status: LedgerEntry["status"], counted: Counted, upstream?: Upstream) =>
    policy.settle(admission, {
      promptTokens: counted.promptTokens,
      completionTokens: counted.completionTokens,
      status,
      usageEstimated: counted.estimated,
      ...(upstream ? { upstream: upstream.name } : {}),
      timings: { receivedAt: context.receivedAt, ...(firstTokenAt !== undefined ? { firstTokenAt } : {}), finishedAt: clock() },
    });
  const nothing: Counted = { promptTokens: 0, completionTokens: 0, estimated: false };
  const origin = new URL(context.request.url).origin;

  const failures: string[] = [];
  let retryLater = false;
  try {
    for (const upstream of plan.decision.upstreams) {
      const headers: Record<string, string> = { "content-type": "application/json", accept: plan.stream ? "text/event-stream" : "application/json" };
      let secret: string | undefined;
      if (upstream.credential) {
        const stored = await policy.upstreamSecret(upstream.credential);
        const upstreamOrigin = new URL(upstream.baseUrl).origin;
        if (stored === undefined) {
          failures.push(`${upstream.name}: no credential is stored under '${upstream.credential}' (store it once with admin.setUpstreamCredential)`);
          continue;
        }
        // A credential goes to the origin it was stored for and nowhere else, whatever the catalogue says now.
        if (stored.origin !== upstreamOrigin) {
          failures.push(
            `${upstream.name}: the credential '${upstream.credential}' is stored for ${stored.origin ?? "no origin"}, not ${upstreamOrigin}, so it was not sent (store it for ${upstreamOrigin} with admin.setUpstreamCredential if that is where it belongs)`,
          );
          continue;
        }
        secret = stored.secret;
        headers.authorization = `Bearer ${secret}`;
      }
      const send = (prompt: string | undefined) => {
        const body = {
          ...plan.body,
          model: upstream.model,
          ...(prompt !== undefined ? { prompt } : {}),
          ...(plan.stream ? { stream_options: { ...(plan.body.stream_options as object | undefined), include_usage: true } } : {}),
        };
        return dependencies.fetch(endpointUrl(upstream, plan.endpoint), { method: "POST", headers, body: JSON.stringify(body), signal });
      };
      let response: Response;
      try {
        response = await send(plan.prompts?.[0]);
      } catch (error) {
        if (signal.aborted) throw error;
        // A refused connection and a missing CORS header look the same from inside the browser.
        failures.push(
          `${upstream.name}: could not reach ${new URL(upstream.baseUrl).origin} (${(error as Error).message}); if it is running, it must allow cross-origin requests from ${origin} (see the README for vLLM's, llama-server's and Ollama's CORS settings)`,
        );
        continue;
      }
      if (!response.ok) {
        const reason = await safeReason(response, upstream, secret);
        if (clientErrors.has(response.status)) {
          throw new BadRequestError(`${upstream.name} refused the request: ${reason.message}`, { code: reason.code ?? "upstream_rejected", param: reason.param });
        }
        if (response.status === 429 || response.status === 503) retryLater = true;
        failures.push(`${upstream.name}: HTTP ${response.status}: ${reason.message}`);
        continue;
      }
      const responses = oneAfterAnother(response, upstream, secret, (index) => send(plan.prompts?.[index]));
      context.headers = { ...context.headers, ...routeHeaders(plan.decision, upstream) };
      return plan.stream ? streamed(responses, upstream) : await whole(responses, upstream);
    }
  } catch (error) {
    await settle(signal.aborted ? "aborted" : "failed", nothing);
    throw error;
  }
  await settle("failed", nothing);
  throw new ServiceUnavailableError(`No upstream could serve ${plan.model.id}. ${failures.join(". ") || "None is configured"}.`, {
    code: "upstream_unavailable",
    ...(retryLater ? { retryAfterSeconds: 1 } : {}),
  });

  /** Billed counts: the upstream's when it gave them, else ours, over what was produced. */
  function counted(usage: UpstreamUsage | null | undefined, produced: string[]): Counted {
    if (usage) return { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, estimated: false };
    return { promptTokens: plan.promptTokens, completionTokens: produced.reduce((sum, text) => sum + (text ? plan.countTokens(text) : 0), 0), estimated: true };
  }

  /** The first call's answer, then each further prompt's, sent when the one before has been read. */
  async function* oneAfterAnother(first: Response, upstream: Upstream, secret: string | undefined, send: (index: number) => Promise<Response>): AsyncGenerator<Response> {
    yield first;
    for (let index = 1; index < (plan.prompts?.length ?? 1); index++) {
      let response: Response;
      try {
        response = await send(index);
      } catch (error) {
        if (signal.aborted) throw error;
        throw new ServiceUnavailableError(`${upstream.name} could not be reached for prompt ${index}: ${(error as Error).message}`, { code: "upstream_unavailable" });
      }
      if (!response.ok) {
        const reason = await safeReason(response, upstream, secret);
        throw new ServiceUnavailableError(`${upstream.name} failed on prompt ${index}: HTTP ${response.status}: ${reason.message}`, { code: "upstream_error" });
      }
      yield response;
    }
  }

  async function whole(responses: AsyncGenerator<Response>, upstream: Upstream): Promise<Response> {
    let parsed;
    try {
      const parts: unknown[] = [];
      for await (const response of responses) {
        const body = (await response.json()) as unknown;
        parts.push(...(Array.isArray(body) ? body : [body]));
      }
      parsed = upstreamCompletionSchema.safeParse(parts.length === 1 ? parts[0] : mergeCompletions(parts));
    } catch (error) {
      if (error instanceof ServiceUnavailableError) {
        await settle("failed", nothing, upstream);
        throw error;
      }
      await settle(signal.aborted ? "aborted" : "failed", signal.aborted ? { ...nothing, promptTokens: plan.promptTokens, estimated: true } : nothing, upstream);
      throw signal.aborted ? error : new ServiceUnavailableError(`${upstream.name} sent a body that is not JSON: ${(error as Error).message}`, { code: "upstream_invalid_response" });
    }
    if (!parsed.success) {
      await settle("failed", nothing, upstream);
      throw new ServiceUnavailableError(`${upstream.name} sent a reply that is not a completion: ${parsed.error.issues[0]?.message ?? "unknown shape"}`, { code: "upstream_invalid_response" });
    }
    firstTokenAt = clock();
    const bill = counted(parsed.data.usage, parsed.data.choices.map(producedText));
    await settle("completed", bill, upstream);
    return jsonResponse({ ...withOpenAiDefaults(parsed.data, plan.model.id), usage: wireUsageOf(bill) });
  }

  function streamed(responses: AsyncGenerator<Response>, upstream: Upstream): Response {
    const produced: string[] = [];
    const started = new Set<number>();
    const perPrompt = typeof plan.body.n === "number" ? plan.body.n : 1;
    async function* events(): AsyncGenerator<unknown> {
      let status: LedgerEntry["status"] = "failed";
      let usage: UpstreamUsage | null = null;
      let last: { id?: string; object?: string; created?: number; system_fingerprint?: string | null } = {};
      try {
        let prompt = 0;
        for await (const response of responses) {
          const part = eventsOf(response, upstream, prompt * perPrompt);
          for await (const event of part) {
            if ("usage" in event) usage = prompt === 0 ? event.usage : sumUsage(usage, event.usage);
            else {
              last = event.chunk;
              yield event.chunk;
            }
          }
          prompt++;
        }
        status = "completed";
        if (plan.includeUsage) {
          yield { id: last.id, object: last.object, created: last.created, model: plan.model.id, system_fingerprint: last.system_fingerprint ?? null, choices: [], usage: wireUsageOf(counted(usage, produced)) };
        }
      } finally {
        if (signal.aborted) status = "aborted";
        // An upstream that broke mid-stream is charged what it delivered (counted here), as a failed local generation is.
        const delivered = produced.some((text) => text);
        await settle(status, status === "failed" && !delivered ? nothing : counted(status === "completed" ? usage : null, produced), upstream);
      }
    }

    /** One upstream stream's chunks, its choices indexed from `offset`, then its usage (null when it sent none). */
    async function* eventsOf(response: Response, upstream: Upstream, offset: number): AsyncGenerator<{ chunk: { id?: string; object?: string; created?: number; system_fingerprint?: string | null } } | { usage: UpstreamUsage | null }> {
      let usage: UpstreamUsage | null = null;
      for await (const data of readSse(response.body!)) {
        if (data.trim() === "[DONE]") break;
        let json: unknown;
        try {
          json = JSON.parse(data);
        } catch {
          throw new ServiceUnavailableError(`${upstream.name} sent an event that is not JSON: ${data.slice(0, 200)}`, { code: "upstream_invalid_response" });
        }
        const failure = (json as { error?: { message?: string } | string }).error;
        if (failure) throw new ServiceUnavailableError(`${upstream.name} failed mid-stream: ${typeof failure === "string" ? failure : (failure.message ?? "no reason given")}`, { code: "upstream_error" });
        const parsed = upstreamChunkSchema.parse(json);
        const chunk = { ...parsed, choices: parsed.choices.map((choice) => ({ ...choice, index: offset + (choice.index ?? 0) })) };
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices) {
          const text = producedText(choice);
          if (text) {
            firstTokenAt ??= clock();
            produced[choice.index] = (produced[choice.index] ?? "") + text;
          }
        }
        // Usage is sent once, in a last chunk of its own, as OpenAI does; some servers put it on
        // a choice chunk instead, or send it unasked.
        if (chunk.choices.length === 0) continue;
        const { usage: _usage, ...rest } = chunk;
        const choices = plan.endpoint === "chat/completions" ? withRoles(rest.choices, started) : rest.choices;
        yield { chunk: { ...withOpenAiDefaults({ ...rest, choices }, plan.model.id), ...(plan.includeUsage ? { usage: null } : {}) } };
      }
      yield { usage };
    }
    const stream = sseStream({
      events: events(),
      onError: (error) => toApiError(error, context.requestId).toJSON(),
      onCancel: () => controller.abort(new DOMException("The client went away.", "AbortError")),
    });
    return new Response(stream, { headers: sseHeaders });
  }
}

/**
 * Turns a running generation into a Response, streamed (SSE) or whole (JSON).
 *
 * A stream waits for the first part before answering, and a whole reply waits for all of it,
 * so that model loading, prefill and the engine's refusals and failures still get their own
 * status code (a non-streamed failure is never a 200). But a service worker must settle
 * `respondWith` within minutes, and a first request on a real device may download gigabytes
 * first. So if the answer has not come within `graceMs`, the response is committed anyway (200)
 * and kept alive until it does: SSE with comment lines, JSON with leading whitespace (valid JSON).
 * A failure after that can only be reported in the body, as OpenAI's error object.
 */
import { toApiError } from "../core/errors/api.js";
import type { ChoicePart, Generation } from "../pipeline/generation.js";
import type { Forwarded } from "../pipeline/upstream/forward.js";
import { jsonResponse } from "./json-response.js";
import { sseHeaders, sseStream } from "./sse.js";

const encoder = new TextEncoder();

export interface RespondOptions {
  /** How long to wait for the first part before committing the response. */
  graceMs: number;
  /** How often to send a keep-alive once committed and still waiting. */
  keepAliveMs: number;
}

const defaultRespondOptions: RespondOptions = { graceMs: 30_000, keepAliveMs: 10_000 };

/** Replays `first` (already taken from `source`), then the rest of `source`. */
async function* replay(
  first: IteratorResult<ChoicePart>,
  source: AsyncGenerator<ChoicePart>,
): AsyncGenerator<ChoicePart> {
  try {
    if (first.done) return;
    yield first.value;
    yield* source;
  } finally {
    await source.return(undefined);
  }
}

/** A body that sends `ping` every `every` ms until `ready` settles, then the stream it yields. */
function keptAlive(
  ready: Promise<ReadableStream<Uint8Array>>,
  ping: Uint8Array,
  every: number,
  onCancel: () => void,
): ReadableStream<Uint8Array> {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  return new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(ping);
      timer = setInterval(() => controller.enqueue(ping), every);
      try {
        reader = (await ready).getReader();
      } finally {
        clearInterval(timer);
      }
    },
    async pull(controller) {
      const next = await reader!.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel() {
      clearInterval(timer);
      onCancel();
      // Cancelling the inner body drains the generation, which settles and frees the engine.
      if (reader) void reader.cancel();
      else void ready.then((inner) => inner.cancel());
    },
  });
}

export async function respond<Event>(
  requestId: string,
  controller: AbortController,
  generation: Generation,
  stream: boolean,
  toEvents: (generation: Generation) => AsyncGenerator<Event>,
  toBody: (generation: Generation) => Promise<unknown>,
  options: RespondOptions = defaultRespondOptions,
  named = false,
): Promise<Response> {
  const clientLeft = () => controller.abort(new DOMException("The client went away.", "AbortError"));
  const errorBody = (error: unknown) => toApiError(error, requestId).toJSON();
  const first = generation.parts.next();
  const running = first.then((value): Generation => ({ ...generation, parts: replay(value, generation.parts) }));

  // Past the grace period the response is committed: from there on a failure travels in the body.
  if (!stream) {
    const whole = running.then(toBody);
    if ((await settledWithin(whole, options.graceMs)) === "settled")
      return new Response(JSON.stringify(await whole), { headers: jsonHeaders });
    const late = whole.then(
      (json) => textStream(JSON.stringify(json)),
      (error: unknown) => textStream(JSON.stringify(errorBody(error))),
    );
    return new Response(keptAlive(late, encoder.encode(" "), options.keepAliveMs, clientLeft), {
      headers: jsonHeaders,
    });
  }

  const events = (ready: Generation) =>
    sseStream({ events: toEvents(ready), onError: errorBody, onCancel: clientLeft, named });
  if ((await settledWithin(running, options.graceMs)) === "settled")
    return new Response(events(await running), { headers: sseHeaders });
  const late = running.then(events, (error: unknown) => textStream(`data: ${JSON.stringify(errorBody(error))}\n\n`));
  return new Response(keptAlive(late, encoder.encode(": waiting for the model\n\n"), options.keepAliveMs, clientLeft), {
    headers: sseHeaders,
  });
}

const textStream = (text: string) => new Blob([text]).stream() as ReadableStream<Uint8Array>;

const jsonHeaders = { "content-type": "application/json" };

/** Whether `promise` settles (either way) within `ms`; a rejection is left for the caller to read. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<"settled" | "late"> {
  promise.catch(() => undefined);
  let deadline: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"late">((resolve) => (deadline = setTimeout(() => resolve("late"), ms)));
  const outcome = await Promise.race([
    promise.then(
      () => "settled" as const,
      () => "settled" as const,
    ),
    timedOut,
  ]);
  clearTimeout(deadline);
  return outcome;
}

/** An upstream's answer as our response: the whole completion as JSON, or its chunks as SSE. */
export function respondForwarded(
  forwarded: Forwarded,
  requestId: string,
  controller: AbortController,
  named: boolean,
): Response {
  if (forwarded.kind === "whole") return jsonResponse(forwarded.body);
  const stream = sseStream({
    named,
    events: forwarded.events,
    onError: (error) => toApiError(error, requestId).toJSON(),
    onCancel: () => controller.abort(new DOMException("The client went away.", "AbortError")),
  });
  return new Response(stream, { headers: sseHeaders });
}

/** An abort controller that follows the client: `request.signal` aborts it. */
export function abortWith(request: Request): AbortController {
  const controller = new AbortController();
  const signal = request.signal as AbortSignal | undefined;
  if (signal?.aborted) controller.abort(signal.reason);
  signal?.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}

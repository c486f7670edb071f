/**
 * Turns a running generation into a Response, streamed (SSE) or whole (JSON).
 *
 * Both wait for the first part before answering, so that model loading, prefill and the
 * engine's refusals still get their own status code; after it the response is committed and
 * the body follows as the generation goes on. But a service worker must settle `respondWith`
 * within minutes, and a first request on a real device may download gigabytes first. So if the
 * first part has not come within `graceMs`, the response is committed anyway (200) and kept
 * alive until it does: SSE with comment lines, JSON with leading whitespace (valid JSON). A
 * failure after that can only be reported in the body, as OpenAI's error object.
 */
import { toApiError } from "../errors.js";
import type { ChoicePart, Generation } from "./generation.js";
import type { RouteContext } from "./router.js";
import { sseHeaders, sseStream } from "./sse.js";

const encoder = new TextEncoder();

export interface RespondOptions {
  /** How long to wait for the first part before committing the response. */
  graceMs: number;
  /** How often to send a keep-alive once committed and still waiting. */
  keepAliveMs: number;
}

export const defaultRespondOptions: RespondOptions = { graceMs: 30_000, keepAliveMs: 10_000 };

/** Replays `first` (already taken from `source`), then the rest of `source`. */
async function* replay(first: IteratorResult<ChoicePart>, source: AsyncGenerator<ChoicePart>): AsyncGenerator<ChoicePart> {
  try {
    if (first.done) return;
    yield first.value;
    yield* source;
  } finally {
    await source.return(undefined);
  }
}

/** A body that sends `ping` every `every` ms until `ready` settles, then the stream it yields. */
function keptAlive(ready: Promise<ReadableStream<Uint8Array>>, ping: Uint8Array, every: number, onCancel: () => void): ReadableStream<Uint8Array> {
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
  context: RouteContext,
  controller: AbortController,
  generation: Generation,
  stream: boolean,
  toEvents: (generation: Generation) => AsyncGenerator<Event>,
  toBody: (generation: Generation) => Promise<unknown>,
  options: RespondOptions = defaultRespondOptions,
): Promise<Response> {
  const clientLeft = () => controller.abort(new DOMException("The client went away.", "AbortError"));
  const errorBody = (error: unknown) => toApiError(error, context.requestId).toJSON();
  const first = generation.parts.next();
  // Keeps a failure before the deadline from being reported as unhandled.
  first.catch(() => undefined);
  const running = first.then((value): Generation => ({ ...generation, parts: replay(value, generation.parts) }));

  const body = (ready: Generation): ReadableStream<Uint8Array> => {
    if (stream) return sseStream({ events: toEvents(ready), onError: errorBody, onCancel: clientLeft });
    let cancelled = false;
    return new ReadableStream<Uint8Array>({
      async start(output) {
        let json: unknown;
        try {
          json = await toBody(ready);
        } catch (error) {
          json = errorBody(error);
        }
        if (cancelled) return;
        output.enqueue(encoder.encode(JSON.stringify(json)));
        output.close();
      },
      cancel() {
        cancelled = true;
        clientLeft();
      },
    });
  };
  const headers = stream ? sseHeaders : { "content-type": "application/json" };

  let deadline: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"late">((resolve) => (deadline = setTimeout(() => resolve("late"), options.graceMs)));
  const outcome = await Promise.race([running.then(() => "ready" as const, () => "ready" as const), timedOut]);
  clearTimeout(deadline);
  if (outcome === "ready") return new Response(body(await running), { headers });

  // Committed: from here on a failure travels in the body.
  const late = running.then(body, (error: unknown) => {
    const failure = stream ? `data: ${JSON.stringify(errorBody(error))}\n\n` : JSON.stringify(errorBody(error));
    return new Blob([failure]).stream() as ReadableStream<Uint8Array>;
  });
  const ping = encoder.encode(stream ? ": waiting for the model\n\n" : " ");
  return new Response(keptAlive(late, ping, options.keepAliveMs, clientLeft), { headers });
}

/** An abort controller that follows the client: `request.signal` aborts it. */
export function abortWith(request: Request): AbortController {
  const controller = new AbortController();
  const signal = request.signal as AbortSignal | undefined;
  if (signal?.aborted) controller.abort(signal.reason);
  signal?.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}

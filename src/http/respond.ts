/**
 * Turns a running generation into a Response, streamed (SSE) or whole (JSON).
 *
 * Both wait for the first part before answering: model loading, prefill and the engine's
 * refusals all come before it, so they still get their own status code. After it the response
 * is committed, and the body follows as the generation goes on. For JSON that matters too: a
 * service worker must settle `respondWith` within minutes, and a long generation on a slow
 * device can take longer than that.
 */
import { toApiError } from "../errors.js";
import { primed, type Generation } from "./generation.js";
import type { RouteContext } from "./router.js";
import { sseHeaders, sseStream } from "./sse.js";

const encoder = new TextEncoder();

export async function respond<Event>(
  context: RouteContext,
  controller: AbortController,
  generation: Generation,
  stream: boolean,
  toEvents: (generation: Generation) => AsyncGenerator<Event>,
  toBody: (generation: Generation) => Promise<unknown>,
): Promise<Response> {
  const running: Generation = { ...generation, parts: await primed(generation.parts) };
  const clientLeft = () => controller.abort(new DOMException("The client went away.", "AbortError"));
  if (stream) {
    const body = sseStream({ events: toEvents(running), onError: (error) => toApiError(error, context.requestId).toJSON(), onCancel: clientLeft });
    return new Response(body, { headers: sseHeaders });
  }
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    async start(stream) {
      let json: unknown;
      try {
        json = await toBody(running);
      } catch (error) {
        // Past the first part the status is sent; a late failure can only be the body.
        json = toApiError(error, context.requestId).toJSON();
      }
      if (cancelled) return;
      stream.enqueue(encoder.encode(JSON.stringify(json)));
      stream.close();
    },
    cancel() {
      cancelled = true;
      clientLeft();
    },
  });
  return new Response(body, { headers: { "content-type": "application/json" } });
}

/** An abort controller that follows the client: `request.signal` aborts it. */
export function abortWith(request: Request): AbortController {
  const controller = new AbortController();
  const signal = request.signal as AbortSignal | undefined;
  if (signal?.aborted) controller.abort(signal.reason);
  signal?.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}

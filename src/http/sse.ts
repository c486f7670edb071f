/**
 * The one module that writes server-sent events: `data: <json>` frames, then `data: [DONE]`.
 * An error after the first byte cannot change the status, so it is sent as an `error` frame,
 * which the openai SDK raises as an APIError.
 */
import type { ErrorBody } from "../errors.js";

const encoder = new TextEncoder();

export function frame(data: unknown): Uint8Array {
  return encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
}

export interface SseSource {
  events: AsyncIterator<unknown>;
  /** Turns a failure in mid-stream into the error body to send. */
  onError: (error: unknown) => ErrorBody;
  /** The reader went away: stop producing (the events are then drained, not sent). */
  onCancel: () => void;
}

async function drain(events: AsyncIterator<unknown>): Promise<void> {
  try {
    for (let next = await events.next(); !next.done; next = await events.next());
  } catch {
    // The reader is gone; a late failure has nobody to be reported to.
  }
}

export function sseStream(source: SseSource): ReadableStream<Uint8Array> {
  let finished = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (finished) return;
      try {
        const next = await source.events.next();
        if (next.done) {
          finished = true;
          controller.enqueue(frame("[DONE]"));
          controller.close();
          return;
        }
        controller.enqueue(frame(next.value));
      } catch (error) {
        finished = true;
        controller.enqueue(frame(source.onError(error)));
        controller.close();
      }
    },
    cancel() {
      finished = true;
      source.onCancel();
      // Not return(): that would close the engine at its current yield, and it would never
      // send the final part that reports what it produced. Aborted, it ends within a token;
      // drain it so its usage is counted and the engine is free only once it has stopped.
      void drain(source.events);
    },
  });
}

export const sseHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
} as const;

/**
 * Reads server-sent events as the spec frames them, whatever the sender's chunking: lines end in
 * LF, CRLF or CR; `data:` lines of one event join with LF; comments and other fields are
 * skipped. Yields each event's data.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      // A trailing CR may be half of a CRLF still in flight.
      const lines = buffered.split(/\r\n|\n|\r(?!$)/);
      buffered = lines.pop() ?? "";
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
    if (buffered.startsWith("data:")) data.push(buffered.slice(buffered.startsWith("data: ") ? 6 : 5));
    if (data.length) yield data.join("\n");
  } finally {
    reader.releaseLock();
  }
}

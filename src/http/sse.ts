/**
 * The one module that writes server-sent events: `data: <json>` frames, then `data: [DONE]`.
 * An error after the first byte cannot change the status, so it is sent as an `error` frame,
 * which the openai SDK raises as an APIError. A reader that falls behind gets the text that
 * waited merged into one frame; one that keeps up gets every chunk as it comes.
 *
 * The Responses API frames its events otherwise (`named`): each under `event: <its type>`, an
 * error as its `error` event, and no `[DONE]`.
 */
import type { ErrorBody } from "../core/errors/api.js";

const encoder = new TextEncoder();

/** One event's text: `data: <json>` (or a bare string such as `[DONE]`), then a blank line. */
const frameText = (data: unknown) => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;

/** A Responses API event's text: its type named, then its data. */
const namedFrameText = (data: unknown) => `event: ${(data as { type: string }).type}\n${frameText(data)}`;

/** The Responses API's error event for a failure after `sequence` events. */
function errorEvent(body: ErrorBody, sequence: number) {
  const { code, message, param } = body.error;
  return { type: "error", code, message, param, sequence_number: sequence };
}

export function frame(data: unknown): Uint8Array {
  return encoder.encode(frameText(data));
}

export interface SseSource {
  events: AsyncIterator<unknown>;
  /** Turns a failure in mid-stream into the error body to send. */
  onError: (error: unknown) => ErrorBody;
  /** The reader went away: stop producing (the events are then drained, not sent). */
  onCancel: () => void;
  /** The Responses API's framing (events named by their `type`, no `[DONE]`). */
  named?: boolean;
}

/**
 * Reads `events` ahead of a slow reader: what the producer yields while the reader is busy
 * waits here (up to `limit`), and the reader's next pull takes all of it at once. A reader that
 * is already waiting gets each event the moment it comes, so no token is held back.
 */
class ReadAhead {
  #queue: IteratorResult<unknown>[] = [];
  #failure: { error: unknown } | undefined;
  #wake: (() => void) | undefined;
  #room: (() => void) | undefined;
  #discarding = false;

  constructor(events: AsyncIterator<unknown>, limit: number) {
    void this.#pump(events, limit);
  }

  async #pump(events: AsyncIterator<unknown>, limit: number): Promise<void> {
    try {
      for (;;) {
        while (this.#queue.length >= limit && !this.#discarding)
          await new Promise<void>((resolve) => (this.#room = resolve));
        const next = await events.next();
        if (!this.#discarding) this.#queue.push(next);
        this.#signal();
        if (next.done) return;
      }
    } catch (error) {
      // After the reader went away, a late failure has nobody to be reported to.
      if (!this.#discarding) this.#failure = { error };
      this.#signal();
    }
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Every result waiting, at least one; the failure once nothing is left before it. */
  async take(): Promise<IteratorResult<unknown>[]> {
    while (this.#queue.length === 0 && !this.#failure) await new Promise<void>((resolve) => (this.#wake = resolve));
    if (this.#queue.length === 0) throw this.#failure!.error;
    const taken = this.#queue;
    this.#queue = [];
    const room = this.#room;
    this.#room = undefined;
    room?.();
    return taken;
  }

  /**
   * The reader went away: the rest is read and dropped. Not return(): that would close the
   * engine at its current yield, and it would never send the final part that reports what it
   * produced. Aborted, it ends within a token; reading it to its end counts its usage and frees
   * the engine only once it has stopped.
   */
  discard(): void {
    this.#discarding = true;
    this.#queue = [];
    this.#room?.();
  }
}

type TextChoice = {
  index: number;
  delta?: Record<string, unknown>;
  text?: unknown;
  logprobs?: unknown;
  finish_reason?: unknown;
};
type Chunk = { choices?: TextChoice[]; usage?: unknown };

/** The text a chunk adds and nothing else (one choice, no role, tool call, log probabilities, finish or usage), or null. */
function plainText(event: unknown): { choice: TextChoice; text: string } | null {
  const chunk = event as Chunk | null;
  if (typeof chunk !== "object" || chunk === null || chunk.usage != null || chunk.choices?.length !== 1) return null;
  const choice = chunk.choices[0]!;
  if (choice.finish_reason != null || choice.logprobs != null) return null;
  if (choice.delta !== undefined) {
    const keys = Object.keys(choice.delta);
    return keys.length === 1 && keys[0] === "content" && typeof choice.delta.content === "string"
      ? { choice, text: choice.delta.content }
      : null;
  }
  return typeof choice.text === "string" ? { choice, text: choice.text } : null;
}

/**
 * Two consecutive chunks of plain text for the same choice as one (chat's `delta.content`, a
 * legacy completion's `text`), or null when either carries anything else: a reader that fell
 * behind gets what waited in one frame, with every character, in order.
 */
export function mergeTextChunks(first: unknown, second: unknown): unknown {
  const a = plainText(first);
  const b = plainText(second);
  if (!a || !b || a.choice.index !== b.choice.index) return null;
  const text = a.text + b.text;
  const choice = a.choice.delta !== undefined ? { ...a.choice, delta: { content: text } } : { ...a.choice, text };
  return { ...(first as object), choices: [choice] };
}

/** The frames for what waited, as one write: a Responses API stream's each named, a chat stream's text merged where it can be. */
function framesOf(
  results: IteratorResult<unknown>[],
  named: boolean,
): { bytes: Uint8Array; done: boolean; count: number } {
  if (named) {
    const events = results.filter((result) => !result.done).map((result) => result.value);
    const done = events.length < results.length;
    return { bytes: encoder.encode(events.map(namedFrameText).join("")), done, count: events.length };
  }
  let text = "";
  let pending: unknown;
  let done = false;
  for (const result of results) {
    if (result.done) {
      done = true;
      break;
    }
    const merged = pending === undefined ? null : mergeTextChunks(pending, result.value);
    if (merged) pending = merged;
    else {
      if (pending !== undefined) text += frameText(pending);
      pending = result.value;
    }
  }
  if (pending !== undefined) text += frameText(pending);
  if (done) text += frameText("[DONE]");
  return { bytes: encoder.encode(text), done, count: 0 };
}

/** How many events may wait for a reader that is behind before the producer is paused. */
const readAheadLimit = 256;

export function sseStream(source: SseSource): ReadableStream<Uint8Array> {
  let finished = false;
  let sent = 0;
  const named = source.named === true;
  const ahead = new ReadAhead(source.events, readAheadLimit);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (finished) return;
      let results: IteratorResult<unknown>[];
      try {
        results = await ahead.take();
      } catch (error) {
        finished = true;
        const body = source.onError(error);
        controller.enqueue(encoder.encode(named ? namedFrameText(errorEvent(body, sent)) : frameText(body)));
        controller.close();
        return;
      }
      if (finished) return;
      const { bytes, done, count } = framesOf(results, named);
      sent += count;
      controller.enqueue(bytes);
      if (done) {
        finished = true;
        controller.close();
      }
    },
    cancel() {
      finished = true;
      source.onCancel();
      ahead.discard();
    },
  });
}

export const sseHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
} as const;

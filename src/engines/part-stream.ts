/**
 * A generation's parts over a MessagePort, between threads: a host page's engine to the service
 * worker (src/engines/page-hosted.ts), and llama.cpp's Worker to whoever asked for the
 * generation, a page or, through a page that handed the port on, the service worker itself.
 *
 * Protocol: the producer posts `{part}` messages, the last a `finish` part, or `{error}` instead
 * of the rest; the reader posts `{abort: true}` to stop it, and the producer still ends with a
 * `finish` part. Errors cross as plain data: an EngineError keeps its kind.
 */
import { EngineError, type EngineErrorKind } from "../core/errors/engine.js";
import type { GenerationPart } from "./contract.js";

export interface WireError {
  kind: EngineErrorKind | null;
  message: string;
  retryAfterSeconds?: number;
}

export type PartMessage = { part: GenerationPart } | { error: WireError };

/** What a reader posts to stop the producer. */
export interface AbortMessage {
  abort: true;
}

export function toWireError(error: unknown): WireError {
  if (error instanceof EngineError)
    return {
      kind: error.kind,
      message: error.message,
      ...(error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : {}),
    };
  return { kind: null, message: error instanceof Error ? error.message : String(error) };
}

export function fromWireError(error: WireError): Error {
  return error.kind
    ? new EngineError(
        error.kind,
        error.message,
        error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : {},
      )
    : new Error(error.message);
}

/**
 * The reading end: the messages of any number of ports (the parts' own, and any port a failure
 * may be reported on), read in order as parts until a `finish` part or an error.
 */
export class PartInbox {
  readonly #messages: PartMessage[] = [];
  #wake: (() => void) | undefined;

  /** Takes every message that comes on `port` from now on. */
  listen(port: MessagePort): this {
    port.onmessage = (event: MessageEvent<PartMessage>) => this.push(event.data);
    return this;
  }

  push(message: PartMessage): void {
    this.#messages.push(message);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  fail(error: unknown): void {
    this.push({ error: toWireError(error) });
  }

  /** The parts, through the `finish` part; an error message is thrown. */
  async *parts(): AsyncGenerator<GenerationPart> {
    for (;;) {
      const message =
        this.#messages.shift() ??
        (await new Promise<void>((resolve) => (this.#wake = resolve)), this.#messages.shift());
      if (!message) continue;
      if ("error" in message) throw fromWireError(message.error);
      yield message.part;
      if (message.part.type === "finish") return;
    }
  }
}

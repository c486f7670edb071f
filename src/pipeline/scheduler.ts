import { EngineError } from "../core/errors/engine.js";

/**
 * One engine, many tabs: generations run one at a time, first come first served.
 * At most `maxQueued` requests wait; one more is refused at once rather than left hanging.
 * Background work (a vector store's indexing) waits behind every request, so a request waits
 * for at most the one background step running.
 */
export class Scheduler {
  readonly maxQueued: number;
  #running = false;
  readonly #waiting: { start: () => void; reject: (error: unknown) => void }[] = [];
  readonly #background: { start: () => void; reject: (error: unknown) => void }[] = [];

  constructor(options: { maxQueued: number }) {
    this.maxQueued = options.maxQueued;
  }

  get queued(): number {
    return this.#waiting.length;
  }

  get busy(): boolean {
    return this.#running;
  }

  /** Resolves with a release function once it is this caller's turn; `background` work's turn comes after every request's. */
  acquire(signal: AbortSignal, priority: "request" | "background" = "request"): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (!this.#running) {
      this.#running = true;
      return Promise.resolve(this.#releaser());
    }
    const queue = priority === "background" ? this.#background : this.#waiting;
    if (priority === "request" && this.#waiting.length >= this.maxQueued) {
      return Promise.reject(
        new EngineError(
          "busy",
          `The engine is busy: ${this.#waiting.length} requests are already waiting (the limit is ${this.maxQueued}). Retry shortly.`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        start: () => {
          signal.removeEventListener("abort", onAbort);
          resolve(this.#releaser());
        },
        reject,
      };
      const onAbort = () => {
        const index = queue.indexOf(waiter);
        if (index >= 0) queue.splice(index, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      queue.push(waiter);
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift() ?? this.#background.shift();
      if (next) next.start();
      else this.#running = false;
    };
  }
}

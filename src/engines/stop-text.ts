/**
 * Stop sequences over streamed text, as OpenAI applies them: the reply ends before the first
 * stop sequence, which is never sent, and text that may be the start of one is held back until
 * the next piece settles it.
 */

/** How many leading characters of `text` can be sent without revealing the start of a stop sequence. */
function safeLength(text: string, stops: readonly string[]): number {
  let holdBack = 0;
  for (const stop of stops) {
    for (let length = Math.min(stop.length - 1, text.length); length > holdBack; length--) {
      if (text.endsWith(stop.slice(0, length))) {
        holdBack = length;
        break;
      }
    }
  }
  return text.length - holdBack;
}

function firstStop(text: string, stops: readonly string[]): number {
  let first = -1;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  return first;
}

/**
 * Linear in the reply: it searches only the text it holds back (shorter than the longest stop
 * sequence) and the newest piece, never the whole reply again.
 */
export class StopScanner {
  readonly #stops: readonly string[];
  #held = "";

  constructor(stops: readonly string[]) {
    this.#stops = stops.filter((stop) => stop.length > 0);
  }

  /** The text that may be sent now, and whether a stop sequence ended the reply. */
  push(piece: string): { text: string; stopped: boolean } {
    const text = this.#held + piece;
    const stopAt = firstStop(text, this.#stops);
    if (stopAt >= 0) {
      this.#held = "";
      return { text: text.slice(0, stopAt), stopped: true };
    }
    const safe = safeLength(text, this.#stops);
    this.#held = text.slice(safe);
    return { text: text.slice(0, safe), stopped: false };
  }

  /** What was held back, once the reply ended without a stop sequence. */
  flush(): string {
    const rest = this.#held;
    this.#held = "";
    return rest;
  }
}

/**
 * An upstream's stream, read as a client reads one (src/http/sse.ts writes ours): server-sent
 * events as the spec frames them, whatever the sender's chunking. Lines end in LF, CRLF or CR;
 * `data:` lines of one event join with LF; comments and other fields are skipped. Yields each
 * event's data.
 *
 * An upstream is input like any other: each piece it sends is scanned once, never the line so
 * far again (a line sent a byte at a time stays linear), and an event may hold at most
 * `maxEventCharacters`, so one that never ends cannot fill the worker's memory.
 */
import { ServiceUnavailableError } from "../../core/errors/api.js";

/** Far above any chunk a completion needs (its text is bounded by the model's window). */
const maxEventCharacters = 16 * 2 ** 20;

/** `sender` names who sent the stream in the error an oversized event gets. */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
  { sender = "The sender", limit = maxEventCharacters }: { sender?: string; limit?: number } = {},
): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const event = new EventBuilder(sender, limit);
  let line = "";
  /** The last piece ended in CR: an LF starting the next one is the rest of that CRLF. */
  let afterCarriageReturn = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      let start: number = afterCarriageReturn && text.startsWith("\n") ? 1 : 0;
      afterCarriageReturn = false;
      const lineEnd = /\r\n|\n|\r/g;
      lineEnd.lastIndex = start;
      for (let match = lineEnd.exec(text); match; match = lineEnd.exec(text)) {
        const ended = event.take(line + text.slice(start, match.index));
        if (ended !== undefined) yield ended;
        line = "";
        start = match.index + match[0].length;
        afterCarriageReturn = match[0] === "\r" && start === text.length;
      }
      line += text.slice(start);
      event.check(line.length);
    }
    const last = event.take(line, true);
    if (last !== undefined) yield last;
  } finally {
    // Read to its end, stopped by the reader (`[DONE]`) or refused: nothing more is taken from it.
    await reader.cancel().catch(() => undefined);
  }
}

/** One event's `data:` lines as they come, bounded in size. */
class EventBuilder {
  #data: string[] = [];
  #size = 0;
  readonly #sender: string;
  readonly #limit: number;

  constructor(sender: string, limit: number) {
    this.#sender = sender;
    this.#limit = limit;
  }

  /** Takes a whole line; returns the event's data when the line ends it (a blank line, or the stream's end). */
  take(line: string, final = false): string | undefined {
    if (line.startsWith("data:")) {
      const data = line.slice(line.startsWith("data: ") ? 6 : 5);
      this.check(data.length);
      this.#data.push(data);
      this.#size += data.length + 1;
    }
    if ((line !== "" && !final) || this.#data.length === 0) return undefined;
    const ended = this.#data.join("\n");
    this.#data = [];
    this.#size = 0;
    return ended;
  }

  /** Refuses an event (with `pending` characters still to come) over the limit. */
  check(pending: number): void {
    if (this.#size + pending <= this.#limit) return;
    throw new ServiceUnavailableError(
      `${this.#sender} sent a streamed event over ${this.#limit} characters, far more than any completion chunk: the stream was stopped`,
      { code: "upstream_invalid_response" },
    );
  }
}

/**
 * The text of a growing list of token ids, one piece per token, in time linear in the reply.
 * Decoding the whole list again at each token is quadratic; decoding each token alone is wrong
 * (a SentencePiece decoder drops the leading space of the first token it sees, and a character
 * split across byte tokens decodes to U+FFFD). So each step decodes only the newest tokens with
 * the few before them as context, and gives what they add, as Hugging Face's text-generation
 * server streams.
 */
import type { Tokenizer } from "../prompt/tokenizer.js";

export class TokenText {
  readonly #tokenizer: Tokenizer;
  readonly #ids: number[] = [];
  /** Where the context starts; the tokens from here to `#read` were already given as text. */
  #prefix = 0;
  #read = 0;

  constructor(tokenizer: Tokenizer) {
    this.#tokenizer = tokenizer;
  }

  /** Adds `id`; the text it settles, or "" while it ends inside a character. */
  push(id: number): string {
    this.#ids.push(id);
    const before = this.#decode(this.#prefix, this.#read);
    const after = this.#decode(this.#prefix, this.#ids.length);
    // A character is at most 4 bytes: past that many unread tokens, U+FFFD is the text itself.
    const unread = this.#ids.length - this.#read;
    if (after.length <= before.length || (after.endsWith("\uFFFD") && unread < 4)) return "";
    this.#prefix = this.#read;
    this.#read = this.#ids.length;
    return after.slice(before.length);
  }

  /** What is left once no token follows, a character cut short included (as U+FFFD). */
  finish(): string {
    const before = this.#decode(this.#prefix, this.#read);
    const after = this.#decode(this.#prefix, this.#ids.length);
    this.#prefix = this.#read = this.#ids.length;
    return after.slice(before.length);
  }

  #decode(from: number, to: number): string {
    return to > from ? this.#tokenizer.decode(this.#ids.slice(from, to)) : "";
  }
}

/**
 * Reads tool calls out of a reply as it streams, in any family's syntax. The reply is text
 * unless it begins with one of the family's openers; once it does, each call's name is reported
 * when complete and its arguments as they grow, the way OpenAI streams `tool_calls` deltas.
 *
 * Calls are written name first, then arguments (our grammars and the deterministic engine
 * always do), so a "name" key inside the arguments is never mistaken for the next call.
 */
import type { ToolSyntax } from "./templates.js";

export type ToolEvent =
  | { type: "text"; text: string }
  | { type: "call"; index: number; name: string }
  | { type: "arguments"; index: number; fragment: string };

export interface ParsedCall {
  name: string;
  /** The arguments exactly as written: a JSON text, complete unless generation was cut short. */
  arguments: string;
  complete: boolean;
}

const primitivePattern = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)$/;
const whitespace = (character: string) =>
  character === " " || character === "\n" || character === "\r" || character === "\t";

/**
 * Where one JSON value ends, found as its text grows: each character is read once however often
 * `advance` is called, so a reply streamed a token at a time is scanned in linear time.
 */
class JsonValueEnd {
  #index: number;
  #kind: "pending" | "nested" | "primitive" | "invalid" = "pending";
  #start = 0;
  #depth = 0;
  #inString = false;
  #escaped = false;

  constructor(start: number) {
    this.#index = start;
  }

  /** The index just past the value in `text` (which only grows), or -1 if it is not complete yet. */
  advance(text: string): number {
    for (; this.#index < text.length; this.#index++) {
      const character = text[this.#index]!;
      if (this.#kind === "pending") {
        if (whitespace(character)) continue;
        this.#start = this.#index;
        this.#kind = character === "{" || character === "[" || character === '"' ? "nested" : "primitive";
      }
      if (this.#kind === "invalid") return -1;
      if (this.#kind === "primitive") {
        if (!(whitespace(character) || character === "," || character === "}" || character === "]")) continue;
        if (primitivePattern.test(text.slice(this.#start, this.#index))) return this.#index;
        this.#kind = "invalid";
        return -1;
      }
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (character === "\\") this.#escaped = true;
        else if (character === '"') {
          this.#inString = false;
          if (this.#depth === 0) return ++this.#index;
        }
      } else if (character === '"') this.#inString = true;
      else if (character === "{" || character === "[") this.#depth++;
      else if (character === "}" || character === "]") {
        this.#depth--;
        if (this.#depth === 0) return ++this.#index;
      }
    }
    return -1;
  }
}

/** A call found in the reply: its name, and where its arguments start (null until their key has come) and end (-1: not yet). */
interface FoundCall {
  name: string;
  /** Just past the name: where its arguments' key is looked for. */
  nameEnd: number;
  start: number | null;
  end: number;
  scanner: JsonValueEnd | null;
  /** How much of the arguments has been reported. */
  sent: number;
}

export class ToolCallParser {
  readonly #syntax: ToolSyntax;
  readonly #argumentsPattern: RegExp;
  #buffer = "";
  #mode: "undecided" | "text" | "calls" = "undecided";
  /** Where the reply's first non-blank character is, while undecided: blanks are read once. */
  #leading = 0;
  /** Where the next call's search starts: past the last complete call. */
  #from = 0;
  readonly #found: FoundCall[] = [];

  constructor(syntax: ToolSyntax) {
    this.#syntax = syntax;
    this.#argumentsPattern = new RegExp(`"${syntax.argumentsKey}"\\s*:\\s*`, "y");
  }

  get calls(): readonly ParsedCall[] {
    return this.#found.map((call) => ({
      name: call.name,
      arguments:
        call.start === null ? "" : this.#buffer.slice(call.start, call.end === -1 ? this.#buffer.length : call.end),
      complete: call.end !== -1,
    }));
  }

  get mode(): "undecided" | "text" | "calls" {
    return this.#mode;
  }

  push(delta: string): ToolEvent[] {
    if (this.#mode === "text") return delta ? [{ type: "text", text: delta }] : [];
    this.#buffer += delta;
    if (this.#mode === "undecided") {
      while (this.#leading < this.#buffer.length && /\s/.test(this.#buffer[this.#leading]!)) this.#leading++;
      if (this.#leading === this.#buffer.length) return [];
      // Undecided, the text past the blanks is never longer than the longest opener.
      const trimmed = this.#buffer.slice(this.#leading);
      const openers = this.#syntax.openers;
      if (openers.some((opener) => trimmed.startsWith(opener))) {
        this.#mode = "calls";
        this.#from = this.#leading;
      } else if (openers.some((opener) => opener.startsWith(trimmed))) {
        return [];
      } else {
        this.#mode = "text";
        return [{ type: "text", text: this.#buffer }];
      }
    }
    return this.#update();
  }

  /** The reply ended: whatever was still undecided was text. */
  end(): ToolEvent[] {
    if (this.#mode !== "undecided") return [];
    this.#mode = "text";
    return this.#buffer ? [{ type: "text", text: this.#buffer }] : [];
  }

  /** The next complete name past the last complete call (a few characters on: under our grammars a call opens with its name). */
  #nextName(): FoundCall | undefined {
    const namePattern = /"name"\s*:\s*"((?:[^"\\]|\\.)*)"/y;
    const position = this.#buffer.indexOf('"name"', this.#from);
    if (position === -1) return undefined;
    namePattern.lastIndex = position;
    const name = namePattern.exec(this.#buffer);
    if (!name) return undefined;
    return {
      name: JSON.parse(`"${name[1] ?? ""}"`) as string,
      nameEnd: position + name[0].length,
      start: null,
      end: -1,
      scanner: null,
      sent: 0,
    };
  }

  /** Where the call's arguments start, once their key has come after its name. */
  #findArguments(call: FoundCall): void {
    if (call.start !== null) return;
    // The key follows the name after a comma and blanks; it is searched from there each time until it comes.
    const key = this.#buffer.indexOf(`"${this.#syntax.argumentsKey}"`, call.nameEnd);
    if (key === -1) return;
    this.#argumentsPattern.lastIndex = key;
    const match = this.#argumentsPattern.exec(this.#buffer);
    if (!match || key + match[0].length === this.#buffer.length) return;
    call.start = key + match[0].length;
    call.scanner = new JsonValueEnd(call.start);
  }

  #update(): ToolEvent[] {
    const events: ToolEvent[] = [];
    for (;;) {
      let call = this.#found.at(-1);
      if (!call || call.end !== -1) {
        const next = this.#nextName();
        if (!next) break;
        this.#found.push(next);
        events.push({ type: "call", index: this.#found.length - 1, name: next.name });
        call = next;
      }
      this.#findArguments(call);
      if (call.start === null || call.scanner === null) break;
      const end = call.scanner.advance(this.#buffer);
      const reached = end === -1 ? this.#buffer.length : end;
      if (reached - call.start > call.sent) {
        events.push({
          type: "arguments",
          index: this.#found.length - 1,
          fragment: this.#buffer.slice(call.start + call.sent, reached),
        });
        call.sent = reached - call.start;
      }
      if (end === -1) break;
      call.end = end;
      this.#from = end;
    }
    return events;
  }
}

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

/**
 * The longest text a name's value may take while still open: a function name is at most 64
 * characters, each at most a 6-character escape, with room for blanks around its colon.
 */
const longestNameText = 512;

const primitivePattern = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)$/;
const whitespace = (character: string) =>
  character === " " || character === "\n" || character === "\r" || character === "\t";

/**
 * Where one JSON value ends, read a piece at a time: each character is read once, and no piece is
 * kept but a primitive's own text, so a reply streamed a token at a time is scanned in linear time.
 */
class JsonValueEnd {
  #kind: "pending" | "nested" | "primitive" | "invalid" = "pending";
  #primitive = "";
  #depth = 0;
  #inString = false;
  #escaped = false;

  /** How much of `piece` the value takes (all of it while the value goes on), and whether it ended there. */
  advance(piece: string): { taken: number; complete: boolean } {
    /** Where the primitive's text starts in this piece. */
    let from = 0;
    for (let index = 0; index < piece.length; index++) {
      const character = piece[index]!;
      if (this.#kind === "pending") {
        if (whitespace(character)) continue;
        from = index;
        this.#kind = character === "{" || character === "[" || character === '"' ? "nested" : "primitive";
      }
      if (this.#kind === "invalid") break;
      if (this.#kind === "primitive") {
        if (!(whitespace(character) || character === "," || character === "}" || character === "]")) continue;
        this.#primitive += piece.slice(from, index);
        if (primitivePattern.test(this.#primitive)) return { taken: index, complete: true };
        this.#kind = "invalid";
        break;
      }
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (character === "\\") this.#escaped = true;
        else if (character === '"') {
          this.#inString = false;
          if (this.#depth === 0) return { taken: index + 1, complete: true };
        }
      } else if (character === '"') this.#inString = true;
      else if (character === "{" || character === "[") this.#depth++;
      else if (character === "}" || character === "]") {
        this.#depth--;
        if (this.#depth === 0) return { taken: index + 1, complete: true };
      }
    }
    if (this.#kind === "primitive") this.#primitive += piece.slice(from);
    return { taken: piece.length, complete: false };
  }
}

/** A call read from the reply: its name, and its arguments as far as they have come. */
interface OpenCall {
  name: string;
  arguments: string;
  complete: boolean;
}

/**
 * What the reader waits for next: a call's name, its arguments' key, the colon after the key,
 * or the arguments' value.
 */
type Phase =
  { kind: "name" } | { kind: "key" } | { kind: "colon"; colon: boolean } | { kind: "value"; scanner: JsonValueEnd };

export class ToolCallParser {
  readonly #syntax: ToolSyntax;
  readonly #key: string;
  #mode: "undecided" | "text" | "calls" = "undecided";
  /** While undecided: the leading blanks (only ever appended to), then what follows them. */
  #blanks = "";
  #start = "";
  /**
   * The text received and not yet read past. It stays short: each phase drops what it has read
   * (a value's text goes to its call), so no character is searched twice.
   */
  #pending = "";
  #phase: Phase = { kind: "name" };
  readonly #found: OpenCall[] = [];

  constructor(syntax: ToolSyntax) {
    this.#syntax = syntax;
    this.#key = `"${syntax.argumentsKey}"`;
  }

  get calls(): readonly ParsedCall[] {
    return this.#found.map((call) => ({ ...call }));
  }

  get mode(): "undecided" | "text" | "calls" {
    return this.#mode;
  }

  push(delta: string): ToolEvent[] {
    if (this.#mode === "text") return delta ? [{ type: "text", text: delta }] : [];
    if (this.#mode === "calls") {
      this.#pending += delta;
      return this.#update();
    }
    return this.#decide(delta);
  }

  /** The reply ended: whatever was still undecided was text. */
  end(): ToolEvent[] {
    if (this.#mode !== "undecided") return [];
    this.#mode = "text";
    const text = this.#blanks + this.#start;
    return text ? [{ type: "text", text }] : [];
  }

  /** Text or calls, once the first characters past the blanks say (never longer than the longest opener). */
  #decide(delta: string): ToolEvent[] {
    let index = 0;
    if (this.#start === "") {
      while (index < delta.length && /\s/.test(delta[index]!)) index++;
      this.#blanks += delta.slice(0, index);
    }
    this.#start += delta.slice(index);
    if (this.#start === "") return [];
    const openers = this.#syntax.openers;
    if (openers.some((opener) => this.#start.startsWith(opener))) {
      this.#mode = "calls";
      this.#pending = this.#start;
      return this.#update();
    }
    if (openers.some((opener) => opener.startsWith(this.#start))) return [];
    this.#mode = "text";
    return [{ type: "text", text: this.#blanks + this.#start }];
  }

  #update(): ToolEvent[] {
    const events: ToolEvent[] = [];
    while (this.#step(events));
    return events;
  }

  /** Reads what the current phase can; true when it moved on to another phase with text left. */
  #step(events: ToolEvent[]): boolean {
    switch (this.#phase.kind) {
      case "name":
        return this.#readName(events);
      case "key":
        return this.#readKey();
      case "colon":
        return this.#readColon(this.#phase);
      case "value":
        return this.#readValue(this.#phase.scanner, events);
    }
  }

  /**
   * The next call's name (under our grammars a call opens with it). A `"name"` whose value is
   * still open past any function name's length is passed over.
   */
  #readName(events: ToolEvent[]): boolean {
    const position = this.#pending.indexOf('"name"');
    if (position === -1) {
      this.#pending = this.#pending.slice(-('"name"'.length - 1));
      return false;
    }
    this.#pending = this.#pending.slice(position);
    const name = /^"name"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(this.#pending);
    if (!name) {
      if (this.#pending.length <= longestNameText) return false;
      this.#pending = this.#pending.slice(1);
      return true;
    }
    this.#found.push({ name: JSON.parse(`"${name[1] ?? ""}"`) as string, arguments: "", complete: false });
    events.push({ type: "call", index: this.#found.length - 1, name: this.#found.at(-1)!.name });
    this.#pending = this.#pending.slice(name[0].length);
    this.#phase = { kind: "key" };
    return true;
  }

  #readKey(): boolean {
    const position = this.#pending.indexOf(this.#key);
    if (position === -1) {
      this.#pending = this.#pending.slice(-(this.#key.length - 1));
      return false;
    }
    this.#pending = this.#pending.slice(position + this.#key.length);
    this.#phase = { kind: "colon", colon: false };
    return true;
  }

  /** Blanks, a colon, blanks; the key's text with no colon after it is not the key: look again. */
  #readColon(phase: { colon: boolean }): boolean {
    let index = 0;
    for (; index < this.#pending.length; index++) {
      const character = this.#pending[index]!;
      if (whitespace(character)) continue;
      if (character === ":" && !phase.colon) phase.colon = true;
      else break;
    }
    this.#pending = this.#pending.slice(index);
    if (this.#pending === "") return false;
    this.#phase = phase.colon ? { kind: "value", scanner: new JsonValueEnd() } : { kind: "key" };
    return true;
  }

  #readValue(scanner: JsonValueEnd, events: ToolEvent[]): boolean {
    const call = this.#found.at(-1)!;
    const { taken, complete } = scanner.advance(this.#pending);
    const fragment = this.#pending.slice(0, taken);
    this.#pending = this.#pending.slice(taken);
    if (fragment) {
      call.arguments += fragment;
      events.push({ type: "arguments", index: this.#found.length - 1, fragment });
    }
    if (!complete) return false;
    call.complete = true;
    this.#phase = { kind: "name" };
    return true;
  }
}

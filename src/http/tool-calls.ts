/**
 * Reads tool calls out of a reply as it streams, in any family's syntax. The reply is text
 * unless it begins with one of the family's openers; once it does, each call's name is reported
 * when complete and its arguments as they grow, the way OpenAI streams `tool_calls` deltas.
 *
 * Calls are written name first, then arguments (our grammars and the deterministic engine
 * always do), so a "name" key inside the arguments is never mistaken for the next call.
 */
import type { ToolSyntax } from "../templates.js";

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

/** The index just past the JSON value starting at or after `start`, or -1 if it is not complete yet. */
export function jsonValueEnd(text: string, start: number): number {
  let index = start;
  while (index < text.length && /\s/.test(text[index] ?? "")) index++;
  if (index >= text.length) return -1;
  const first = text[index];
  if (first === "{" || first === "[" || first === '"') {
    let depth = 0;
    let inString = false;
    for (; index < text.length; index++) {
      const character = text[index];
      if (inString) {
        if (character === "\\") index++;
        else if (character === '"') {
          inString = false;
          if (depth === 0) return index + 1;
        }
      } else if (character === '"') inString = true;
      else if (character === "{" || character === "[") depth++;
      else if (character === "}" || character === "]") {
        depth--;
        if (depth === 0) return index + 1;
      }
    }
    return -1;
  }
  const primitive = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?=[\s,}\]])/.exec(text.slice(index));
  return primitive ? index + primitive[0].length : -1;
}

export class ToolCallParser {
  readonly #syntax: ToolSyntax;
  #buffer = "";
  #mode: "undecided" | "text" | "calls" = "undecided";
  #bodyStart = 0;
  #calls: ParsedCall[] = [];
  readonly #sentArguments: number[] = [];

  constructor(syntax: ToolSyntax) {
    this.#syntax = syntax;
  }

  get calls(): readonly ParsedCall[] {
    return this.#calls;
  }

  get mode(): "undecided" | "text" | "calls" {
    return this.#mode;
  }

  push(delta: string): ToolEvent[] {
    if (this.#mode === "text") return delta ? [{ type: "text", text: delta }] : [];
    this.#buffer += delta;
    if (this.#mode === "undecided") {
      const trimmed = this.#buffer.trimStart();
      if (trimmed.length === 0) return [];
      const openers = this.#syntax.openers;
      if (openers.some((opener) => trimmed.startsWith(opener))) {
        this.#mode = "calls";
        this.#bodyStart = this.#buffer.length - trimmed.length;
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

  #scan(): ParsedCall[] {
    const text = this.#buffer;
    const calls: ParsedCall[] = [];
    const namePattern = /"name"\s*:\s*"((?:[^"\\]|\\.)*)"/g;
    const argumentsPattern = new RegExp(`"${this.#syntax.argumentsKey}"\\s*:\\s*`, "g");
    let position = this.#bodyStart;
    for (;;) {
      namePattern.lastIndex = position;
      const name = namePattern.exec(text);
      if (!name) break;
      argumentsPattern.lastIndex = name.index + name[0].length;
      const key = argumentsPattern.exec(text);
      const decodedName = JSON.parse(`"${name[1] ?? ""}"`) as string;
      if (!key) {
        calls.push({ name: decodedName, arguments: "", complete: false });
        break;
      }
      const start = key.index + key[0].length;
      const end = jsonValueEnd(text, start);
      calls.push({ name: decodedName, arguments: text.slice(start, end === -1 ? text.length : end), complete: end !== -1 });
      if (end === -1) break;
      position = end;
    }
    return calls;
  }

  #update(): ToolEvent[] {
    const events: ToolEvent[] = [];
    this.#calls = this.#scan();
    this.#calls.forEach((call, index) => {
      if (index >= this.#sentArguments.length) {
        this.#sentArguments.push(0);
        events.push({ type: "call", index, name: call.name });
      }
      const sent = this.#sentArguments[index] ?? 0;
      if (call.arguments.length > sent) {
        events.push({ type: "arguments", index, fragment: call.arguments.slice(sent) });
        this.#sentArguments[index] = call.arguments.length;
      }
    });
    return events;
  }
}

/**
 * Chat templates per family, rendered to the exact prompt text the model sees, with tools in
 * each family's own convention. They count prompt tokens for admission before a model loads, and
 * are the prompt every engine feeds the model (web-llm under a verbatim template). JSON inside
 * prompts is written as Python's `json.dumps` writes it (`src/prompt/python-json.ts`), as the official
 * templates do. `test/unit/prompt/template-goldens.test.ts` renders the official templates (kept in
 * `test/fixtures/templates/`, sources cited there) with a Jinja engine and compares byte for byte.
 *
 * A template writes its control tokens (`<|eot_id|>`, `[INST]`, …) as `Control` parts and
 * everything else, the client's text included, as strings: the rendering is a list of pieces that
 * says which is which, so a control-token string in a message stays text (`encodePrompt` in src/prompt/tokenizer.ts
 * encodes it so), as OpenAI treats it, and can never open or close a turn.
 *
 * Sources:
 * - Llama 3: Meta-Llama-3-8B-Instruct's template. With tools, Llama 3.1's template: its system
 *   header (`Environment: ipython`, knowledge and today's date as 3.1 defaults them), the
 *   definitions in the first user turn, a call as `{"name": …, "parameters": …}`, results in
 *   the `ipython` role. 3.1 allows one call per turn; several are written as a JSON list.
 * - Gemma 2: google/gemma-2-9b-it's template (no system role: it is folded into the first user
 *   turn). Gemma 2 has no tool format; Google's function-calling guide for Gemma describes the
 *   functions in the prompt and asks for a structured reply, here a fenced ```tool_call block
 *   holding `{"name": …, "arguments": …}`.
 * - Mistral v0.3: mistral-common's v3 instruct tokenizer (which Mistral-7B-Instruct-v0.3's
 *   template follows): `[AVAILABLE_TOOLS]…[/AVAILABLE_TOOLS]` before the last user turn, calls
 *   as `[TOOL_CALLS] [{"name": …, "arguments": …, "id": …}]`, results in `[TOOL_RESULTS]`.
 * - ChatML (Qwen2): Qwen2-Instruct's template; with tools, Qwen's Hermes-style layout from
 *   Qwen2.5's template: `<tools>` in the system turn, calls as `<tool_call>{…}</tool_call>`,
 *   results as `<tool_response>` blocks in one user turn.
 */
import type { ModelFamily } from "../catalogue/families.js";
import type { EngineMessage } from "./messages.js";
import type { PromptPiece } from "./tokenizer.js";
import { literal } from "../structured/ebnf.js";
import { pythonJson } from "./python-json.js";
import { nestsTooDeep } from "../core/wire/nesting.js";

export interface ToolSpec {
  name: string;
  description?: string;
  /** A JSON Schema for the arguments object. */
  parameters: Record<string, unknown>;
}

interface CallText {
  name: string;
  /** The arguments, as a JSON value. */
  arguments: unknown;
  id?: string;
}

/** How a family writes tool calls: the text that opens them, and how one or more are written. */
export interface ToolSyntax {
  /** Texts that begin a reply holding calls; a reply that begins with none of them is text. */
  openers: string[];
  /** The key that holds a call's arguments. */
  argumentsKey: "arguments" | "parameters";
  /** The calls as the model writes them. */
  write(calls: readonly CallText[]): string;
  /** The opener, when the family's vocabulary has it as a control token (Mistral's `[TOOL_CALLS]`). */
  control?: string;
  /** Grammar for one or more calls, given the grammar expression of each single call. */
  grammar(call: string, parallel: boolean): string;
  /**
   * Where calls are JSON themselves (Llama's), the openers that tell one from a JSON reply:
   * each call's start up to its arguments, in every spacing the grammar allows.
   */
  openersBeside?(tools: readonly { name: string }[]): string[];
}

/** A control token our template writes; a plain string in a rendering is text. */
class Control {
  constructor(readonly token: string) {}
}

/**
 * An earlier assistant reply written verbatim (text), right after the generation prompt of the
 * turns before it, where the template renders those turns alone as exactly the parts before it.
 * Each template marks these itself, so cutting the prompt at replies is one pass over its parts.
 */
class Reply {
  constructor(readonly text: string) {}
}

type Part = string | Control | Reply;

const control = (token: string) => new Control(token);

const partText = (part: Part) => (typeof part === "string" ? part : part instanceof Control ? part.token : part.text);

/** Adds a piece to `pieces`, joined to the last one where both are text; empty text is dropped. */
function appendPiece(pieces: PromptPiece[], piece: PromptPiece): void {
  if (piece.control) {
    pieces.push({ ...piece });
    return;
  }
  if (piece.text === "") return;
  const last = pieces.at(-1);
  if (last && !last.control) last.text += piece.text;
  else pieces.push({ ...piece });
}

/** Parts as pieces: adjacent text (replies included) joined, empty text dropped. */
function toPieces(parts: readonly Part[]): PromptPiece[] {
  const pieces: PromptPiece[] = [];
  for (const part of parts) appendPiece(pieces, { text: partText(part), control: part instanceof Control });
  return pieces;
}

export function piecesText(pieces: readonly PromptPiece[]): string {
  return pieces.map((piece) => piece.text).join("");
}

/** A JSON text as its value, or the text itself when it is not JSON (or nests too deep to write back). */
function jsonOrText(text: string): unknown {
  // Writing back JSON nested that deep (recursively, as Python's `json.dumps` does) would exhaust the stack.
  if (nestsTooDeep(text)) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function parsedArguments(text: string): unknown {
  return jsonOrText(text || "{}");
}

/** A tool result as mistral-common inserts it: a JSON value when the text is JSON, else the text. */
function parsedContent(text: string): unknown {
  return jsonOrText(text);
}

function callObject(call: CallText, key: "arguments" | "parameters", withId = false): Record<string, unknown> {
  return { name: call.name, [key]: call.arguments, ...(withId && call.id ? { id: call.id } : {}) };
}

/** One call as an object, several as a list: the documented choice where a template allows one call only. */
function oneOrList(calls: readonly CallText[], key: "arguments" | "parameters"): string {
  return pythonJson(calls.length === 1 ? callObject(calls[0]!, key) : calls.map((call) => callObject(call, key)));
}

/** `"," " "?`: a separator the model may write compact or with Python's space. */
const comma = '"," " "?';

const llamaSyntax: ToolSyntax = {
  openers: ["{", "["],
  argumentsKey: "parameters",
  write: (calls) => oneOrList(calls, "parameters"),
  grammar: (call, parallel) => (parallel ? `(${call} | "[" ${call} (${comma} ${call})* "]")` : call),
  openersBeside: (tools) =>
    tools.flatMap((tool) =>
      [":", ": "].flatMap((colon) =>
        [",", ", "].flatMap((separator) => {
          const call = `{"name"${colon}${JSON.stringify(tool.name)}${separator}"parameters"${colon}`;
          return [call, `[${call}`];
        }),
      ),
    ),
};

const gemmaSyntax: ToolSyntax = {
  openers: ["```tool_call\n"],
  argumentsKey: "arguments",
  write: (calls) => "```tool_call\n" + oneOrList(calls, "arguments") + "\n```",
  grammar: (call, parallel) =>
    `${literal("```tool_call\n")} ${parallel ? `(${call} | "[" ${call} (${comma} ${call})* "]")` : call} ${literal("\n```")}`,
};

const mistralSyntax: ToolSyntax = {
  openers: ["[TOOL_CALLS]"],
  argumentsKey: "arguments",
  control: "[TOOL_CALLS]",
  write: (calls) => `[TOOL_CALLS] ${pythonJson(calls.map((call) => callObject(call, "arguments", true)))}`,
  grammar: (call, parallel) => `${literal("[TOOL_CALLS] [")} ${call} ${parallel ? `(${comma} ${call})*` : ""} "]"`,
};

const chatmlSyntax: ToolSyntax = {
  openers: ["<tool_call>"],
  argumentsKey: "arguments",
  write: (calls) =>
    calls.map((call) => `<tool_call>\n${pythonJson(callObject(call, "arguments"))}\n</tool_call>`).join("\n"),
  grammar: (call, parallel) => {
    const one = `${literal("<tool_call>\n")} ${call} ${literal("\n</tool_call>")}`;
    return parallel ? `${one} (${literal("\n")} ${one})*` : one;
  },
};

export const toolSyntax: Record<ModelFamily, ToolSyntax> = {
  llama3: llamaSyntax,
  gemma2: gemmaSyntax,
  mistral: mistralSyntax,
  qwen2: chatmlSyntax,
};

function callsOf(message: EngineMessage): CallText[] {
  return (message.toolCalls ?? []).map((call) => ({
    id: call.id,
    name: call.name,
    arguments: parsedArguments(call.arguments),
  }));
}

/** Calls as the family writes them, its control opener (if any) as a control token. */
function writtenCalls(family: ModelFamily, calls: readonly CallText[]): Part[] {
  const syntax = toolSyntax[family];
  const written = syntax.write(calls);
  return syntax.control && written.startsWith(syntax.control)
    ? [control(syntax.control), written.slice(syntax.control.length)]
    : [written];
}

/** What an assistant turn says: its text (a `Reply` when the template says it is one), then its calls in the family's syntax. */
function assistantParts(family: ModelFamily, message: EngineMessage, reply = false): Part[] {
  const calls = callsOf(message);
  if (calls.length === 0) return [reply && message.content !== "" ? new Reply(message.content) : message.content];
  const written = writtenCalls(family, calls);
  return message.content ? [`${message.content}\n`, ...written] : written;
}

/** Each tool as the templates' `tool | tojson(indent=4)` writes it, followed by a blank line. */
function definitions(tools: readonly ToolSpec[]): string {
  return tools.map((tool) => `${pythonJson({ type: "function", function: tool }, 4)}\n\n`).join("");
}

const llamaHeader = (role: string): Part[] => [
  control("<|start_header_id|>"),
  role,
  control("<|end_header_id|>"),
  "\n\n",
];
const endOfTurn = control("<|eot_id|>");

/**
 * One Llama turn. Calls and results follow Llama 3.1: a call as `{"name": …, "parameters": …}`
 * (the content beside it dropped, as 3.1's template does), a result in the `ipython` role as a
 * JSON string (3.1's template applies `tojson` to it).
 */
function llamaTurn(message: EngineMessage): Part[] {
  if (message.role === "tool") return [...llamaHeader("ipython"), JSON.stringify(message.content), endOfTurn];
  if (message.role === "assistant" && message.toolCalls?.length)
    return [...llamaHeader("assistant"), llamaSyntax.write(callsOf(message)), endOfTurn];
  const text = message.content.trim();
  // Every turn stands alone, so the turns before a reply render as exactly what precedes it.
  const body =
    message.role === "assistant" && text === message.content ? assistantParts("llama3", message, true) : [text];
  return [...llamaHeader(message.role), ...body, endOfTurn];
}

/** Llama 3's template; with tools, Llama 3.1's, which defines them (in the first user turn). */
function llama3(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): Part[] {
  const begin = control("<|begin_of_text|>");
  if (tools.length === 0) return [begin, ...messages.flatMap(llamaTurn), ...llamaHeader("assistant")];
  const system = messages[0]?.role === "system" ? messages[0] : undefined;
  const [first, ...rest] = system ? messages.slice(1) : messages;
  return [
    begin,
    ...llamaHeader("system"),
    `Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n${system?.content.trim() ?? ""}`,
    endOfTurn,
    ...llamaHeader("user"),
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
      'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
      `${definitions(tools)}${first?.content.trim() ?? ""}`,
    endOfTurn,
    ...rest.flatMap(llamaTurn),
    ...llamaHeader("assistant"),
  ];
}

/** Parts with their text trimmed at both ends, as Jinja's `| trim` does to a turn's whole body. */
function trimmed(parts: readonly Part[]): Part[] {
  const result = [...parts];
  const first = result.findIndex((part) => !(typeof part === "string" && part.trim() === ""));
  if (first < 0) return [];
  const last = result.findLastIndex((part) => !(typeof part === "string" && part.trim() === ""));
  const body = result.slice(first, last + 1);
  if (typeof body[0] === "string") body[0] = body[0].trimStart();
  const end = body.length - 1;
  if (typeof body[end] === "string") body[end] = (body[end] as string).trimEnd();
  return body;
}

function gemma2(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): Part[] {
  const system = messages.filter((message) => message.role === "system").map((message) => message.content);
  if (tools.length > 0) {
    system.push(
      "You have access to the following functions. To call one or more of them, reply with only a ```tool_call block holding " +
        '{"name": function name, "arguments": an object of its arguments}, or a list of such objects.\n\n' +
        definitions(tools).trimEnd(),
    );
  }
  const parts: Part[] = [control("<bos>")];
  let pendingSystem = system.length > 0 ? `${system.join("\n\n")}\n\n` : "";
  const lastSystem = messages.findLastIndex((message) => message.role === "system");
  let userTurnWritten = false;
  messages.forEach((message, index) => {
    if (message.role === "system") return;
    const role = message.role === "assistant" ? "model" : "user";
    // The turns before a reply render alone as what precedes it, unless a later system message
    // changes the first user turn (which holds them all) and that turn comes before the reply.
    const appendOnly = !userTurnWritten || index > lastSystem;
    const body: Part[] =
      message.role === "tool"
        ? [`\`\`\`tool_result\n${pythonJson({ call_id: message.toolCallId, content: message.content })}\n\`\`\``]
        : role === "model"
          ? assistantParts("gemma2", message, appendOnly && message.content.trim() === message.content)
          : [message.content];
    parts.push(
      control("<start_of_turn>"),
      `${role}\n${role === "user" ? pendingSystem : ""}`,
      ...trimmed(body),
      control("<end_of_turn>"),
      "\n",
    );
    if (role === "user") [pendingSystem, userTurnWritten] = ["", true];
  });
  return [...parts, control("<start_of_turn>"), "model\n"];
}

/** The end of a Mistral reply's text: its trailing spaces dropped, in linear time (a regex such as / +$/ is quadratic on runs of spaces). */
function withoutTrailingSpaces(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 32) end--;
  return text.slice(0, end);
}

/**
 * mistral-common's v3 instruct format: the system prompt before the last user message, the
 * tools (as `Tool.model_dump()`: a missing description is "") right before it, calls with their
 * ids, results as `{"content": value, "call_id": id}` where a JSON result is a value.
 */
function mistral(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): Part[] {
  const system = messages
    .filter((message) => message.role === "system")
    .map((message) => message.content)
    .join("\n\n");
  const turns = messages.filter((message) => message.role !== "system");
  const lastUser = turns.map((message) => message.role).lastIndexOf("user");
  const available = tools.map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description ?? "", parameters: tool.parameters },
  }));
  const parts: Part[] = [control("<s>")];
  turns.forEach((message, index) => {
    if (message.role === "user") {
      if (index === lastUser && tools.length > 0)
        parts.push(control("[AVAILABLE_TOOLS]"), ` ${pythonJson(available)}`, control("[/AVAILABLE_TOOLS]"));
      const prefix = index === lastUser && system ? `${system}\n\n` : "";
      parts.push(control("[INST]"), ` ${prefix}${message.content}`, control("[/INST]"));
    } else if (message.role === "assistant") {
      const calls = callsOf(message);
      parts.push(
        ...(calls.length > 0 ? writtenCalls("mistral", calls) : [` ${withoutTrailingSpaces(message.content)}`]),
        control("</s>"),
      );
    } else {
      parts.push(
        control("[TOOL_RESULTS]"),
        ` ${pythonJson({ content: parsedContent(message.content), call_id: message.toolCallId })}`,
        control("[/TOOL_RESULTS]"),
      );
    }
  });
  return parts;
}

/** Qwen2's ChatML; with tools, Qwen's Hermes-style layout (Qwen2.5's template), consecutive results in one user turn. */
function chatml(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): Part[] {
  const toolsText =
    tools.length === 0
      ? ""
      : "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" +
        tools.map((tool) => `\n${pythonJson({ type: "function", function: tool })}`).join("") +
        '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';
  const start = control("<|im_start|>");
  const end = control("<|im_end|>");
  const first = messages[0];
  const parts: Part[] = [
    start,
    `system\n${first?.role === "system" ? first.content : "You are a helpful assistant."}${toolsText}`,
    end,
    "\n",
  ];
  const rest = first?.role === "system" ? messages.slice(1) : messages;
  rest.forEach((message, index) => {
    if (message.role !== "tool") {
      parts.push(
        start,
        `${message.role}\n`,
        // Every turn stands alone (the system turn takes only the first message), so the turns
        // before a reply render as exactly what precedes it.
        ...(message.role === "assistant" ? assistantParts("qwen2", message, true) : [message.content]),
        end,
        "\n",
      );
      return;
    }
    if (rest[index - 1]?.role !== "tool") parts.push(start, "user");
    parts.push(`\n<tool_response>\n${message.content}\n</tool_response>`);
    if (rest[index + 1]?.role !== "tool") parts.push(end, "\n");
  });
  return [...parts, start, "assistant\n"];
}

const templates: Record<ModelFamily, (messages: readonly EngineMessage[], tools: readonly ToolSpec[]) => Part[]> = {
  llama3,
  gemma2,
  mistral,
  qwen2: chatml,
};

/** The prompt for `messages` (and `tools`, when given) as pieces of text and control tokens, ending with the assistant's generation prompt. */
export function renderChatPieces(
  family: ModelFamily,
  messages: readonly EngineMessage[],
  tools: readonly ToolSpec[] = [],
): PromptPiece[] {
  return toPieces(templates[family](messages, tools));
}

/** The prompt text for `messages` (and `tools`, when given), ending with the assistant's generation prompt. */
export function renderChat(
  family: ModelFamily,
  messages: readonly EngineMessage[],
  tools: readonly ToolSpec[] = [],
): string {
  return piecesText(renderChatPieces(family, messages, tools));
}

/** A piece of a rendered prompt: `reply` marks an assistant's text exactly as the client sent it back. */
export interface ChatSegment {
  text: string;
  reply: boolean;
  /** The segment's pieces: its text, and which of it are control tokens. */
  pieces: PromptPiece[];
}

/**
 * `renderChat`'s prompt cut into pieces whose concatenation is that prompt, with each earlier
 * assistant reply its own piece where the template writes the reply's text verbatim right after
 * the generation prompt of the turns before it. An engine that keeps a conversation's KV cache
 * (web-llm) then sees a turn it generated itself as that turn, and prefills only what is new.
 * Where a template changes earlier text as the conversation grows (Mistral moves the system
 * prompt to the last user turn; Gemma folds a later system message into an earlier user turn) or
 * rewrites a reply (trimmed, spaced from `[/INST]`, tool calls), there is no cut. One rendering,
 * one pass: linear in the prompt, however many turns it has.
 */
export function renderChatSegments(
  family: ModelFamily,
  messages: readonly EngineMessage[],
  tools: readonly ToolSpec[] = [],
): ChatSegment[] {
  const segments: ChatSegment[] = [];
  let pending: Part[] = [];
  const flush = () => {
    const pieces = toPieces(pending);
    if (pieces.length > 0) segments.push({ text: piecesText(pieces), reply: false, pieces });
    pending = [];
  };
  for (const part of templates[family](messages, tools)) {
    if (!(part instanceof Reply)) {
      pending.push(part);
      continue;
    }
    flush();
    segments.push({ text: part.text, reply: true, pieces: [{ text: part.text, control: false }] });
  }
  flush();
  return segments;
}

/**
 * The segments' pieces as one prompt, exactly `renderChatPieces` of the same conversation: a
 * caller that needs both renders the template once.
 */
export function joinedPieces(segments: readonly ChatSegment[]): PromptPiece[] {
  const pieces: PromptPiece[] = [];
  for (const segment of segments) for (const piece of segment.pieces) appendPiece(pieces, piece);
  return pieces;
}

/**
 * Chat templates per family, rendered to the exact prompt text the model sees, with tools in
 * each family's own convention. They count prompt tokens for admission before a model loads,
 * drive the deterministic engine, and are the prompt WebLLM gets for tool requests. For plain
 * chat web-llm applies the model's own template (mlc-chat-config.json), which these follow.
 *
 * Sources:
 * - Llama 3: Meta's chat template for Meta-Llama-3-8B-Instruct; tools as in Meta's "JSON based
 *   tool calling" prompt format for Llama 3.1 (definitions in the first user turn, the call as
 *   `{"name": …, "parameters": …}`, results in the `ipython` role).
 * - Gemma 2: google/gemma-2-9b-it's chat template (no system role: it is folded into the first
 *   user turn). Gemma 2 has no native tool format; Google's function-calling guide for Gemma
 *   describes the functions in the prompt and asks for a structured reply, here a fenced
 *   ```tool_call block holding `{"name": …, "arguments": …}`.
 * - Mistral v0.3: mistralai/Mistral-7B-Instruct-v0.3's template and mistral-common's v3 tool
 *   format: `[AVAILABLE_TOOLS]…[/AVAILABLE_TOOLS]` before the last user turn, calls as
 *   `[TOOL_CALLS] [{"name": …, "arguments": …}]`, results in `[TOOL_RESULTS]…[/TOOL_RESULTS]`.
 * - ChatML (Qwen2): Qwen2-Instruct's template, with Qwen's Hermes-style tools: `<tools>` in the
 *   system turn, calls as `<tool_call>{…}</tool_call>`, results as `<tool_response>` user turns.
 */
import type { ModelFamily } from "./catalogue.js";
import type { EngineMessage } from "./engine/types.js";
import { literal } from "./json-schema.js";

export interface ToolSpec {
  name: string;
  description?: string;
  /** A JSON Schema for the arguments object. */
  parameters: Record<string, unknown>;
}

export interface CallText {
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
  /** Grammar for one or more calls, given the grammar expression of each single call. */
  grammar(call: string, parallel: boolean): string;
}

function parsedArguments(text: string): unknown {
  try {
    return JSON.parse(text || "{}");
  } catch {
    return text;
  }
}

function callObject(call: CallText, key: "arguments" | "parameters"): Record<string, unknown> {
  return { name: call.name, [key]: call.arguments, ...(call.id ? { id: call.id } : {}) };
}

const llamaSyntax: ToolSyntax = {
  openers: ["{", "["],
  argumentsKey: "parameters",
  write: (calls) => (calls.length === 1 ? JSON.stringify(callObject({ ...calls[0]!, id: undefined }, "parameters")) : JSON.stringify(calls.map((call) => callObject({ ...call, id: undefined }, "parameters")))),
  grammar: (call, parallel) => (parallel ? `(${call} | "[" ${call} ("," ${call})* "]")` : call),
};

const gemmaSyntax: ToolSyntax = {
  openers: ["```tool_call\n"],
  argumentsKey: "arguments",
  write: (calls) => "```tool_call\n" + (calls.length === 1 ? JSON.stringify(callObject({ ...calls[0]!, id: undefined }, "arguments")) : JSON.stringify(calls.map((call) => callObject({ ...call, id: undefined }, "arguments")))) + "\n```",
  grammar: (call, parallel) => `${literal("```tool_call\n")} ${parallel ? `(${call} | "[" ${call} ("," ${call})* "]")` : call} ${literal("\n```")}`,
};

const mistralSyntax: ToolSyntax = {
  openers: ["[TOOL_CALLS]"],
  argumentsKey: "arguments",
  write: (calls) => `[TOOL_CALLS] ${JSON.stringify(calls.map((call) => callObject(call, "arguments")))}`,
  grammar: (call, parallel) => `${literal("[TOOL_CALLS] [")} ${call} ${parallel ? `("," ${call})*` : ""} "]"`,
};

const chatmlSyntax: ToolSyntax = {
  openers: ["<tool_call>"],
  argumentsKey: "arguments",
  write: (calls) => calls.map((call) => `<tool_call>\n${JSON.stringify(callObject({ ...call, id: undefined }, "arguments"))}\n</tool_call>`).join("\n"),
  grammar: (call, parallel) => {
    const one = `${literal("<tool_call>\n")} ${call} ${literal("\n</tool_call>")}`;
    return parallel ? `${one} (${literal("\n")} ${one})*` : one;
  },
};

export const toolSyntax: Record<ModelFamily, ToolSyntax> = { llama3: llamaSyntax, gemma2: gemmaSyntax, mistral: mistralSyntax, qwen2: chatmlSyntax };

function callsOf(message: EngineMessage): CallText[] {
  return (message.toolCalls ?? []).map((call) => ({ id: call.id, name: call.name, arguments: parsedArguments(call.arguments) }));
}

/** What an assistant turn says: its text, then its calls in the family's syntax. */
function assistantText(family: ModelFamily, message: EngineMessage): string {
  const calls = callsOf(message);
  if (calls.length === 0) return message.content;
  const written = toolSyntax[family].write(calls);
  return message.content ? `${message.content}\n${written}` : written;
}

function definitions(tools: readonly ToolSpec[]): string {
  return tools.map((tool) => JSON.stringify({ type: "function", function: tool }, null, 4)).join("\n\n");
}

function llama3(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): string {
  let text = "<|begin_of_text|>";
  let toolsPending = tools.length > 0;
  for (const message of messages) {
    let content = message.role === "assistant" ? assistantText("llama3", message) : message.content;
    if (message.role === "user" && toolsPending) {
      content =
        "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
        'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\n\n' +
        `${definitions(tools)}\n\n${content}`;
      toolsPending = false;
    }
    const role = message.role === "tool" ? "ipython" : message.role;
    text += `<|start_header_id|>${role}<|end_header_id|>\n\n${content.trim()}<|eot_id|>`;
  }
  return `${text}<|start_header_id|>assistant<|end_header_id|>\n\n`;
}

function gemma2(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): string {
  const system = messages.filter((message) => message.role === "system").map((message) => message.content);
  if (tools.length > 0) {
    system.push(
      "You have access to the following functions. To call one or more of them, reply with only a ```tool_call block holding " +
        '{"name": function name, "arguments": an object of its arguments}, or a list of such objects.\n\n' +
        definitions(tools),
    );
  }
  let text = "<bos>";
  let pendingSystem = system.length > 0 ? `${system.join("\n\n")}\n\n` : "";
  for (const message of messages) {
    if (message.role === "system") continue;
    const role = message.role === "assistant" ? "model" : "user";
    const body =
      message.role === "tool" ? `\`\`\`tool_result\n${JSON.stringify({ call_id: message.toolCallId, content: message.content })}\n\`\`\`` : role === "model" ? assistantText("gemma2", message) : message.content;
    text += `<start_of_turn>${role}\n${role === "user" ? pendingSystem : ""}${body.trim()}<end_of_turn>\n`;
    if (role === "user") pendingSystem = "";
  }
  return `${text}<start_of_turn>model\n`;
}

function mistral(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): string {
  const system = messages.filter((message) => message.role === "system").map((message) => message.content).join("\n\n");
  const turns = messages.filter((message) => message.role !== "system");
  const lastUser = turns.map((message) => message.role).lastIndexOf("user");
  let text = "<s>";
  turns.forEach((message, index) => {
    if (message.role === "user") {
      if (index === lastUser && tools.length > 0) text += `[AVAILABLE_TOOLS] ${JSON.stringify(tools.map((tool) => ({ type: "function", function: tool })))}[/AVAILABLE_TOOLS]`;
      const prefix = index === lastUser && system ? `${system}\n\n` : "";
      text += `[INST] ${prefix}${message.content}[/INST]`;
    } else if (message.role === "assistant") {
      const calls = callsOf(message);
      text += calls.length > 0 ? `${mistralSyntax.write(calls)}</s>` : ` ${message.content}</s>`;
    } else {
      text += `[TOOL_RESULTS] ${JSON.stringify({ content: message.content, call_id: message.toolCallId })}[/TOOL_RESULTS]`;
    }
  });
  return text;
}

function chatml(messages: readonly EngineMessage[], tools: readonly ToolSpec[]): string {
  const toolsText =
    tools.length === 0
      ? ""
      : "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
        tools.map((tool) => JSON.stringify({ type: "function", function: tool })).join("\n") +
        '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';
  const first = messages[0];
  let text = `<|im_start|>system\n${first?.role === "system" ? first.content : "You are a helpful assistant."}${toolsText}<|im_end|>\n`;
  for (const message of first?.role === "system" ? messages.slice(1) : messages) {
    if (message.role === "tool") text += `<|im_start|>user\n<tool_response>\n${message.content}\n</tool_response><|im_end|>\n`;
    else text += `<|im_start|>${message.role}\n${message.role === "assistant" ? assistantText("qwen2", message) : message.content}<|im_end|>\n`;
  }
  return `${text}<|im_start|>assistant\n`;
}

const templates: Record<ModelFamily, (messages: readonly EngineMessage[], tools: readonly ToolSpec[]) => string> = {
  llama3,
  gemma2,
  mistral,
  qwen2: chatml,
};

/** The prompt text for `messages` (and `tools`, when given), ending with the assistant's generation prompt. */
export function renderChat(family: ModelFamily, messages: readonly EngineMessage[], tools: readonly ToolSpec[] = []): string {
  return templates[family](messages, tools);
}

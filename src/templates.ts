/**
 * Chat templates per family, rendered to the exact prompt text the model sees. They count
 * prompt tokens for admission before a model is loaded, and drive the deterministic engine.
 * web-llm applies the model's own template (from mlc-chat-config.json) for plain chat; these
 * follow the same published templates so the counts agree.
 *
 * Sources: Llama 3 - Meta's tokenizer_config.json chat_template for Meta-Llama-3-8B-Instruct;
 * Gemma 2 - google/gemma-2-9b-it tokenizer_config.json (no system role: it is folded into the
 * first user turn); Mistral v0.3 - mistralai/Mistral-7B-Instruct-v0.3 tokenizer_config.json
 * (the system prompt goes before the last user message); ChatML - Qwen2-Instruct.
 */
import type { ModelFamily } from "./catalogue.js";
import type { EngineMessage } from "./engine/types.js";

function toolCallText(message: EngineMessage): string {
  const calls = message.toolCalls ?? [];
  if (calls.length === 0) return message.content;
  const rendered = JSON.stringify(calls.map((call) => ({ name: call.name, arguments: JSON.parse(call.arguments || "{}") as unknown })));
  return message.content ? `${message.content}\n${rendered}` : rendered;
}

function llama3(messages: readonly EngineMessage[]): string {
  let text = "<|begin_of_text|>";
  for (const message of messages) {
    const role = message.role === "tool" ? "ipython" : message.role;
    text += `<|start_header_id|>${role}<|end_header_id|>\n\n${toolCallText(message).trim()}<|eot_id|>`;
  }
  return `${text}<|start_header_id|>assistant<|end_header_id|>\n\n`;
}

function gemma2(messages: readonly EngineMessage[]): string {
  const system = messages.filter((message) => message.role === "system").map((message) => message.content);
  let text = "<bos>";
  let pendingSystem = system.length > 0 ? `${system.join("\n\n")}\n\n` : "";
  for (const message of messages) {
    if (message.role === "system") continue;
    const role = message.role === "assistant" ? "model" : "user";
    const body = message.role === "tool" ? `Tool result (${message.toolCallId ?? ""}): ${message.content}` : toolCallText(message);
    text += `<start_of_turn>${role}\n${role === "user" ? pendingSystem : ""}${body.trim()}<end_of_turn>\n`;
    if (role === "user") pendingSystem = "";
  }
  return `${text}<start_of_turn>model\n`;
}

function mistral(messages: readonly EngineMessage[]): string {
  const system = messages.filter((message) => message.role === "system").map((message) => message.content).join("\n\n");
  const turns = messages.filter((message) => message.role !== "system");
  const lastUser = turns.map((message) => message.role).lastIndexOf("user");
  let text = "<s>";
  turns.forEach((message, index) => {
    if (message.role === "user") {
      const prefix = index === lastUser && system ? `${system}\n\n` : "";
      text += `[INST] ${prefix}${message.content}[/INST]`;
    } else if (message.role === "assistant") {
      text += ` ${toolCallText(message)}</s>`;
    } else {
      text += `[TOOL_RESULTS] ${JSON.stringify({ call_id: message.toolCallId, content: message.content })}[/TOOL_RESULTS]`;
    }
  });
  return text;
}

function chatml(messages: readonly EngineMessage[]): string {
  let text = messages[0]?.role === "system" ? "" : "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
  for (const message of messages) {
    text += `<|im_start|>${message.role}\n${toolCallText(message)}<|im_end|>\n`;
  }
  return `${text}<|im_start|>assistant\n`;
}

const templates: Record<ModelFamily, (messages: readonly EngineMessage[]) => string> = {
  llama3,
  gemma2,
  mistral,
  qwen2: chatml,
};

/** The prompt text for `messages`, ending with the assistant's generation prompt. */
export function renderChat(family: ModelFamily, messages: readonly EngineMessage[]): string {
  return templates[family](messages);
}

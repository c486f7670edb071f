/** A chat request's messages checked and converted at the boundary: OpenAI's wire messages to the templates' turns. */
import { BadRequestError, quoted } from "../../core/errors/api.js";
import type { EngineMessage } from "../../prompt/messages.js";
import type { ChatCompletionRequest, ChatMessage } from "../../core/wire/chat-request.js";

/** A turn's words: its text parts, and an assistant's refusal parts, which are what it said. */
function text(content: ChatMessage["content"]): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content.map((part) => ("text" in part ? part.text : "refusal" in part ? part.refusal : "")).join("");
}

/**
 * A verbosity these models keep: OpenAI's default, `medium`, which is what they do anyway (their
 * replies are as long as they are); another is refused in OpenAI's words for a model without the
 * setting.
 */
export function checkVerbosity(value: string | null | undefined, param: string, model: string): void {
  if (value == null || value === "medium") return;
  throw new BadRequestError(
    `Unsupported value: '${quoted(value)}' is not supported with the '${quoted(model)}' model. Supported values are: 'medium'.`,
    { param, code: "unsupported_value" },
  );
}

/**
 * What OpenAI answers for a model without the capability, in its words: reasoning parameters,
 * audio output, moderation (none runs here, so a policy to block on could not be kept), and
 * image, audio or file inputs (every model here reads and writes text only).
 */
export function refuseCapabilities(request: ChatCompletionRequest, model: string): void {
  checkVerbosity(request.verbosity, "verbosity", model);
  for (const name of ["reasoning_effort", "audio", "moderation"] as const) {
    if (request[name] != null)
      throw new BadRequestError(`Unsupported parameter: '${name}' is not supported with this model.`, {
        param: name,
        code: "unsupported_parameter",
      });
  }
  if (request.web_search_options != null) {
    throw new BadRequestError("Web search options not supported with this model.", {
      param: "web_search_options",
      code: "unsupported_parameter",
    });
  }
  request.messages.forEach((message, index) => {
    if (!Array.isArray(message.content)) return;
    message.content.forEach((part, position) => {
      if (part.type === "text" || part.type === "refusal") return;
      const what = part.type === "image_url" ? "images" : part.type === "input_audio" ? "audio" : "files";
      throw new BadRequestError(
        `Invalid content type. ${part.type} is only supported by models that take ${what}; ${model} takes text only.`,
        {
          param: `messages[${index}].content[${position}].type`,
          code: "invalid_value",
        },
      );
    });
  });
}

/** OpenAI's refusal of tool calls left unanswered, listing them (the first 16 of a longer list). */
function unansweredCalls(ids: ReadonlySet<string>, param: string): BadRequestError {
  const listed = [...ids].slice(0, 16).map(quoted);
  const more = ids.size > listed.length ? `, and ${ids.size - listed.length} more` : "";
  return new BadRequestError(
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
      `The following tool_call_ids did not have response messages: ${listed.join(", ")}${more}`,
    { param, code: null },
  );
}

/**
 * OpenAI's rule for tool turns, with its refusals in its words: the `tool` messages right after
 * an assistant's tool calls answer each of them, and a `tool` message answers a call of the
 * assistant message its run follows. ("preceeding" is OpenAI's spelling.) One pass: linear in
 * the calls and messages.
 */
export function checkToolReplies(messages: readonly ChatMessage[]): void {
  let calls: ReadonlySet<string> | null = null;
  const unanswered = new Set<string>();
  messages.forEach((message, index) => {
    if (message.role === "tool") {
      if (!calls)
        throw new BadRequestError(
          "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          { param: `messages.[${index}].role`, code: null },
        );
      if (!calls.has(message.tool_call_id))
        throw new BadRequestError(
          `Invalid parameter: 'tool_call_id' of '${quoted(message.tool_call_id)}' not found in 'tool_calls' of previous message.`,
          { param: `messages.[${index}].tool_call_id`, code: null },
        );
      unanswered.delete(message.tool_call_id);
      return;
    }
    if (unanswered.size) throw unansweredCalls(unanswered, `messages.[${index}].role`);
    const ids = message.role === "assistant" ? (message.tool_calls ?? []).map((call) => call.id) : [];
    calls = ids.length ? new Set(ids) : null;
    for (const id of ids) unanswered.add(id);
  });
  if (unanswered.size) throw unansweredCalls(unanswered, "messages");
}

/**
 * Wire messages to the engine's; a `tool` message must answer a call made earlier (the whole rule
 * is `checkToolReplies`; a request in the deprecated `functions` terms, which had no such rule,
 * is held to this much).
 */
export function toEngineMessages(messages: readonly ChatMessage[]): EngineMessage[] {
  const calls = new Set<string>();
  return messages.map((message, index) => {
    switch (message.role) {
      case "system":
      case "developer":
        return { role: "system", content: text(message.content), ...(message.name ? { name: message.name } : {}) };
      case "user":
        return { role: "user", content: text(message.content), ...(message.name ? { name: message.name } : {}) };
      case "assistant":
        // OpenAI's answer to an assistant turn that says nothing: it needs content or tool calls.
        if (message.content == null && !message.tool_calls?.length) {
          throw new BadRequestError("Invalid value for 'content': expected a string, got null.", {
            param: `messages.[${index}].content`,
            code: null,
          });
        }
        for (const call of message.tool_calls ?? []) calls.add(call.id);
        return {
          role: "assistant",
          content: text(message.content),
          ...(message.name ? { name: message.name } : {}),
          ...(message.tool_calls?.length
            ? {
                toolCalls: message.tool_calls.map((call) => ({
                  id: call.id,
                  name: call.function.name,
                  arguments: call.function.arguments,
                })),
              }
            : {}),
        };
      case "tool":
        if (!calls.has(message.tool_call_id)) {
          throw new BadRequestError(
            `Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'; no call has id '${message.tool_call_id}'.`,
            { param: `messages[${index}].tool_call_id`, code: "invalid_value" },
          );
        }
        return { role: "tool", content: text(message.content), toolCallId: message.tool_call_id };
    }
  });
}

type AssistantMessage = Extract<ChatMessage, { role: "assistant" }>;

/**
 * An assistant turn as an upstream is sent it: refusal parts become text parts (they are what it
 * said, and llama-server answers the part with "unsupported content[].type"), and the reply's own
 * fields a client sent back (`parsed`, `annotations`, a call's `parsed_arguments`) are left out.
 */
function assistantUpstream(message: AssistantMessage): AssistantMessage {
  const { parsed: _parsed, annotations: _annotations, audio: _audio, function_call: _call, ...kept } = message;
  return {
    ...kept,
    ...(Array.isArray(message.content)
      ? {
          content: message.content.map((part) =>
            part.type === "refusal" ? { type: "text" as const, text: part.refusal } : part,
          ),
        }
      : {}),
    ...(message.tool_calls
      ? {
          tool_calls: message.tool_calls.map(({ function: { name, arguments: text }, ...call }) => ({
            ...call,
            function: { name, arguments: text },
          })),
        }
      : {}),
  };
}

/** The messages as an upstream is sent them (`assistantUpstream`). */
export function upstreamMessages(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((message) => (message.role === "assistant" ? assistantUpstream(message) : message));
}

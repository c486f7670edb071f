/**
 * A Responses API request as the chat request it amounts to: `instructions` as the first system
 * turn, input items as messages (consecutive function calls as one assistant turn's `tool_calls`,
 * their outputs as `tool` turns), function tools, the text format as `response_format`, and the
 * limits under chat's names. What has no chat meaning here is refused in OpenAI's words.
 */
import { BadRequestError } from "../../core/errors/api.js";
import type { Outcome } from "../../http/outcome.js";
import { checkVerbosity } from "../chat/messages.js";
import type { OutputItem } from "../../core/wire/response.js";
import type { ResponseInputItem, ResponseRequest } from "../../core/wire/responses-request.js";

type ChatMessage = Record<string, unknown> & { role: string; tool_calls?: unknown[] };
type Part = Exclude<Extract<ResponseInputItem, { role: string }>["content"], string>[number];
/** A compaction item, with its summary once opened (responses-compaction.ts): what the model reads in its place. */
type CompactionItem = Extract<ResponseInputItem, { type: "compaction" }> & { summary?: string };
/** An input item with its reference resolved: a message, a call, a call's output or a compaction. */
export type ConversationItem = Exclude<ResponseInputItem, { type: "item_reference" | "compaction" }> | CompactionItem;

/** An earlier output item as the input item it is in a later request. */
export function asInputItem(item: OutputItem): ConversationItem {
  // Its id goes with it, so that a response that continues it lists it under the same id.
  if (item.type === "function_call")
    return { id: item.id, type: "function_call", call_id: item.call_id, name: item.name, arguments: item.arguments };
  if (item.type === "file_search_call")
    return {
      id: item.id,
      type: item.type,
      queries: item.queries,
      status: item.status === "completed" ? "completed" : "incomplete",
    };
  return {
    id: item.id,
    type: "message",
    role: "assistant",
    content: item.content.map((part) => ({ type: "output_text" as const, text: part.text })),
  };
}

/** Parameters these models or this API cannot honour, refused as OpenAI refuses them. */
export function checkSupported(request: ResponseRequest): void {
  const unsupported: [keyof ResponseRequest, string][] = [
    ["reasoning", "Unsupported parameter: 'reasoning' is not supported with this model."],
    ["moderation", "Unsupported parameter: 'moderation' is not supported with this model."],
    ["access_programs", "Unsupported parameter: 'access_programs' is not supported with this model."],
    ["prompt", "Unsupported parameter: 'prompt': this API has no stored prompts; send the prompt's text as input."],
    ["context_management", "Unsupported parameter: 'context_management' is not supported with this model."],
  ];
  for (const [name, message] of unsupported)
    if (request[name] != null) throw new BadRequestError(message, { param: name, code: "unsupported_parameter" });
  if (request.background === true)
    throw new BadRequestError("Unsupported parameter: 'background': responses are generated while the request waits.", {
      param: "background",
      code: "unsupported_parameter",
    });
  if (typeof request.input !== "string") refuseMedia(request.input, "input", request.model);
  checkVerbosity(request.text?.verbosity, "text.verbosity", request.model);
  checkToolChoice(request);
}

/**
 * A choice that `tools` cannot meet, in the Responses API's own words (not chat's): `required`
 * without tools, or a function that `tools` does not give. Its `auto` and `none` need no tools.
 */
function checkToolChoice({ tools, tool_choice: choice }: ResponseRequest): void {
  if (choice === "required" && !tools?.length)
    throw new BadRequestError("Tool choice 'required' must be specified with 'tools' parameter.", {
      param: "tool_choice",
    });
  if (
    typeof choice === "object" &&
    choice?.type === "function" &&
    !tools?.some((tool) => tool.type === "function" && tool.name === choice.name)
  )
    throw new BadRequestError("Tool choice 'function' not found in 'tools' parameter.", { param: "tool_choice" });
  if (
    typeof choice === "object" &&
    choice?.type === "file_search" &&
    !tools?.some((tool) => tool.type === "file_search")
  )
    throw new BadRequestError("Tool choice 'file_search' not found in 'tools' parameter.", { param: "tool_choice" });
}

/**
 * Image, audio and file parts of `items` (named `param`), refused in OpenAI's words: every model
 * here reads text only (`reader`, the model asked for, or every model).
 */
export function refuseMedia(items: readonly ResponseInputItem[], param: string, reader: string): void {
  items.forEach((item, index) => {
    const content = "content" in item ? item.content : "output" in item ? item.output : "";
    if (typeof content === "string") return;
    content.forEach((part, position) => {
      if (part.type === "input_text" || part.type === "output_text" || part.type === "refusal") return;
      const what = part.type === "input_image" ? "images" : part.type === "input_audio" ? "audio" : "files";
      const field = "content" in item ? "content" : "output";
      throw new BadRequestError(
        `Invalid content type. ${part.type} is only supported by models that take ${what}; ${reader} takes text only.`,
        { param: `${param}[${index}].${field}[${position}].type`, code: "invalid_value" },
      );
    });
  });
}

/** A text part as a chat content part (an earlier refusal is what was said); media was refused before. */
function chatPart(part: Part): Record<string, unknown> {
  return { type: "text", text: part.type === "refusal" ? part.refusal : "text" in part ? part.text : "" };
}

function chatContent(content: string | Part[]): unknown {
  return typeof content === "string" ? content : content.map(chatPart);
}

/**
 * The conversation's items as chat messages. Consecutive calls are one assistant turn's calls.
 * A call's output follows that turn, with the outputs of its other calls, wherever the item came:
 * the Responses API takes a message between a call and its output (the Vercel AI SDK sends the
 * user's message again with each output when it continues a conversation), and a chat template
 * must have the outputs right after their calls. An output whose call came nowhere before it stays
 * where it is, to be refused as chat refuses it.
 */
function messagesOf(items: readonly ConversationItem[]): ChatMessage[] {
  const turns: ChatMessage[] = [];
  const repliesAfter = new Map<ChatMessage, ChatMessage[]>();
  const turnOfCall = new Map<string, ChatMessage>();
  for (const item of items) {
    if ("role" in item) {
      turns.push({ role: item.role, content: chatContent(item.content) });
    } else if (item.type === "compaction") {
      // What it stands for, the earlier turns' summary, as the assistant's words.
      if (item.summary === undefined) throw new Error("a compaction item reached the prompt unopened");
      turns.push({ role: "assistant", content: `Summary of the conversation so far:\n${item.summary}` });
    } else if (item.type === "file_search_call") {
      // What it found was the model's context when it answered; its answer is what follows it.
      continue;
    } else if (item.type === "function_call") {
      const call = { id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } };
      let turn = turns.at(-1);
      // Calls that follow an assistant's words, or each other, are that one turn's calls.
      if (turn?.role !== "assistant" || repliesAfter.has(turn))
        turns.push((turn = { role: "assistant", content: null }));
      (turn.tool_calls ??= []).push(call);
      turnOfCall.set(item.call_id, turn);
    } else {
      const output = typeof item.output === "string" ? item.output : item.output.map(chatPart);
      const reply = { role: "tool", tool_call_id: item.call_id, content: output };
      const turn = turnOfCall.get(item.call_id);
      const replies = turn && repliesAfter.get(turn);
      if (replies) replies.push(reply);
      else if (turn) repliesAfter.set(turn, [reply]);
      else turns.push(reply);
    }
  }
  return turns.flatMap((turn) => [turn, ...(repliesAfter.get(turn) ?? [])]);
}

function chatToolChoice(choice: ResponseRequest["tool_choice"]): unknown {
  if (choice == null || typeof choice === "string") return choice;
  if (choice.type === "function") return { type: "function", function: { name: choice.name } };
  // The worker runs `file_search` before the model answers (endpoints/responses/file-search.ts).
  if (choice.type === "file_search") return "auto";
  return {
    type: "allowed_tools",
    allowed_tools: {
      mode: choice.mode,
      tools: choice.tools.map((tool) => ({ type: "function", function: { name: tool.name } })),
    },
  };
}

/** An object without its null fields, which the Responses API takes where chat wants them left out. */
const withoutNulls = (object: object) =>
  Object.fromEntries(Object.entries(object).filter(([, value]) => value != null));

function chatResponseFormat(format: NonNullable<ResponseRequest["text"]>["format"]): unknown {
  if (format?.type !== "json_schema") return format;
  const { type, ...schema } = format;
  return { type, json_schema: withoutNulls(schema) };
}

/** Log probabilities are given only when `include` asks for them, as on the hosted API. */
const logprobsIncluded = "message.output_text.logprobs";

/**
 * The chat request this Responses request amounts to (its JSON, validated again as chat is), over
 * `conversation`: the earlier turns it continues and its own input, references resolved.
 */
export function chatRequestOf(
  request: ResponseRequest,
  conversation: readonly ConversationItem[],
): Record<string, unknown> {
  const messages = [
    ...(request.instructions ? [{ role: "system", content: request.instructions }] : []),
    ...messagesOf(conversation),
  ];
  const logprobs = request.include?.includes(logprobsIncluded) === true;
  const entries: [string, unknown][] = [
    ["model", request.model],
    ["messages", messages],
    ["max_completion_tokens", request.max_output_tokens],
    ["temperature", request.temperature],
    ["top_p", request.top_p],
    ["presence_penalty", request.presence_penalty],
    ["frequency_penalty", request.frequency_penalty],
    ["stream", request.stream],
    // The events close with the usage, so a stream always asks for it.
    ["stream_options", request.stream ? { include_usage: true } : undefined],
    [
      "tools",
      request.tools?.length
        ? request.tools.map(({ type, ...definition }) => ({ type, function: withoutNulls(definition) }))
        : undefined,
    ],
    // The Responses API takes `auto` and `none` without tools (its default is `auto`); chat does not.
    [
      "tool_choice",
      request.tools?.length || (request.tool_choice !== "auto" && request.tool_choice !== "none")
        ? chatToolChoice(request.tool_choice)
        : undefined,
    ],
    ["parallel_tool_calls", request.tools?.length ? request.parallel_tool_calls : undefined],
    ["response_format", chatResponseFormat(request.text?.format)],
    ["logprobs", logprobs || undefined],
    ["top_logprobs", logprobs ? (request.top_logprobs ?? 0) : undefined],
    ["metadata", request.metadata],
    ["user", request.user],
    ["safety_identifier", request.safety_identifier],
    ["prompt_cache_key", request.prompt_cache_key],
    ["service_tier", request.service_tier],
  ];
  return Object.fromEntries(entries.filter(([, value]) => value != null));
}

/**
 * A chat request's param as the Responses request names it. A message's index is not its item's
 * (instructions, continued turns and merged calls come between), so a message is named `input`.
 */
function responsesParam(param: string): string {
  return param
    .replace(/^messages(?:[.[].*)?$/, "input")
    .replace(/^max_completion_tokens$/, "max_output_tokens")
    .replace(/^response_format(?:\.json_schema)?(?=$|\.)/, "text.format")
    .replace(/^tools\[(\d+)\]\.function(?=$|\.)/, "tools[$1]")
    .replace(/^tool_choice\.function(?=$|\.)/, "tool_choice");
}

/** A refusal of the chat request it became, in the Responses request's terms. */
function inResponsesTerms(error: unknown): unknown {
  if (!(error instanceof BadRequestError) || error.param === null) return error;
  const param = responsesParam(error.param);
  if (param === error.param) return error;
  const message = error.message.split(`'${error.param}'`).join(`'${param}'`);
  return new BadRequestError(message, { param, code: error.code });
}

/** A route's answer, its refusals (thrown or answered) in the Responses request's terms. */
export async function inResponsesTermsOf(answer: () => Promise<Outcome>): Promise<Outcome> {
  try {
    const outcome = await answer();
    return "error" in outcome ? { ...outcome, error: inResponsesTerms(outcome.error) } : outcome;
  } catch (error) {
    throw inResponsesTerms(error);
  }
}

/**
 * A chat answer as the Responses API's: the completion as a `response` object, and the chunks as
 * its events (the response created, each output item added, its text or arguments in deltas,
 * each item done, and the response completed, or incomplete when the limit cut it). The chat
 * answer is ours (local) or an upstream's re-framed one (remote): both come here the same way.
 */
import type { ChatCompletion, ChatCompletionChunk } from "../../core/wire/chat-completion.js";
import type { ResponseRequest } from "../../core/wire/responses-request.js";
import type { OutputItem, OutputLogprob, OutputText, ResponseEvent, ResponseObject } from "../../core/wire/response.js";
import type { TokenLogprobWire, Usage } from "../../core/wire/shared.js";
import { citationsOf, defaultFileSearchResults, type FileSearchRun } from "./file-search.js";
import { addedUsage } from "./search-decision.js";

/** What the response says of itself and of its request, before any output. */
export interface ResponseFrame {
  id: string;
  createdAt: number;
  /** Milliseconds since the epoch, for `completed_at`. */
  clock: () => number;
  model: string;
  request: ResponseRequest;
  newId: (prefix: string) => string;
  /** Stores the finished response (null when `store` is false); a failure to store leaves `store: false`. */
  keep: ((response: ResponseObject) => Promise<void>) | null;
  /** The conversation the response continues, and adds its input and output to when it finishes; null without one. */
  conversation: { id: string; add: (output: OutputItem[]) => Promise<void> } | null;
  /** What `file_search` found before the model answered: its item leads the output, and the answer cites it. */
  fileSearch: FileSearchRun | null;
  /** What the model used to decide whether to search, before it answered: part of the response's usage. */
  decision: Usage | null;
}

/** The response, stored when asked and saying whether it was, and added to its conversation. */
async function kept(response: ResponseObject, frame: ResponseFrame): Promise<ResponseObject> {
  // The database refused (its quota, say), or the conversation was deleted meanwhile: the answer stands.
  await frame.conversation?.add(response.output).catch(() => undefined);
  if (!frame.keep) return response;
  try {
    await frame.keep(response);
    return response;
  } catch {
    // The database refused (its quota, say): the answer stands, and says it was not stored.
    return { ...response, store: false };
  }
}

type FinishReason = ChatCompletion["choices"][number]["finish_reason"] | null;

function skeleton(frame: ResponseFrame): ResponseObject {
  const { request } = frame;
  return {
    id: frame.id,
    object: "response",
    created_at: frame.createdAt,
    completed_at: null,
    status: "in_progress",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    max_tool_calls: request.max_tool_calls ?? null,
    model: frame.model,
    output: [],
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    prompt_cache_key: request.prompt_cache_key ?? null,
    reasoning: { effort: null, summary: null },
    safety_identifier: request.safety_identifier ?? null,
    service_tier: "default",
    // As asked; false in the end if storing it failed (see `kept`).
    store: frame.keep !== null,
    temperature: request.temperature ?? 1,
    presence_penalty: request.presence_penalty ?? 0,
    frequency_penalty: request.frequency_penalty ?? 0,
    text: { format: request.text?.format ?? { type: "text" } },
    tool_choice: request.tool_choice ?? "auto",
    // Every field a function tool has, as the hosted API echoes them: null where the request gave none.
    tools: (request.tools ?? []).map((tool) =>
      tool.type === "file_search"
        ? {
            ...tool,
            max_num_results: tool.max_num_results ?? defaultFileSearchResults,
            filters: tool.filters ?? null,
            ranking_options: { ranker: "auto", score_threshold: 0, ...tool.ranking_options },
          }
        : {
            ...tool,
            description: tool.description ?? null,
            parameters: tool.parameters ?? null,
            strict: tool.strict ?? null,
          },
    ),
    top_logprobs: request.top_logprobs ?? 0,
    top_p: request.top_p ?? 1,
    truncation: request.truncation ?? "disabled",
    usage: null,
    user: request.user ?? null,
    metadata: request.metadata ?? {},
    ...(frame.conversation && { conversation: { id: frame.conversation.id } }),
  };
}

/** The response as it ends: `incomplete` when the token limit (or a filter) cut it. */
function finished(
  frame: ResponseFrame,
  output: OutputItem[],
  finish: FinishReason,
  usage: Usage | null,
): ResponseObject {
  const reason = finish === "length" ? "max_output_tokens" : finish === "content_filter" ? "content_filter" : null;
  const used = addedUsage(frame.decision, usage);
  return {
    ...skeleton(frame),
    completed_at: reason ? null : Math.floor(frame.clock() / 1000),
    status: reason ? "incomplete" : "completed",
    incomplete_details: reason ? { reason } : null,
    output,
    usage: used && {
      input_tokens: used.prompt_tokens,
      input_tokens_details: { cached_tokens: used.prompt_tokens_details?.cached_tokens ?? 0 },
      output_tokens: used.completion_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: used.total_tokens,
    },
  };
}

const bytesOf = (bytes: number[] | null) => bytes ?? [];

function outputLogprobs(tokens: readonly TokenLogprobWire[] | null | undefined): OutputLogprob[] {
  return (tokens ?? []).map((token) => ({
    token: token.token,
    logprob: token.logprob,
    bytes: bytesOf(token.bytes),
    top_logprobs: token.top_logprobs.map((alternative) => ({ ...alternative, bytes: bytesOf(alternative.bytes) })),
  }));
}

const textPart = (
  text: string,
  logprobs: OutputLogprob[],
  annotations: OutputText["annotations"] = [],
): OutputText => ({
  type: "output_text",
  text,
  annotations,
  logprobs,
});

/** A whole chat completion as the response object, stored when asked. */
export function responseOf(completion: ChatCompletion, frame: ResponseFrame): Promise<ResponseObject> {
  const choice = completion.choices[0]!;
  const { content, tool_calls: calls = [] } = choice.message;
  const status = choice.finish_reason === "length" ? "incomplete" : "completed";
  const output: OutputItem[] = frame.fileSearch ? [frame.fileSearch.item] : [];
  if (content || !calls.length) {
    const said = content ?? "";
    const text = textPart(said, outputLogprobs(choice.logprobs?.content), citationsOf(said, frame.fileSearch));
    output.push({ id: frame.newId("msg_"), type: "message", status, role: "assistant", content: [text] });
  }
  for (const call of calls)
    output.push({
      id: frame.newId("fc_"),
      type: "function_call",
      status: "completed",
      call_id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
    });
  return kept(finished(frame, output, choice.finish_reason, completion.usage), frame);
}

type Event = ResponseEvent extends infer Each ? (Each extends unknown ? Omit<Each, "sequence_number"> : never) : never;
type OpenText = { id: string; index: number; text: string; logprobs: OutputLogprob[] };
type OpenCall = { id: string; index: number; chatIndex: number; callId: string; name: string; arguments: string };

/** Reads chat chunks into output items, and says each step as the Responses API's events. */
class EventWriter {
  readonly output: OutputItem[] = [];
  #text: OpenText | null = null;
  #call: OpenCall | null = null;
  constructor(readonly frame: ResponseFrame) {}

  text(delta: string, logprobs: OutputLogprob[]): Event[] {
    const events = this.#closeCall("completed");
    if (!this.#text) {
      this.#text = { id: this.frame.newId("msg_"), index: this.output.length, text: "", logprobs: [] };
      this.output.push(this.#message("in_progress", []));
      const at = { item_id: this.#text.id, output_index: this.#text.index, content_index: 0 };
      events.push(
        { type: "response.output_item.added", output_index: this.#text.index, item: this.#message("in_progress", []) },
        { type: "response.content_part.added", ...at, part: textPart("", []) },
      );
    }
    this.#text.text += delta;
    this.#text.logprobs.push(...logprobs);
    const at = { item_id: this.#text.id, output_index: this.#text.index, content_index: 0 };
    events.push({ type: "response.output_text.delta", ...at, delta, logprobs });
    return events;
  }

  call(delta: NonNullable<ChatCompletionChunk["choices"][number]["delta"]["tool_calls"]>[number]): Event[] {
    const events: Event[] = [];
    if (!this.#call || this.#call.chatIndex !== delta.index) {
      events.push(...this.#closeText("completed"), ...this.#closeCall("completed"));
      this.#call = {
        id: this.frame.newId("fc_"),
        index: this.output.length,
        chatIndex: delta.index,
        callId: delta.id ?? this.frame.newId("call_"),
        name: delta.function?.name ?? "",
        arguments: "",
      };
      this.output.push(this.#functionCall("in_progress"));
      events.push({
        type: "response.output_item.added",
        output_index: this.#call.index,
        item: this.#functionCall("in_progress"),
      });
    }
    const piece = delta.function?.arguments ?? "";
    if (piece) {
      this.#call.arguments += piece;
      events.push({
        type: "response.function_call_arguments.delta",
        item_id: this.#call.id,
        output_index: this.#call.index,
        delta: piece,
      });
    }
    return events;
  }

  /** The search that ran before the model answered, said as the events OpenAI sends for it. */
  fileSearch(): Event[] {
    const run = this.frame.fileSearch;
    if (!run) return [];
    const index = this.output.length;
    this.output.push(run.item);
    const at = { item_id: run.item.id, output_index: index };
    return [
      {
        type: "response.output_item.added",
        output_index: index,
        item: { ...run.item, status: "in_progress", results: null },
      },
      { type: "response.file_search_call.in_progress", ...at },
      { type: "response.file_search_call.searching", ...at },
      { type: "response.file_search_call.completed", ...at },
      { type: "response.output_item.done", output_index: index, item: run.item },
    ];
  }

  /** Closes what is open; a reply with no output at all is one empty message, as the whole response has. */
  end(status: "completed" | "incomplete"): Event[] {
    const events = [...this.#closeText(status), ...this.#closeCall(status)];
    const said = this.output.some((item) => item.type !== "file_search_call");
    if (!said) events.push(...this.text("", []), ...this.#closeText(status));
    return events;
  }

  #message(status: "in_progress" | "completed" | "incomplete", content: OutputText[]): OutputItem {
    return { id: this.#text!.id, type: "message", status, role: "assistant", content };
  }

  #functionCall(status: "in_progress" | "completed" | "incomplete"): OutputItem {
    const call = this.#call!;
    return {
      id: call.id,
      type: "function_call",
      status,
      call_id: call.callId,
      name: call.name,
      arguments: call.arguments,
    };
  }

  #closeText(status: "completed" | "incomplete"): Event[] {
    const open = this.#text;
    if (!open) return [];
    const annotations = citationsOf(open.text, this.frame.fileSearch);
    const part = textPart(open.text, open.logprobs, annotations);
    const item = this.#message(status, [part]);
    this.output[open.index] = item;
    this.#text = null;
    const at = { item_id: open.id, output_index: open.index, content_index: 0 };
    return [
      ...annotations.map((annotation, index): Event => ({
        type: "response.output_text.annotation.added",
        ...at,
        annotation_index: index,
        annotation,
      })),
      { type: "response.output_text.done", ...at, text: open.text, logprobs: open.logprobs },
      { type: "response.content_part.done", ...at, part },
      { type: "response.output_item.done", output_index: open.index, item },
    ];
  }

  #closeCall(status: "completed" | "incomplete"): Event[] {
    const open = this.#call;
    if (!open) return [];
    const item = this.#functionCall(status);
    this.output[open.index] = item;
    this.#call = null;
    return [
      {
        type: "response.function_call_arguments.done",
        item_id: open.id,
        output_index: open.index,
        name: open.name,
        arguments: open.arguments,
      },
      { type: "response.output_item.done", output_index: open.index, item },
    ];
  }
}

/** The chat chunks as the Responses API's events, numbered in order. */
export async function* responseEvents(
  chunks: AsyncGenerator<ChatCompletionChunk>,
  frame: ResponseFrame,
): AsyncGenerator<ResponseEvent> {
  let sequence = 0;
  const numbered = (event: Event) => ({ ...event, sequence_number: sequence++ }) as ResponseEvent;
  const writer = new EventWriter(frame);
  yield numbered({ type: "response.created", response: skeleton(frame) });
  yield numbered({ type: "response.in_progress", response: skeleton(frame) });
  for (const event of writer.fileSearch()) yield numbered(event);
  let finish: FinishReason = null;
  let usage: Usage | null = null;
  for await (const chunk of chunks) {
    usage = chunk.usage ?? usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) {
      for (const event of writer.text(choice.delta.content, outputLogprobs(choice.logprobs?.content)))
        yield numbered(event);
    }
    for (const call of choice.delta.tool_calls ?? []) for (const event of writer.call(call)) yield numbered(event);
    finish = choice.finish_reason ?? finish;
  }
  const cut = finish === "length" || finish === "content_filter";
  for (const event of writer.end(cut ? "incomplete" : "completed")) yield numbered(event);
  const response = await kept(finished(frame, writer.output, finish, usage), frame);
  yield numbered({ type: cut ? "response.incomplete" : "response.completed", response });
}

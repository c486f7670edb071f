/**
 * A chat generation as OpenAI's objects: streamed chunks (the role first, tool calls read out of
 * the reply as they form, the usage chunk last when asked for), or the whole completion.
 */
import type { TokenLogprob } from "../../engines/contract.js";
import { ToolCallParser, type ToolEvent } from "../../prompt/tool-calls.js";
import type { ToolSyntax } from "../../prompt/templates.js";
import type { Generation } from "../../pipeline/generation.js";
import type { ChatCompletion, ChatCompletionChunk } from "../../core/wire/chat-completion.js";
import { withTokenDetails } from "../../core/wire/shared.js";
import { collect, toWireFinishReason, wireUsage } from "./convert.js";
import { toWireLogprobs } from "./logprobs.js";

type ToolCallWire = NonNullable<ChatCompletion["choices"][number]["message"]["tool_calls"]>[number];
type Delta = ChatCompletionChunk["choices"][number]["delta"];

/** Per choice: reads tool calls out of the reply when the request is in tool mode. */
class ChoiceState {
  readonly parser: ToolCallParser | null;
  started = false;
  /** Token log probabilities not yet sent: they go with the next content delta. */
  pendingLogprobs: TokenLogprob[] = [];
  constructor(syntax: ToolSyntax | null) {
    this.parser = syntax ? new ToolCallParser(syntax) : null;
  }
}

/**
 * A reply that opened in the tool-call syntax is calls, however little of them the model wrote
 * before it was cut short: never text, streamed or whole. (Under our grammars a text reply
 * cannot open like a call, so the syntax's opening says what the reply is.)
 */
function isCalls(state: ChoiceState): boolean {
  return state.parser?.mode === "calls";
}

/** One rule streamed and whole: calls that ended on their own finish as `tool_calls`. */
function finishReason(state: ChoiceState, reason: "stop" | "length"): "stop" | "length" | "tool_calls" {
  return reason === "stop" && isCalls(state) ? "tool_calls" : reason;
}

/** Writes a stream's chunks as the hosted API streams them: each choice's opening, its deltas, its finish. */
class ChunkWriter {
  readonly #base: Omit<ChatCompletionChunk, "choices" | "usage">;
  /** With include_usage, every chunk carries `usage: null` and one last chunk carries the totals. */
  readonly #usageField: { usage?: null };
  readonly #newId: (prefix: string) => string;

  constructor(
    base: Omit<ChatCompletionChunk, "choices" | "usage">,
    includeUsage: boolean,
    newId: (prefix: string) => string,
  ) {
    this.#base = base;
    this.#usageField = includeUsage ? { usage: null } : {};
    this.#newId = newId;
  }

  chunk(
    index: number,
    delta: Delta,
    finish: "stop" | "length" | "tool_calls" | null = null,
    logprobs: TokenLogprob[] = [],
  ): ChatCompletionChunk {
    const wireLogprobs = logprobs.length ? { content: toWireLogprobs(logprobs), refusal: null } : null;
    return {
      ...this.#base,
      choices: [{ index, delta, logprobs: wireLogprobs, finish_reason: finish }],
      ...this.#usageField,
    };
  }

  /**
   * As the hosted API streams: a text reply opens with its own `{role, content: ""}` chunk; a
   * reply of tool calls carries the role in the first call's delta, with `content: null` (as does
   * one cut short before its first call's name).
   */
  opening(index: number, state: ChoiceState, delta: Delta): ChatCompletionChunk[] {
    if (state.started) return [this.#withLogprobs(index, state, delta)];
    state.started = true;
    if (delta.tool_calls || delta.content === null)
      return [this.chunk(index, { role: "assistant", content: null, ...delta, refusal: null })];
    const role = this.chunk(index, { role: "assistant", content: "", refusal: null });
    return delta.content ? [role, this.#withLogprobs(index, state, delta)] : [role];
  }

  /** A content delta carries the log probabilities of the tokens it completes. */
  #withLogprobs(index: number, state: ChoiceState, delta: Delta): ChatCompletionChunk {
    if (delta.content == null || delta.content === "") return this.chunk(index, delta);
    const logprobs = state.pendingLogprobs;
    state.pendingLogprobs = [];
    return this.chunk(index, delta, null, logprobs);
  }

  deltasOf(events: ToolEvent[]): Delta[] {
    return events.map((event) => {
      if (event.type === "text") return { content: event.text };
      if (event.type === "call") {
        const call = { index: event.index, id: this.#newId("call_"), type: "function" as const };
        return { tool_calls: [{ ...call, function: { name: event.name, arguments: "" } }] };
      }
      return { tool_calls: [{ index: event.index, function: { arguments: event.fragment } }] };
    });
  }
}

export async function* chatChunks(
  generation: Generation,
  base: Omit<ChatCompletionChunk, "choices" | "usage">,
  includeUsage: boolean,
  syntax: ToolSyntax | null,
  newId: (prefix: string) => string,
): AsyncGenerator<ChatCompletionChunk> {
  const writer = new ChunkWriter(base, includeUsage, newId);
  const states = new Map<number, ChoiceState>();
  for await (const { choice, part } of generation.parts) {
    let state = states.get(choice);
    if (!state) states.set(choice, (state = new ChoiceState(syntax)));
    if (part.type === "text-delta") {
      if (part.logprobs) state.pendingLogprobs.push(...part.logprobs);
      if (part.text === "") continue;
      const events: ToolEvent[] = state.parser ? state.parser.push(part.text) : [{ type: "text", text: part.text }];
      for (const delta of writer.deltasOf(events)) yield* writer.opening(choice, state, delta);
    } else {
      for (const delta of writer.deltasOf(state.parser?.end() ?? [])) yield* writer.opening(choice, state, delta);
      if (!state.started) yield* writer.opening(choice, state, { content: isCalls(state) ? null : "" });
      yield writer.chunk(choice, {}, finishReason(state, toWireFinishReason(part.reason)));
    }
  }
  if (includeUsage) yield { ...base, choices: [], usage: withTokenDetails(wireUsage(generation.usage())) };
}

export async function chatCompletion(
  generation: Generation,
  base: Omit<ChatCompletion, "choices" | "usage" | "object">,
  choiceCount: number,
  syntax: ToolSyntax | null,
  newId: (prefix: string) => string,
  logprobsAsked: boolean,
): Promise<ChatCompletion> {
  const { texts, reasons, usage, logprobs } = await collect(generation, choiceCount);
  return {
    ...base,
    object: "chat.completion",
    choices: texts.map((content, index) => {
      const state = new ChoiceState(syntax);
      state.parser?.push(content);
      state.parser?.end();
      const callReply = isCalls(state);
      const toolCalls: ToolCallWire[] = (callReply ? state.parser!.calls : []).map((call) => ({
        id: newId("call_"),
        type: "function",
        function: { name: call.name, arguments: call.arguments },
      }));
      return {
        index,
        message: {
          role: "assistant",
          content: callReply ? null : content,
          refusal: null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        // The content's tokens; a reply of tool calls has no content, so none.
        logprobs: logprobsAsked
          ? { content: callReply ? null : toWireLogprobs(logprobs[index] ?? []), refusal: null }
          : null,
        finish_reason: finishReason(state, reasons[index] ?? "stop"),
      };
    }),
    usage: withTokenDetails(usage),
  };
}

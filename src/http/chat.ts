import { BadRequestError } from "../errors/api.js";
import type { EngineMessage } from "../prompt/messages.js";
import type { PromptSegment } from "../engine/contract.js";
import { piecesText, renderChatPieces, renderChatSegments, toolSyntax, type ChatSegment, type ToolSyntax } from "../prompt/templates.js";
import { encodePrompt, type Tokenizer } from "../model/tokenizer.js";
import { chatCompletionRequestSchema, type ChatCompletion, type ChatCompletionChunk, type ChatCompletionRequest, type ChatMessage } from "../wire/schemas.js";
import { findModel, type HttpDependencies } from "../serve/dependencies.js";
import { collect, completionBudget, promptTokenIds, samplingOf, startGeneration, toWireFinishReason, wireUsage, type Generation } from "../serve/generation.js";
import { forward, routeRequest } from "../serve/upstream.js";
import { abortWith, respond } from "./respond.js";
import type { Route } from "./router.js";
import { fromLegacyFunctions, toLegacyChunks, toLegacyCompletion } from "./legacy-functions.js";
import { planStructured } from "./structured.js";
import { ToolCallParser, type ToolEvent } from "../prompt/tool-calls.js";
import { chatLogprobsOption, logitBiasOption, toWireLogprobs } from "./logprobs.js";
import type { TokenLogprob } from "../engine/contract.js";
import { parseWith, readJson } from "./validate.js";

function text(content: ChatMessage["content"]): string {
  if (content == null) return "";
  return typeof content === "string" ? content : content.map((part) => ("text" in part ? part.text : "")).join("");
}

/**
 * What OpenAI answers for a model without the capability, in its words: reasoning parameters,
 * audio output, and image, audio or file inputs (every model here reads and writes text only).
 */
function refuseCapabilities(request: ChatCompletionRequest, model: string): void {
  for (const name of ["reasoning_effort", "audio", "verbosity"] as const) {
    if (request[name] != null) throw new BadRequestError(`Unsupported parameter: '${name}' is not supported with this model.`, { param: name, code: "unsupported_parameter" });
  }
  if (request.web_search_options != null) {
    throw new BadRequestError("Web search options not supported with this model.", { param: "web_search_options", code: "unsupported_parameter" });
  }
  request.messages.forEach((message, index) => {
    if (!Array.isArray(message.content)) return;
    message.content.forEach((part, position) => {
      if (part.type === "text") return;
      const what = part.type === "image_url" ? "images" : part.type === "input_audio" ? "audio" : "files";
      throw new BadRequestError(`Invalid content type. ${part.type} is only supported by models that take ${what}; ${model} takes text only.`, {
        param: `messages[${index}].content[${position}].type`,
        code: "invalid_value",
      });
    });
  });
}

/** Wire messages to the engine's; a `tool` message must answer a call made earlier. */
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
          throw new BadRequestError("Invalid value for 'content': expected a string, got null.", { param: `messages.[${index}].content`, code: null });
        }
        for (const call of message.tool_calls ?? []) calls.add(call.id);
        return {
          role: "assistant",
          content: text(message.content),
          ...(message.name ? { name: message.name } : {}),
          ...(message.tool_calls?.length
            ? { toolCalls: message.tool_calls.map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments })) }
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

function finishReason(state: ChoiceState, reason: Parameters<typeof toWireFinishReason>[0]): "stop" | "length" | "tool_calls" {
  const wire = toWireFinishReason(reason);
  return wire === "stop" && state.parser?.mode === "calls" ? "tool_calls" : wire;
}

async function* chunks(
  generation: Generation,
  base: Omit<ChatCompletionChunk, "choices" | "usage">,
  includeUsage: boolean,
  syntax: ToolSyntax | null,
  newId: (prefix: string) => string,
): AsyncGenerator<ChatCompletionChunk> {
  // With include_usage, every chunk carries `usage: null` and one last chunk carries the totals.
  const usageField = includeUsage ? { usage: null } : {};
  const states = new Map<number, ChoiceState>();
  const chunk = (index: number, delta: Delta, finish: "stop" | "length" | "tool_calls" | null = null, logprobs: TokenLogprob[] = []): ChatCompletionChunk => ({
    ...base,
    choices: [{ index, delta, logprobs: logprobs.length ? { content: toWireLogprobs(logprobs), refusal: null } : null, finish_reason: finish }],
    ...usageField,
  });
  /** A content delta carries the log probabilities of the tokens it completes. */
  const withLogprobs = (index: number, state: ChoiceState, delta: Delta): ChatCompletionChunk => {
    if (delta.content == null || delta.content === "") return chunk(index, delta);
    const logprobs = state.pendingLogprobs;
    state.pendingLogprobs = [];
    return chunk(index, delta, null, logprobs);
  };
  /**
   * As the hosted API streams: a text reply opens with its own `{role, content: ""}` chunk; a
   * reply of tool calls carries the role in the first call's delta, with `content: null`.
   */
  const opening = (index: number, state: ChoiceState, delta: Delta): ChatCompletionChunk[] => {
    if (state.started) return [withLogprobs(index, state, delta)];
    state.started = true;
    if (delta.tool_calls) return [chunk(index, { role: "assistant", content: null, ...delta, refusal: null })];
    const role = chunk(index, { role: "assistant", content: "", refusal: null });
    return delta.content ? [role, withLogprobs(index, state, delta)] : [role];
  };
  const deltasOf = (state: ChoiceState, events: ToolEvent[]): Delta[] =>
    events.map((event) => {
      if (event.type === "text") return { content: event.text };
      if (event.type === "call") {
        return { tool_calls: [{ index: event.index, id: newId("call_"), type: "function", function: { name: event.name, arguments: "" } }] };
      }
      return { tool_calls: [{ index: event.index, function: { arguments: event.fragment } }] };
    });

  for await (const { choice, part } of generation.parts) {
    let state = states.get(choice);
    if (!state) states.set(choice, (state = new ChoiceState(syntax)));
    if (part.type === "text-delta") {
      if (part.logprobs) state.pendingLogprobs.push(...part.logprobs);
      if (part.text === "") continue;
      const events: ToolEvent[] = state.parser ? state.parser.push(part.text) : [{ type: "text", text: part.text }];
      for (const delta of deltasOf(state, events)) yield* opening(choice, state, delta);
    } else {
      for (const delta of deltasOf(state, state.parser?.end() ?? [])) yield* opening(choice, state, delta);
      if (!state.started) yield* opening(choice, state, { content: "" });
      yield chunk(choice, {}, finishReason(state, part.reason));
    }
  }
  if (includeUsage) yield { ...base, choices: [], usage: wireUsage(generation.usage()) };
}

async function complete(
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
      const calls = state.parser?.mode === "calls" ? state.parser.calls : [];
      const toolCalls: ToolCallWire[] = calls.map((call) => ({ id: newId("call_"), type: "function", function: { name: call.name, arguments: call.arguments } }));
      return {
        index,
        message: { role: "assistant", content: toolCalls.length ? null : content, refusal: null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        // The content's tokens; a reply of tool calls has no content, so none.
        logprobs: logprobsAsked ? { content: toolCalls.length ? null : toWireLogprobs(logprobs[index] ?? []), refusal: null } : null,
        finish_reason: toolCalls.length && reasons[index] !== "length" ? "tool_calls" : (reasons[index] ?? "stop"),
      };
    }),
    usage,
  };
}

/** Each segment's ids; a prompt left whole (a first turn) has the ids already counted, so it is not tokenized twice. */
function segmentsWithTokens(segments: readonly ChatSegment[], whole: number[], tokenizer: Tokenizer): PromptSegment[] {
  if (segments.length === 1) return [{ text: segments[0]!.text, reply: segments[0]!.reply, tokens: whole }];
  return segments.map((segment) => ({ text: segment.text, reply: segment.reply, tokens: encodePrompt(tokenizer, segment.pieces) }));
}

/**
 * The client's body with every completion limit it sent (`max_tokens`, `max_completion_tokens`)
 * set to what was reserved, or `max_tokens` where it sent none: an upstream honours whichever it
 * reads, so no reply can cost more than was admitted.
 */
function boundedBody(body: Record<string, unknown>, maxTokens: number): Record<string, unknown> {
  const limits = ["max_tokens", "max_completion_tokens"].filter((name) => body[name] != null);
  return { ...body, ...Object.fromEntries((limits.length ? limits : ["max_tokens"]).map((name) => [name, maxTokens])) };
}

export function chatRoute(dependencies: HttpDependencies): Route {
  return {
    method: "POST",
    generates: true,
    path: /^\/chat\/completions\/?$/,
    handler: async (context) => {
      const { json, legacy } = fromLegacyFunctions(await readJson(context.body));
      const request = parseWith(chatCompletionRequestSchema, json);
      if (request.stream_options && request.stream !== true) {
        throw new BadRequestError("The 'stream_options' parameter is only allowed when 'stream' is enabled.", { param: "stream_options" });
      }
      const model = findModel(dependencies, request.model);
      refuseCapabilities(request, model.id);
      const decision = await routeRequest(dependencies, context, model);
      const requested = request.max_completion_tokens ?? request.max_tokens;
      if (decision.target === "remote") {
        // The upstream applies its own template and tool syntax; here the messages are checked
        // and the prompt counted, for the context window and the reservation.
        const messages = toEngineMessages(request.messages);
        const tokenizer = await dependencies.tokenizers.forFamily(model.family);
        const pieces = [...renderChatPieces(model.family, messages, []), { text: request.tools ? JSON.stringify(request.tools) : "", control: false }];
        const promptTokens = promptTokenIds(tokenizer, pieces, model, "messages").length;
        const maxTokens = completionBudget(model, promptTokens, requested, "messages");
        return forward(dependencies, context, {
          model,
          decision,
          endpoint: "chat/completions",
          body: boundedBody(json as Record<string, unknown>, maxTokens),
          stream: request.stream === true,
          includeUsage: request.stream_options?.include_usage === true,
          promptTokens,
          maxCompletionTokens: maxTokens * (request.n ?? 1),
          countTokens: (text) => tokenizer.encode(text).length,
        });
      }
      const structured = planStructured(request, model.family, toEngineMessages(request.messages));
      const tokenizer = await dependencies.tokenizers.forFamily(model.family);
      const pieces = renderChatPieces(model.family, structured.messages, structured.tools ?? []);
      const tokens = promptTokenIds(tokenizer, pieces, model, "messages");
      const promptTokens = tokens.length;
      const maxTokens = completionBudget(model, promptTokens, requested, "messages");
      const syntax = structured.tools ? toolSyntax[model.family] : null;
      const logprobs = chatLogprobsOption(request);
      const logitBias = logitBiasOption(request.logit_bias, tokenizer);

      const controller = abortWith(context.request);
      const generation = await startGeneration(
        dependencies,
        context,
        {
          model,
          // Tool requests are one raw prompt under a grammar; plain chat is the same rendering, in
          // pieces, so an engine can reuse the conversation's cached prefix.
          prompts: [
            {
              input: structured.ownPrompt
                ? { kind: "text", prompt: piecesText(pieces), tokens }
                : {
                    kind: "chat",
                    messages: structured.messages,
                    segments: segmentsWithTokens(renderChatSegments(model.family, structured.messages, [], pieces), tokens, tokenizer),
                    tokens,
                  },
              promptTokens,
            },
          ],
          choicesPerPrompt: request.n ?? 1,
          sampling: { ...samplingOf(request, maxTokens), ...(logprobs !== undefined ? { logprobs } : {}), ...(logitBias ? { logitBias } : {}) },
          ...(structured.constraint ? { constraint: structured.constraint } : {}),
        },
        controller.signal,
      );
      const base = {
        id: dependencies.newId("chatcmpl-"),
        created: Math.floor(dependencies.clock() / 1000),
        model: model.id,
        system_fingerprint: null,
        // The tier that served it, as OpenAI says when asked: there is one.
        ...(request.service_tier ? { service_tier: "default" } : {}),
      };
      return respond(
        context,
        controller,
        generation,
        request.stream === true,
        (running) => {
          const stream = chunks(running, { ...base, object: "chat.completion.chunk" }, request.stream_options?.include_usage === true, syntax, dependencies.newId);
          return legacy ? toLegacyChunks(stream) : stream;
        },
        async (running) => {
          const completion = await complete(running, base, request.n ?? 1, syntax, dependencies.newId, logprobs !== undefined);
          return legacy ? toLegacyCompletion(completion) : completion;
        },
        dependencies.respond,
      );
    },
  };
}

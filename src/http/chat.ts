import { BadRequestError, toApiError } from "../errors.js";
import type { EngineMessage, OutputConstraint } from "../engine/types.js";
import { renderChat } from "../templates.js";
import { chatCompletionRequestSchema, type ChatCompletion, type ChatCompletionChunk, type ChatCompletionRequest, type ChatMessage } from "../wire/schemas.js";
import { findModel, jsonResponse, type HttpDependencies } from "./dependencies.js";
import { collect, completionBudget, primed, samplingOf, startGeneration, toWireFinishReason, wireUsage, type Generation } from "./generation.js";
import type { Route, RouteContext } from "./router.js";
import { sseHeaders, sseStream } from "./sse.js";
import { parseWith, readJson } from "./validate.js";

function text(content: ChatMessage["content"]): string {
  if (content == null) return "";
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
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

function constraintOf(request: ChatCompletionRequest): OutputConstraint | undefined {
  const format = request.response_format;
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { kind: "json" };
  return { kind: "json", schema: JSON.stringify(format.json_schema.schema ?? {}) };
}

function toolsOf(request: ChatCompletionRequest) {
  if (!request.tools?.length) {
    if (request.tool_choice && request.tool_choice !== "none" && request.tool_choice !== "auto") {
      throw new BadRequestError("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", { param: "tool_choice" });
    }
    return undefined;
  }
  const names = new Set(request.tools.map((tool) => tool.function.name));
  const choice = request.tool_choice;
  if (choice && typeof choice === "object" && !names.has(choice.function.name)) {
    throw new BadRequestError(`Invalid value for 'tool_choice': no function named '${choice.function.name}' was specified in 'tools'.`, {
      param: "tool_choice.function.name",
    });
  }
  return request.tools.map((tool) => ({
    name: tool.function.name,
    ...(tool.function.description !== undefined ? { description: tool.function.description } : {}),
    ...(tool.function.parameters !== undefined ? { parameters: tool.function.parameters } : {}),
  }));
}

async function* chunks(generation: Generation, base: Omit<ChatCompletionChunk, "choices" | "usage">, includeUsage: boolean): AsyncGenerator<ChatCompletionChunk> {
  // With include_usage, every chunk carries `usage: null` and one last chunk carries the totals.
  const usageField = includeUsage ? { usage: null } : {};
  const started = new Set<number>();
  for await (const { choice, part } of generation.parts) {
    if (!started.has(choice)) {
      started.add(choice);
      yield { ...base, choices: [{ index: choice, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }], ...usageField };
    }
    if (part.type === "text-delta") {
      yield { ...base, choices: [{ index: choice, delta: { content: part.text }, logprobs: null, finish_reason: null }], ...usageField };
    } else {
      yield { ...base, choices: [{ index: choice, delta: {}, logprobs: null, finish_reason: toWireFinishReason(part.reason) }], ...usageField };
    }
  }
  if (includeUsage) {
    const usage = generation.usage();
    yield {
      ...base,
      choices: [],
      usage: wireUsage(usage),
    };
  }
}

async function complete(generation: Generation, base: Omit<ChatCompletion, "choices" | "usage" | "object">, choiceCount: number): Promise<ChatCompletion> {
  const { texts, reasons, usage } = await collect(generation, choiceCount);
  return {
    ...base,
    object: "chat.completion",
    choices: texts.map((content, index) => ({
      index,
      message: { role: "assistant", content, refusal: null },
      logprobs: null,
      finish_reason: reasons[index] ?? "stop",
    })),
    usage,
  };
}

/**
 * Streams or collects a generation. The controller is aborted when the client goes away,
 * by `request.signal` or by cancelling the body, and the engine stops.
 */
export async function respond<Event>(
  context: RouteContext,
  controller: AbortController,
  generation: Generation,
  stream: boolean,
  toEvents: (generation: Generation) => AsyncGenerator<Event>,
  toBody: (generation: Generation) => Promise<unknown>,
): Promise<Response> {
  if (!stream) return jsonResponse(await toBody(generation));
  const events = await primed(toEvents(generation));
  const body = sseStream({
    events,
    onError: (error) => toApiError(error, context.requestId).toJSON(),
    onCancel: () => controller.abort(new DOMException("The client stopped reading the stream.", "AbortError")),
  });
  return new Response(body, { headers: sseHeaders });
}

export function abortWith(request: Request): AbortController {
  const controller = new AbortController();
  const signal = request.signal as AbortSignal | undefined;
  if (signal?.aborted) controller.abort(signal.reason);
  signal?.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}

export function chatRoute(dependencies: HttpDependencies): Route {
  return {
    method: "POST",
    generates: true,
    path: /^\/chat\/completions\/?$/,
    handler: async (context) => {
      const request = parseWith(chatCompletionRequestSchema, await readJson(context.request));
      if (request.stream_options && request.stream !== true) {
        throw new BadRequestError("The 'stream_options' parameter is only allowed when 'stream' is enabled.", { param: "stream_options" });
      }
      const model = findModel(dependencies, request.model);
      const messages = toEngineMessages(request.messages);
      const tools = toolsOf(request);
      const constraint = constraintOf(request);
      const tokenizer = await dependencies.tokenizers.forFamily(model.family);
      const promptTokens = tokenizer.encode(renderChat(model.family, messages)).length;
      const requested = request.max_completion_tokens ?? request.max_tokens;
      const maxTokens = completionBudget(model, promptTokens, requested, "messages");

      const controller = abortWith(context.request);
      const generation = await startGeneration(
        dependencies,
        context,
        {
          model,
          prompts: [{ input: { kind: "chat", messages }, promptTokens }],
          choicesPerPrompt: request.n ?? 1,
          sampling: samplingOf(request, maxTokens),
          ...(constraint ? { constraint } : {}),
          ...(tools ? { tools, toolChoice: request.tool_choice ?? "auto" } : {}),
        },
        controller.signal,
      );
      const base = { id: dependencies.newId("chatcmpl-"), created: Math.floor(dependencies.clock() / 1000), model: model.id, system_fingerprint: null };
      return respond(
        context,
        controller,
        generation,
        request.stream === true,
        (running) => chunks(running, { ...base, object: "chat.completion.chunk" }, request.stream_options?.include_usage === true),
        (running) => complete(running, base, request.n ?? 1),
      );
    },
  };
}

/**
 * OpenAI's deprecated `functions` and `function_call`, served as tools. The request is rewritten
 * at the boundary, before validation: `functions` become `tools`, `function_call` becomes
 * `tool_choice` (one call at most, as the old API made), an assistant's `function_call` becomes a
 * tool call, and a `function` message the `tool` answer to the latest call of that name. The
 * answer is written back in the old shape: `message.function_call` (or `delta.function_call`) and
 * `finish_reason: "function_call"`.
 */
import { BadRequestError } from "../../core/errors/api.js";
import type { ChatCompletion, ChatCompletionChunk } from "../../core/wire/chat-completion.js";

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function toolChoice(functionCall: unknown): unknown {
  if (functionCall === "none" || functionCall === "auto" || functionCall == null) return functionCall ?? undefined;
  if (isObject(functionCall) && typeof functionCall.name === "string")
    return { type: "function", function: { name: functionCall.name } };
  throw new BadRequestError("Invalid 'function_call': expected 'none', 'auto' or {\"name\": …}.", {
    param: "function_call",
    code: "invalid_value",
  });
}

function messages(list: unknown): unknown {
  if (!Array.isArray(list)) return list;
  const callIds = new Map<string, string>();
  return list.map((message, index) => {
    if (!isObject(message)) return message;
    const { function_call: call, ...rest } = message;
    if (message.role === "assistant" && isObject(call)) {
      const id = `call_function_${index}`;
      callIds.set(String(call.name), id);
      return {
        ...rest,
        tool_calls: [{ id, type: "function", function: { name: call.name, arguments: call.arguments } }],
      };
    }
    if (message.role === "function") {
      const id = callIds.get(String(message.name));
      if (!id)
        throw new BadRequestError(
          `Invalid parameter: the 'function' message at messages[${index}] answers no earlier function_call named '${String(message.name)}'.`,
          { param: `messages[${index}]`, code: "invalid_value" },
        );
      return { role: "tool", tool_call_id: id, content: message.content ?? "" };
    }
    return message;
  });
}

/** Whether a history holds the old shapes: a `function` message, or an assistant's `function_call`. */
function hasLegacyTurns(list: unknown): boolean {
  return (
    Array.isArray(list) &&
    list.some((message) => isObject(message) && (message.role === "function" || isObject(message.function_call)))
  );
}

/** The request parameters of the old form, which the chat schema does not have: they become tools first. */
export const legacyFunctionParameters = ["functions", "function_call"] as const;

/**
 * The request with the deprecated fields as tools, and whether it used them. A history in the old
 * shapes is taken without them too (the hosted API takes it), its turns rewritten as tool turns.
 */
export function fromLegacyFunctions(json: unknown): { json: unknown; legacy: boolean } {
  if (!isObject(json)) return { json, legacy: false };
  if (legacyFunctionParameters.every((name) => json[name] === undefined)) {
    return {
      json: hasLegacyTurns(json.messages) ? { ...json, messages: messages(json.messages) } : json,
      legacy: false,
    };
  }
  if (json.tools !== undefined || json.tool_choice !== undefined) {
    throw new BadRequestError(
      "Give either 'tools' and 'tool_choice' or the deprecated 'functions' and 'function_call', not both.",
      { param: "functions", code: "invalid_value" },
    );
  }
  const { functions, function_call: functionCall, ...rest } = json;
  const tools = Array.isArray(functions)
    ? functions.map((definition) => ({ type: "function", function: definition }))
    : functions;
  const choice = toolChoice(functionCall);
  return {
    json: {
      ...rest,
      messages: messages(json.messages),
      ...(tools !== undefined ? { tools, parallel_tool_calls: false } : {}),
      ...(choice !== undefined ? { tool_choice: choice } : {}),
    },
    legacy: true,
  };
}

/** A rewritten request's param in the old terms: `tools[0].function.name` is `functions[0].name`. */
function legacyParam(param: string): string {
  return param
    .replace(/^tools\[(\d+)\]\.function(?=$|\.)/, "functions[$1]")
    .replace(/^tools(?=$|\[)/, "functions")
    .replace(/^tool_choice\.function(?=$|\.)/, "function_call")
    .replace(/^tool_choice$/, "function_call");
}

/**
 * A 400 about a rewritten request, in the terms the client sent: the param it names, quoted in
 * the message, as `functions` and `function_call` rather than the tools they became.
 */
export function inLegacyTerms(error: BadRequestError): BadRequestError {
  const param = error.param === null ? null : legacyParam(error.param);
  const message = error.message.replace(/'(tools?[^']*)'/g, (_, name: string) => `'${legacyParam(name)}'`);
  if (param === error.param && message === error.message) return error;
  return new BadRequestError(message, { param, code: error.code });
}

/**
 * A completion in the old shape: the call as `function_call`. An upstream's completion is read as
 * one too: its choices are checked only loosely (src/core/wire/upstream.ts), so one without a message
 * passes as it is.
 */
function toLegacyCompletion(completion: ChatCompletion): ChatCompletion {
  return {
    ...completion,
    choices: completion.choices.map((choice) => {
      if (!isObject(choice.message)) return choice;
      const { tool_calls: calls, ...message } = choice.message;
      const call = calls?.[0];
      return {
        ...choice,
        message: call ? { ...message, function_call: call.function } : message,
        finish_reason: choice.finish_reason === "tool_calls" ? "function_call" : choice.finish_reason,
      };
    }),
  };
}

/** Chunks in the old shape: each tool-call delta as a `function_call` delta. */
async function* toLegacyChunks(chunks: AsyncIterable<ChatCompletionChunk>): AsyncGenerator<ChatCompletionChunk> {
  for await (const chunk of chunks) {
    yield {
      ...chunk,
      choices: chunk.choices.map((choice) => {
        if (!isObject(choice.delta)) return choice;
        const { tool_calls: calls, ...delta } = choice.delta;
        const call = calls?.[0]?.function;
        return {
          ...choice,
          delta: call ? { ...delta, function_call: call } : delta,
          finish_reason: choice.finish_reason === "tool_calls" ? "function_call" : choice.finish_reason,
        };
      }),
    };
  }
}

/** An upstream's answer in the old shape, for a request that used `functions`. */
export const legacyReshape = {
  whole: (body: unknown): unknown => toLegacyCompletion(body as ChatCompletion),
  chunks: (events: AsyncGenerator<unknown>): AsyncGenerator<unknown> =>
    toLegacyChunks(events as AsyncGenerator<ChatCompletionChunk>),
};

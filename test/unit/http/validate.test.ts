import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../../src/core/errors/api.js";
import { formatParam, parseWith, readJson, startReadingBody } from "../../../src/http/validate.js";
import { chatCompletionRequestSchema } from "../../../src/core/wire/chat-request.js";
import { completionRequestSchema } from "../../../src/core/wire/completion-request.js";

function failure(schema: Parameters<typeof parseWith>[0], input: unknown): BadRequestError {
  try {
    parseWith(schema, input);
  } catch (error) {
    if (error instanceof BadRequestError) return error;
    throw error;
  }
  throw new Error("expected a 400");
}

const user = [{ role: "user", content: "hi" }];

describe("request schemas", () => {
  it("accept a full chat request", () => {
    const request = parseWith(chatCompletionRequestSchema, {
      model: "m",
      messages: [
        { role: "system", content: "s" },
        { role: "user", content: [{ type: "text", text: "u" }], name: "ann" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }],
        },
        { role: "tool", content: "42", tool_call_id: "call_1" },
      ],
      temperature: 0,
      top_p: 1,
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
      stop: ["a", "b"],
      presence_penalty: -2,
      frequency_penalty: 2,
      seed: 1,
      n: 2,
      response_format: {
        type: "json_schema",
        json_schema: { name: "answer", schema: { type: "object" }, strict: true },
      },
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
      tool_choice: { type: "function", function: { name: "f" } },
      parallel_tool_calls: false,
    });
    expect(request.messages).toHaveLength(4);
  });

  it("name the offending field the way OpenAI does", () => {
    const cases: [unknown, string, string | null][] = [
      [{ messages: user }, "model", "missing_required_parameter"],
      [{ model: "m" }, "messages", "missing_required_parameter"],
      [{ model: "m", messages: [] }, "messages", "empty_array"],
      [{ model: 3, messages: user }, "model", "invalid_type"],
      [{ model: "m", messages: user, temperature: 2.5 }, "temperature", "invalid_value"],
      [{ model: "m", messages: user, temperature: -0.1 }, "temperature", "invalid_value"],
      [{ model: "m", messages: user, top_p: 1.01 }, "top_p", "invalid_value"],
      [{ model: "m", messages: user, presence_penalty: 3 }, "presence_penalty", "invalid_value"],
      [{ model: "m", messages: user, max_tokens: 0 }, "max_tokens", "invalid_value"],
      [{ model: "m", messages: user, n: 0 }, "n", "invalid_value"],
      [{ model: "m", messages: user, stop: ["a", "b", "c", "d", "e"] }, "stop", "array_above_max_length"],
      [
        {
          model: "m",
          messages: user,
          tools: Array.from({ length: 129 }, () => ({ type: "function", function: { name: "f" } })),
        },
        "tools",
        "array_above_max_length",
      ],
      [{ model: "m", messages: [{ role: "user" }] }, "messages[0].content", "missing_required_parameter"],
      // OpenAI's content arrays hold one part at least, in every role and in a prediction.
      [{ model: "m", messages: [{ role: "user", content: [] }] }, "messages[0].content", "empty_array"],
      [{ model: "m", messages: [{ role: "system", content: [] }, ...user] }, "messages[0].content", "empty_array"],
      [{ model: "m", messages: [...user, { role: "assistant", content: [] }] }, "messages[1].content", "empty_array"],
      [
        { model: "m", messages: user, prediction: { type: "content", content: [] } },
        "prediction.content",
        "empty_array",
      ],
      [{ model: "m", messages: [{ role: "robot", content: "x" }] }, "messages[0].role", "invalid_value"],
      [
        { model: "m", messages: [{ role: "tool", content: "x" }] },
        "messages[0].tool_call_id",
        "missing_required_parameter",
      ],
      [{ model: "m", messages: user, logprobs: "yes" }, "logprobs", "invalid_type"],
      [{ model: "m", messages: user, logit_bias: { abc: 1 } }, "logit_bias", null],
      [{ model: "m", messages: user, frobnicate: 1 }, "frobnicate", "unknown_parameter"],
      [
        { model: "m", messages: user, stream_options: { include_usage: true, extra: 1 } },
        "stream_options.extra",
        "unknown_parameter",
      ],
      [
        { model: "m", messages: user, tools: [{ type: "function", function: { name: "bad name!" } }] },
        "tools[0].function.name",
        "invalid_value",
      ],
      [{ model: "m", messages: user, response_format: { type: "xml" } }, "response_format.type", "invalid_value"],
    ];
    for (const [input, param, code] of cases) {
      const error = failure(chatCompletionRequestSchema, input);
      expect({ input, param: error.param, code: error.code, status: error.status, type: error.type }).toEqual({
        input,
        param,
        code,
        status: 400,
        type: "invalid_request_error",
      });
    }
  });

  it("say an array is too long in OpenAI's words, and never echo a long value back", () => {
    const stop = failure(chatCompletionRequestSchema, { model: "m", messages: user, stop: ["a", "b", "c", "d", "e"] });
    expect(stop.message).toBe(
      "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead.",
    );
    const empty = failure(chatCompletionRequestSchema, { model: "m", messages: [] });
    expect(empty).toMatchObject({ param: "messages", code: "empty_array" });
    expect(empty.message).toBe(
      "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
    );
    // A batch past 2,048 prompts: refused by its length, before any prompt is counted.
    const prompts = failure(completionRequestSchema, {
      model: "m",
      prompt: Array.from({ length: 300_000 }, () => "a"),
    });
    expect(prompts).toMatchObject({ param: "prompt", code: "array_above_max_length" });
    expect(prompts.message).toBe(
      "Invalid 'prompt': array too long. Expected an array with maximum length 2048, but got an array with length 300000 instead.",
    );
    const wrong = failure(completionRequestSchema, { model: "m", prompt: [["x".repeat(1_000_000)]] });
    expect(wrong.param).toBe("prompt[0][0]");
    expect(wrong.message.length).toBeLessThan(300);
    // A value nested a million deep is quoted without recursing into it (that was a 500 before).
    const million = `${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}`;
    const deep = JSON.parse(`{"model":"m","messages":[],"tool_choice":${million},"stop":${million}}`);
    deep.messages = user;
    const nested = failure(chatCompletionRequestSchema, deep);
    expect(nested).toMatchObject({ param: "tool_choice", code: "invalid_value" });
    expect(nested.message).toBe("Invalid value for 'tool_choice': [[[[[…]]]]] is not supported here.");
    delete deep.tool_choice;
    expect(failure(chatCompletionRequestSchema, deep).message).toBe(
      "Invalid type for 'stop[0]': expected a string, but got an array instead.",
    );
    const key = failure(chatCompletionRequestSchema, { model: "m", messages: user, ["k".repeat(1_000_000)]: 1 });
    expect(key.code).toBe("unknown_parameter");
    expect(key.message.length).toBeLessThan(300);
  });

  it("word types, lists and token ids as OpenAI does", () => {
    const chat = (extra: Record<string, unknown>) =>
      failure(chatCompletionRequestSchema, { model: "m", messages: user, ...extra });
    const said = (error: BadRequestError) => [error.message, error.param, error.code];
    expect(said(chat({ max_tokens: 1.5 }))).toEqual([
      "Invalid type for 'max_tokens': expected an integer, but got a decimal instead.",
      "max_tokens",
      "invalid_type",
    ]);
    expect(chat({ temperature: "1" }).message).toBe(
      "Invalid type for 'temperature': expected a number, but got a string instead.",
    );
    // JSON.parse reads 1e999 as Infinity.
    expect(
      failure(
        chatCompletionRequestSchema,
        JSON.parse('{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1e999}'),
      ).message,
    ).toBe("Invalid type for 'seed': expected a number, but got a number out of range instead.");
    // Seeds are OpenAI's signed 64-bit integers: the ends (as doubles round them) are taken, past them refused.
    const seedOf = (text: string) =>
      chatCompletionRequestSchema.safeParse(
        JSON.parse(`{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":${text}}`),
      );
    expect(seedOf("9223372036854775807").data?.seed).toBe(2 ** 63);
    expect(seedOf("-9223372036854775808").data?.seed).toBe(-(2 ** 63));
    expect(said(chat({ seed: 2 ** 63 + 2048 }))).toEqual([
      "Invalid 'seed': expected a value <= 9223372036854775807, but got 9223372036854778000 instead.",
      "seed",
      "invalid_value",
    ]);
    expect(chat({ seed: -(2 ** 64) }).message).toBe(
      "Invalid 'seed': expected a value >= -9223372036854775808, but got -18446744073709552000 instead.",
    );
    expect(chat({ seed: 1.5 }).message).toBe(
      "Invalid type for 'seed': expected an integer, but got a decimal instead.",
    );
    // A participant's name, in OpenAI's words (seen quoted by clients whose names held a space).
    expect(said(chat({ messages: [{ role: "user", content: "hi", name: "Ada Lovelace" }] }))).toEqual([
      "Invalid 'messages[0].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
      "messages[0].name",
      "invalid_value",
    ]);
    expect(
      chatCompletionRequestSchema.safeParse({
        model: "m",
        messages: [{ role: "user", content: "hi", name: "Ada_L-1" }],
      }).success,
    ).toBe(true);
    expect(chat({ logit_bias: "x" }).message).toBe(
      "Invalid type for 'logit_bias': expected an object, but got a string instead.",
    );
    expect(said(chat({ stop: 3 }))).toEqual([
      "Invalid type for 'stop': expected one of a string or an array, but got an integer instead.",
      "stop",
      "invalid_type",
    ]);
    expect(said(chat({ messages: [{ role: "robot", content: "x" }] }))).toEqual([
      "Invalid value: 'robot'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.",
      "messages[0].role",
      "invalid_value",
    ]);
    expect(chat({ service_tier: "turbo" }).message).toBe(
      "Invalid value: 'turbo'. Supported values are: 'auto', 'default', 'flex', 'scale', 'priority', and 'fast'.",
    );
    // z.record would drop a `__proto__` key in silence; it is refused as the non-id it is.
    for (const bias of [{ abc: 1 }, JSON.parse('{"1":2,"__proto__":5}')]) {
      const key = Object.keys(bias).find((name) => name !== "1");
      expect(said(chat({ logit_bias: bias }))).toEqual([
        `Invalid key in 'logit_bias': ${key}. You should only be submitting non-negative integers.`,
        "logit_bias",
        null,
      ]);
    }
    const badName = { type: "function", function: { name: "get weather" } };
    expect(said(chat({ tools: [badName] }))).toEqual([
      "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
      "tools[0].function.name",
      "invalid_value",
    ]);
    expect(said(chat({ tools: [{ type: "function", function: { name: "f".repeat(65) } }] }))).toEqual([
      "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead.",
      "tools[0].function.name",
      "string_above_max_length",
    ]);
    expect(said(chat({ tools: [] }))).toEqual([
      "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      "tools",
      "empty_array",
    ]);
    // OpenAI's four forms of a prompt; ids are checked against the model's vocabulary later.
    for (const prompt of ["a", ["a", "b"], [1, 2, 3], [[1, 2], [3]], [-1]])
      expect(parseWith(completionRequestSchema, { model: "m", prompt }).prompt).toEqual(prompt);
    const prompt = (value: unknown) => said(failure(completionRequestSchema, { model: "m", prompt: value }));
    expect(prompt(["a", 3])).toEqual([
      "Invalid type for 'prompt[1]': expected a string, but got an integer instead.",
      "prompt[1]",
      "invalid_type",
    ]);
    expect(prompt([[1], [2, 2.5]])).toEqual([
      "Invalid type for 'prompt[1][1]': expected an integer, but got a decimal instead.",
      "prompt[1][1]",
      "invalid_type",
    ]);
    expect(prompt([]).slice(1)).toEqual(["prompt", "empty_array"]);
    expect(prompt([[1], []])[0]).toBe(
      "Invalid 'prompt[1]': empty array. Expected an array with minimum length 1, but got an empty array instead.",
    );
    expect(failure(completionRequestSchema, { model: "m", prompt: 3 }).message).toBe(
      "Invalid type for 'prompt': expected one of a string or an array, but got an integer instead.",
    );
    // The first item, where a form took the list for its own: empty, or wrong inside.
    expect(prompt([[]])).toEqual([
      "Invalid 'prompt[0]': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      "prompt[0]",
      "empty_array",
    ]);
    expect(prompt([[1, 1.5]]).slice(1)).toEqual(["prompt[0][1]", "invalid_type"]);
    expect(said(chat({ stop: [3] }))).toEqual([
      "Invalid type for 'stop[0]': expected a string, but got an integer instead.",
      "stop[0]",
      "invalid_type",
    ]);
  });

  it("name the content part at fault, and what it lacks", () => {
    const said = (error: BadRequestError) => [error.message, error.param, error.code];
    const part = (value: unknown, role = "user") =>
      said(failure(chatCompletionRequestSchema, { model: "m", messages: [{ role, content: [value] }] }));
    expect(part({ type: "text" })).toEqual([
      "Missing required parameter: 'messages[0].content[0].text'.",
      "messages[0].content[0].text",
      "missing_required_parameter",
    ]);
    expect(part({ type: "refusal" }, "assistant").slice(1)).toEqual([
      "messages[0].content[0].refusal",
      "missing_required_parameter",
    ]);
    expect(part({ type: "text", text: 3 })[0]).toBe(
      "Invalid type for 'messages[0].content[0].text': expected a string, but got an integer instead.",
    );
    expect(part({ type: "video" })).toEqual([
      "Invalid value: 'video'. Supported values are: 'text', 'image_url', 'input_audio', and 'file'.",
      "messages[0].content[0].type",
      "invalid_value",
    ]);
    // A refusal is an assistant's part, not a user's.
    expect(part({ type: "refusal", refusal: "no" })[1]).toBe("messages[0].content[0].type");
    expect(part(null)[0]).toBe("Invalid type for 'messages[0].content[0]': expected an object, but got null instead.");
  });

  it("validate the legacy completions request", () => {
    expect(parseWith(completionRequestSchema, { model: "m", prompt: ["a", "b"] }).prompt).toEqual(["a", "b"]);
    expect(failure(completionRequestSchema, { model: "m" }).param).toBe("prompt");
    expect(failure(completionRequestSchema, { model: "m", prompt: [] }).param).toBe("prompt");
    expect(failure(completionRequestSchema, { model: "m", prompt: "x", suffix: 3 }).param).toBe("suffix");
  });

  it("formats nested params", () => {
    expect(formatParam(["messages", 3, "tool_calls", 0, "id"])).toBe("messages[3].tool_calls[0].id");
  });

  it("refuses malformed and empty JSON bodies with 400", async () => {
    const body = (text: string) => startReadingBody(new Request("https://x.example/", { method: "POST", body: text }));
    await expect(readJson(body("{oops"))).rejects.toMatchObject({ status: 400, code: "invalid_json" });
    await expect(readJson(body(""))).rejects.toMatchObject({ status: 400, code: "invalid_json" });
    await expect(readJson(body('{"a":1}'))).resolves.toEqual({ a: 1 });
  });
});

/**
 * The parameters real OpenAI clients send, each honoured, accepted (where that is faithful), or
 * refused in OpenAI's words; one case per row of the README's parameter table that this checks.
 */
import { describe, expect, it } from "vitest";
import { chatCompletionChunkSchema, chatCompletionSchema, errorBodySchema, textCompletionSchema } from "../../src/wire/schemas.js";
import { makeApp, sseEvents, type TestApp } from "./support.js";

const model = "alpha3:8b-instruct-q8_0";
const messages = [{ role: "user", content: "Hello" }];

async function chat(test: TestApp, extra: Record<string, unknown>) {
  const response = await test.app.handle(test.post("/v1/chat/completions", { model, messages, max_tokens: 3, ...extra }));
  const body = (await response.json()) as unknown;
  return { status: response.status, body };
}

async function refusal(test: TestApp, path: string, body: Record<string, unknown>) {
  const response = await test.app.handle(test.post(path, body));
  return { status: response.status, ...errorBodySchema.parse(await response.json()).error };
}

describe("parameters", () => {
  it("accepts what is faithful to accept: store, prompt_cache_key, safety_identifier, user, modalities text, prediction", async () => {
    const test = await makeApp();
    for (const extra of [
      { store: true },
      { store: false },
      { prompt_cache_key: "conversation-42" },
      { safety_identifier: "user-hash-1" },
      { user: "someone" },
      { modalities: ["text"] },
      { prediction: { type: "content", content: "Hello there" } },
      { metadata: Object.fromEntries(Array.from({ length: 16 }, (_, index) => [`k${index}`.padEnd(64, "k"), "v".repeat(512)])) },
    ]) {
      const { status, body } = await chat(test, extra);
      expect(status, JSON.stringify(extra).slice(0, 80)).toBe(200);
      expect(chatCompletionSchema.parse(body).usage.completion_tokens).toBe(3);
    }
  });

  it("echoes service_tier with the tier that served it", async () => {
    const test = await makeApp();
    const { status, body } = await chat(test, { service_tier: "auto" });
    expect(status).toBe(200);
    expect(chatCompletionSchema.parse(body).service_tier).toBe("default");
    const plain = await chat(test, {});
    expect(chatCompletionSchema.parse(plain.body).service_tier).toBeUndefined();
  });

  it("enforces OpenAI's metadata limits: 16 pairs, 64-character keys, 512-character values", async () => {
    const test = await makeApp();
    const tooMany = await refusal(test, "/v1/chat/completions", { model, messages, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, "v"])) });
    expect(tooMany).toMatchObject({ status: 400, param: "metadata" });
    expect(tooMany.message).toContain("at most 16 key-value pairs");
    expect((await refusal(test, "/v1/chat/completions", { model, messages, metadata: { ["k".repeat(65)]: "v" } })).status).toBe(400);
    const longValue = await refusal(test, "/v1/chat/completions", { model, messages, metadata: { key: "v".repeat(513) } });
    expect(longValue).toMatchObject({ status: 400, param: "metadata.key" });
  });

  it("refuses what these models cannot do, in OpenAI's words: reasoning_effort, audio, non-text modalities, image and audio inputs", async () => {
    const test = await makeApp();
    expect(await refusal(test, "/v1/chat/completions", { model, messages, reasoning_effort: "low" })).toMatchObject({
      status: 400,
      code: "unsupported_parameter",
      param: "reasoning_effort",
      message: "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
    });
    expect(await refusal(test, "/v1/chat/completions", { model, messages, audio: { voice: "alloy", format: "wav" } })).toMatchObject({ status: 400, param: "audio" });
    expect((await refusal(test, "/v1/chat/completions", { model, messages, modalities: ["text", "audio"] })).status).toBe(400);
    const image = await refusal(test, "/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }],
    });
    expect(image).toMatchObject({ status: 400, code: "invalid_value", param: "messages[0].content[1].type" });
    expect(image.message).toBe(`Invalid content type. image_url is only supported by models that take images; ${model} takes text only.`);
    const sound = await refusal(test, "/v1/chat/completions", { model, messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } }] }] });
    expect(sound.message).toContain("input_audio is only supported by models that take audio");
  });

  it("legacy best_of: must be at least n, as OpenAI says; equal to n it is the same as n", async () => {
    const test = await makeApp();
    expect(await refusal(test, "/v1/completions", { model, prompt: "Hi", n: 2, best_of: 1 })).toMatchObject({ status: 400, param: "best_of", message: "best_of must be greater than or equal to n." });
    expect((await refusal(test, "/v1/completions", { model, prompt: "Hi", n: 1, best_of: 3 })).status).toBe(400);
    const response = await test.app.handle(test.post("/v1/completions", { model, prompt: "Hi", n: 2, best_of: 2, max_tokens: 2 }));
    expect(response.status).toBe(200);
    expect(textCompletionSchema.parse(await response.json()).choices).toHaveLength(2);
  });

  it("the deprecated functions and function_call work as tools, answered in their own shape, streamed and not", async () => {
    const test = await makeApp();
    const weather = { name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false } };
    const request = { model, messages: [{ role: "user", content: "Weather in Paris?" }], functions: [weather], function_call: { name: "get_weather" } };
    const whole = chatCompletionSchema.parse(await (await test.app.handle(test.post("/v1/chat/completions", request))).json());
    const choice = whole.choices[0]!;
    expect(choice.finish_reason).toBe("function_call");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toBeUndefined();
    expect(choice.message.function_call?.name).toBe("get_weather");
    expect(Object.keys(JSON.parse(choice.message.function_call!.arguments) as object)).toEqual(["city"]);

    const streamed = await test.app.handle(test.post("/v1/chat/completions", { ...request, stream: true }));
    const chunks = sseEvents(await streamed.text()).slice(0, -1).map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)));
    expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.function_call?.arguments ?? "").join("")).toBe(choice.message.function_call!.arguments);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("function_call");

    // The next turn: the assistant's function_call and the function's answer, in the old roles.
    const followUp = await test.app.handle(
      test.post("/v1/chat/completions", {
        model,
        max_tokens: 5,
        functions: [weather],
        function_call: "none",
        messages: [...request.messages, { role: "assistant", content: null, function_call: choice.message.function_call }, { role: "function", name: "get_weather", content: "{\"temperature\": 21}" }],
      }),
    );
    expect(followUp.status).toBe(200);
    expect(chatCompletionSchema.parse(await followUp.json()).choices[0]?.finish_reason).toMatch(/stop|length/);
    const orphan = await refusal(test, "/v1/chat/completions", { model, functions: [weather], messages: [{ role: "user", content: "Hi" }, { role: "function", name: "get_weather", content: "{}" }] });
    expect(orphan).toMatchObject({ status: 400, param: "messages[1]" });
    expect((await refusal(test, "/v1/chat/completions", { ...request, tools: [{ type: "function", function: weather }] })).param).toBe("functions");
  });
});

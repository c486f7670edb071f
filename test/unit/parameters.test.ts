/**
 * The parameters real OpenAI clients send, each honoured, accepted (where that is faithful), or
 * refused in OpenAI's words; one case per row of the README's parameter table that this checks.
 */
import { describe, expect, it } from "vitest";
import { chatCompletionSchema, errorBodySchema, textCompletionSchema } from "../../src/wire/schemas.js";
import { makeApp, type TestApp } from "./support.js";

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
});

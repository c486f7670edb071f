/**
 * The real-engine tier: one browser session loads a real WebLLM engine (web-llm 0.2.79, the
 * random-weight Qwen2 test model, the real Qwen tokenizer) through our adapter inside the
 * service worker, on SwiftShader WebGPU, and the openai SDK talks to it through /v1.
 *
 * It is slow here (seconds to tens of seconds per token on the CPU), so the engine is loaded
 * once and every request asks for one or two tokens at temperature 0.
 */
import type { Page } from "@playwright/test";
import { renderChat } from "../../src/templates.js";
import { tokenizerFromFiles } from "../../src/tokenizer.js";
// @ts-expect-error: a plain JavaScript build script
import { tokenizerSources } from "../../scripts/tokenizers.mjs";
import { chatCompletionChunkSchema, chatCompletionSchema, modelInfoSchema, textCompletionSchema } from "../../src/wire/schemas.js";
import { expect, launchProfile, origin, test } from "./harness.js";
import { testModelEntry, testModelId } from "./test-model.js";

const modelId = testModelId;
/** The Qwen tokenizer the worker serves, from the same npm files the build compacts. */
function qwenTokenizer() {
  return tokenizerFromFiles(tokenizerSources.qwen2());
}

test.describe.configure({ mode: "serial" });

let page: Page;
let dispose: () => Promise<void>;

test.beforeAll(async () => {
  test.setTimeout(180_000);
  const profile = await launchProfile();
  dispose = profile.dispose;
  page = profile.context.pages()[0] ?? (await profile.context.newPage());
  page.on("console", (message) => {
    if (message.type() === "error") console.log(`[page] ${message.text()}`);
  });
  await page.goto(`${origin()}/index.html`);
  await expect(page.locator("#status")).toHaveText("ready");
  await page.evaluate((entry) => window.harness.start({ serviceWorkerUrl: "/real-engine-sw.js", engine: "webllm", models: [entry] }), testModelEntry(origin()));
});

test.afterAll(async () => {
  await dispose?.();
});

const messages = [{ role: "user" as const, content: "Hello there, how are you today?" }];

test("model info sees WebGPU and the f32 build before loading", async () => {
  const info = await page.evaluate(async (id) => {
    const response = await window.harness.fetch(`/model/info?model=${encodeURIComponent(id)}`);
    return response.json();
  }, modelId);
  const parsed = modelInfoSchema.parse(info);
  expect(parsed).toMatchObject({ engine: "webllm", runnable: { ok: true, reason: null }, loaded: false, context_window: 4096 });
  expect(parsed.build?.model_id).toBe("Qwen2-0.5B-Instruct-q4f32_1-random");
});

const flagTool = { type: "function" as const, function: { name: "f", description: "Set a flag", parameters: { type: "object", properties: { b: { type: "boolean" } }, required: ["b"], additionalProperties: false } } };

test("a required tool call on the real engine has schema-valid arguments, not streamed and streamed", async () => {
  test.setTimeout(60 * 60_000);
  const result = await page.evaluate(
    async ({ id, tool }) => {
      // Each call takes minutes here: a long tool prompt, then a grammar-constrained reply.
      const client = window.harness.client(undefined, 45 * 60_000);
      const messages = [{ role: "user" as const, content: "Set it." }];
      // One call exactly: with parallel calls allowed, random weights may open another one. The
      // grammar leaves the model no choice but the call (32 tokens seen), then the end token.
      const request = { model: id, messages, tools: [tool], tool_choice: "required" as const, parallel_tool_calls: false, max_tokens: 64, temperature: 0 };
      const whole = await client.chat.completions.create(request);
      const stream = await client.chat.completions.create({ ...request, stream: true });
      let name = "";
      let args = "";
      let finish: string | null = null;
      for await (const chunk of stream) {
        for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
          name += call.function?.name ?? "";
          args += call.function?.arguments ?? "";
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { whole, streamed: { name, args, finish } };
    },
    { id: modelId, tool: flagTool },
  );
  const choice = result.whole.choices[0]!;
  expect(choice.finish_reason).toBe("tool_calls");
  const call = choice.message.tool_calls![0]! as { function: { name: string; arguments: string } };
  expect(call.function.name).toBe("f");
  expect(JSON.parse(call.function.arguments)).toEqual({ b: expect.any(Boolean) });
  expect(result.streamed).toEqual({ name: "f", args: call.function.arguments, finish: "tool_calls" });
});

let nonStreamingText = "";

test("a non-streaming chat completion on the real engine: shape and real token counts", async () => {
  test.setTimeout(600_000);
  const completion = await page.evaluate(
    ({ id, history }) => window.harness.client().chat.completions.create({ model: id, messages: history, max_tokens: 2, temperature: 0 }),
    { id: modelId, history: messages },
  );
  const parsed = chatCompletionSchema.parse(completion);
  expect(parsed.choices[0]?.finish_reason).toBe("length");
  expect(parsed.usage.completion_tokens).toBe(2);
  // web-llm's tokenizer on the model's own template agrees with ours on the same template.
  const expectedPrompt = qwenTokenizer().encode(renderChat("qwen2", messages)).length;
  expect(parsed.usage.prompt_tokens).toBe(expectedPrompt);
  expect(parsed.usage.total_tokens).toBe(expectedPrompt + 2);
  nonStreamingText = parsed.choices[0]?.message.content ?? "";
  const info = await page.evaluate(async (id) => (await window.harness.fetch(`/model/info?model=${id}`)).json(), modelId);
  expect(info).toMatchObject({ loaded: true, downloaded: true });
});

test("a streaming chat completion on the real engine gives the same text at temperature 0", async () => {
  test.setTimeout(600_000);
  const chunks = await page.evaluate(
    async ({ id, history }) => {
      const stream = await window.harness
        .client()
        .chat.completions.create({ model: id, messages: history, max_tokens: 2, temperature: 0, stream: true, stream_options: { include_usage: true } });
      const received: unknown[] = [];
      for await (const chunk of stream) received.push(chunk);
      return received;
    },
    { id: modelId, history: messages },
  );
  const parsed = chunks.map((chunk) => chatCompletionChunkSchema.parse(chunk));
  expect(parsed[0]?.choices[0]?.delta.role).toBe("assistant");
  const choiceChunks = parsed.filter((chunk) => chunk.choices.length > 0);
  expect(choiceChunks.at(-1)?.choices[0]?.finish_reason).toBe("length");
  expect(choiceChunks.slice(0, -1).every((chunk) => chunk.choices[0]?.finish_reason === null)).toBe(true);
  const usage = parsed.at(-1)?.usage;
  expect(parsed.at(-1)?.choices).toEqual([]);
  expect(usage?.completion_tokens).toBe(2);
  expect(usage?.total_tokens).toBe((usage?.prompt_tokens ?? 0) + 2);
  const text = choiceChunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
  expect(text).toBe(nonStreamingText);
});

test("a legacy completion on the real engine", async () => {
  test.setTimeout(600_000);
  const prompt = "The capital of France is";
  const completion = await page.evaluate(
    ({ id, text }) => window.harness.client().completions.create({ model: id, prompt: text, max_tokens: 1, temperature: 0 }),
    { id: modelId, text: prompt },
  );
  const parsed = textCompletionSchema.parse(completion);
  expect(parsed.choices).toHaveLength(1);
  expect(parsed.choices[0]?.finish_reason).toBe("length");
  expect(parsed.usage?.prompt_tokens).toBe(qwenTokenizer().encode(prompt).length);
  expect(parsed.usage?.completion_tokens).toBe(1);
});

// Constrained decoding must give valid output even from random weights. Schemas are small, so
// the replies are a handful of tokens: every token costs seconds here.
const flagSchema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };

test("json_schema on the real engine: the reply validates", async () => {
  test.setTimeout(900_000);
  const completion = await page.evaluate(
    ({ id, schema }) =>
      window.harness.client().chat.completions.create({
        model: id,
        messages: [{ role: "user", content: "Is it ok?" }],
        max_tokens: 16,
        temperature: 0,
        response_format: { type: "json_schema", json_schema: { name: "flag", schema, strict: true } },
      }),
    { id: modelId, schema: flagSchema },
  );
  const content = completion.choices[0]?.message.content ?? "";
  expect(completion.choices[0]?.finish_reason).toBe("stop");
  expect(JSON.parse(content)).toEqual({ ok: expect.any(Boolean) });
});

test("json_object on the real engine: the reply parses as a JSON object", async () => {
  test.setTimeout(900_000);
  const completion = await page.evaluate(
    (id) =>
      window.harness.client().chat.completions.create({
        model: id,
        messages: [{ role: "user", content: "Answer in JSON." }],
        max_tokens: 24,
        temperature: 0,
        response_format: { type: "json_object" },
      }),
    modelId,
  );
  const content = completion.choices[0]?.message.content ?? "";
  expect({ content, finish: completion.choices[0]?.finish_reason }).toMatchObject({ finish: "stop" });
  expect(typeof JSON.parse(content)).toBe("object");
});

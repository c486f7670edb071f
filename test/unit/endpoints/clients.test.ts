/**
 * The Vercel AI SDK, LangChain.js and openai-node, unchanged but for `baseURL` and `apiKey`, against the API
 * (their `fetch` is the app's handler): each call's answer is checked against what the same
 * request gets over plain HTTP, on the deterministic engine.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { embed, embedMany, generateObject, generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { chatCompletionSchema } from "../../../src/core/wire/chat-completion.js";
import { embeddingListSchema } from "../../../src/core/wire/embeddings.js";
import { makeApp, type TestApp } from "../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const baseURL = "https://app.example/openai/v1";

/** The app as the clients' network, recording each path and status it answered. */
function through(test: TestApp) {
  const answered: string[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const response = await test.app.handle(new Request(input, init));
    answered.push(`${response.status} ${new URL(response.url || String(input)).pathname}`);
    return response;
  };
  return { fetch: fetch as typeof globalThis.fetch, answered };
}

/** What a plain chat request answers: the reference each client's answer is checked against. */
async function chatReply(test: TestApp, content: string, maxTokens: number): Promise<string> {
  const body = { model, messages: [{ role: "user", content }], max_completion_tokens: maxTokens };
  const response = await test.app.handle(test.post("/v1/chat/completions", body));
  return chatCompletionSchema.parse(await response.json()).choices[0]!.message.content!;
}

const person = z.object({ name: z.string(), age: z.number().int() });
const weatherInput = z.object({ city: z.string() });

describe("the Vercel AI SDK", () => {
  it("openai(model), its default: text, streamed text and usage, through the Responses API", async () => {
    const test = await makeApp();
    const network = through(test);
    const provider = createOpenAI({ baseURL, apiKey: test.key, fetch: network.fetch });
    const expected = await chatReply(test, "Hello", 16);
    const whole = await generateText({ model: provider(model), prompt: "Hello", maxOutputTokens: 16 });
    expect([whole.text, whole.finishReason, whole.usage.outputTokens]).toEqual([expected, "length", 16]);
    const streamed = streamText({ model: provider(model), prompt: "Hello", maxOutputTokens: 16 });
    let text = "";
    for await (const piece of streamed.textStream) text += piece;
    expect([text, (await streamed.usage).outputTokens]).toEqual([expected, 16]);
    expect(network.answered).toEqual(["200 /openai/v1/responses", "200 /openai/v1/responses"]);
  });

  it("openai(model): objects, a tool loop, and a conversation that refers to earlier replies", async () => {
    const test = await makeApp();
    const provider = createOpenAI({ baseURL, apiKey: test.key, fetch: through(test).fetch });
    const { object } = await generateObject({ model: provider(model), schema: person, prompt: "A person" });
    expect(person.safeParse(object).success).toBe(true);

    const cities: string[] = [];
    const weather = tool({
      description: "The weather in a city",
      inputSchema: weatherInput,
      execute: async ({ city }) => {
        cities.push(city);
        return { city, celsius: 3 };
      },
    });
    const loop = await generateText({
      model: provider(model),
      prompt: "What is the weather in Oslo?",
      tools: { weather },
      stopWhen: stepCountIs(3),
    });
    expect(loop.steps.map((step) => step.finishReason)).toEqual(["tool-calls", "stop"]);
    expect(cities).toHaveLength(1);
    expect(loop.text.length).toBeGreaterThan(0);

    // The SDK sends each earlier reply back as an item_reference while `store` is on (its default).
    const first = await generateText({ model: provider(model), prompt: "Hello", maxOutputTokens: 16 });
    const history = [{ role: "user" as const, content: "Hello" }, ...first.response.messages];
    const ask = (store: boolean) =>
      generateText({
        model: provider(model),
        messages: [...history, { role: "user", content: "And then?" }],
        maxOutputTokens: 16,
        providerOptions: { openai: { store } },
      });
    expect((await ask(true)).text).toBe((await ask(false)).text);

    // Over a conversation the SDK leaves out the replies the conversation has, and sends the
    // user's message again with each tool output: the loop goes on, and the conversation keeps it.
    const created = await test.app.handle(test.post("/v1/conversations", {}));
    const { id: conversation } = (await created.json()) as { id: string };
    const over = await generateText({
      model: provider(model),
      prompt: "What is the weather in Bergen?",
      tools: { weather },
      stopWhen: stepCountIs(2),
      providerOptions: { openai: { conversation } },
    });
    expect(over.steps[0]!.finishReason).toBe("tool-calls");
    expect(over.steps).toHaveLength(2);
    const items = await test.app.handle(test.get(`/v1/conversations/${conversation}/items?order=asc`));
    const types = ((await items.json()) as { data: { type: string }[] }).data.map((item) => item.type);
    expect(types.slice(0, 4)).toEqual(["message", "function_call", "message", "function_call_output"]);
  });

  it("provider.chat(model): text, streamed usage, and tools over chat completions", async () => {
    const test = await makeApp();
    const network = through(test);
    const provider = createOpenAI({ baseURL, apiKey: test.key, fetch: network.fetch });
    const expected = await chatReply(test, "Hello", 16);
    const whole = await generateText({ model: provider.chat(model), prompt: "Hello", maxOutputTokens: 16 });
    expect(whole.text).toBe(expected);
    const streamed = streamText({ model: provider.chat(model), prompt: "Hello", maxOutputTokens: 16 });
    let text = "";
    for await (const piece of streamed.textStream) text += piece;
    expect([text, (await streamed.usage).outputTokens]).toEqual([expected, 16]);
    const called = await generateText({
      model: provider.chat(model),
      prompt: "Weather in Oslo?",
      tools: { weather: tool({ inputSchema: weatherInput }) },
      toolChoice: "required",
    });
    expect(called.toolCalls.map((call) => call.toolName)).toEqual(["weather"]);
    expect(weatherInput.safeParse(called.toolCalls[0]!.input).success).toBe(true);
    expect(new Set(network.answered)).toEqual(new Set(["200 /openai/v1/chat/completions"]));
  });
});

describe("LangChain.js", () => {
  it("ChatOpenAI: invoke, stream, structured output, tools, and the Responses API", async () => {
    const test = await makeApp();
    const network = through(test);
    const chat = new ChatOpenAI({
      model,
      apiKey: test.key,
      maxTokens: 16,
      configuration: { baseURL, fetch: network.fetch },
    });
    const expected = await chatReply(test, "Hello", 16);
    const reply = await chat.invoke("Hello");
    expect([reply.content, reply.usage_metadata?.output_tokens]).toEqual([expected, 16]);
    let streamed = "";
    for await (const chunk of await chat.stream("Hello")) streamed += String(chunk.content);
    expect(streamed).toBe(expected);

    const unbounded = new ChatOpenAI({ model, apiKey: test.key, configuration: { baseURL, fetch: network.fetch } });
    const structured = await unbounded.withStructuredOutput(person).invoke("A person");
    expect(person.safeParse(structured).success).toBe(true);
    const withTools = unbounded.bindTools(
      [{ type: "function", function: { name: "weather", parameters: z.toJSONSchema(weatherInput) } }],
      { tool_choice: "required" },
    );
    const called = await withTools.invoke("Weather in Oslo?");
    expect(called.tool_calls?.map((call) => call.name)).toEqual(["weather"]);
    expect(weatherInput.safeParse(called.tool_calls![0]!.args).success).toBe(true);

    const responses = new ChatOpenAI({
      model,
      apiKey: test.key,
      maxTokens: 16,
      useResponsesApi: true,
      configuration: { baseURL, fetch: network.fetch },
    });
    const viaResponses = await responses.invoke("Hello");
    expect(viaResponses.text).toBe(expected);
    expect(network.answered.filter((line) => !line.startsWith("200 "))).toEqual([]);
    expect(network.answered.at(-1)).toBe("200 /openai/v1/responses");
  });
});

/** An embedding model on the deterministic engine, for the clients' embedding calls. */
const embedder = {
  id: "test-embed",
  kind: "embedding" as const,
  family: "llama3" as const,
  contextWindow: 512,
  dimensions: 256,
  matryoshkaDimensions: [64],
  price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 0 },
  gguf: [
    {
      modelId: "test-embed-q8_0",
      file: "https://models.example/test-embed-q8_0.gguf",
      quantization: "Q8_0",
      sizeMB: 30,
      kvCache: { layers: 6, kvHeads: 12, headDim: 32 },
    },
  ],
};

/** What a plain float request answers for `input`: the reference the clients' vectors are checked against. */
async function plainVectors(test: TestApp, input: string[], dimensions?: number): Promise<number[][]> {
  const body = { model: embedder.id, input, ...(dimensions ? { dimensions } : {}) };
  const response = await test.app.handle(test.post("/v1/embeddings", body));
  return embeddingListSchema.parse(await response.json()).data.map((item) => item.embedding as number[]);
}

/** Float32 values as JSON numbers carry them, for comparing a decoded base64 vector with a float one. */
const close = (vectors: number[][]) => vectors.map((vector) => vector.map((value) => Number(value.toFixed(6))));

describe("embedding clients", () => {
  const input = ["tide tables for the harbour", "ships at sea"];

  it("openai-node: base64 by default, decoded; floats when asked; dimensions", async () => {
    const test = await makeApp({ models: [embedder] });
    const network = through(test);
    const client = new OpenAI({ baseURL, apiKey: test.key, fetch: network.fetch });
    const expected = await plainVectors(test, input);
    const byDefault = await client.embeddings.create({ model: embedder.id, input });
    expect(close(byDefault.data.map((item) => item.embedding))).toEqual(close(expected));
    const floats = await client.embeddings.create({ model: embedder.id, input, encoding_format: "float" });
    expect(floats.data.map((item) => item.embedding)).toEqual(expected);
    const cut = await client.embeddings.create({ model: embedder.id, input: input[0]!, dimensions: 64 });
    expect(close([cut.data[0]!.embedding])).toEqual(close(await plainVectors(test, [input[0]!], 64)));
    expect(byDefault.usage.prompt_tokens).toBeGreaterThan(0);
    expect(network.answered).toEqual(Array(3).fill("200 /openai/v1/embeddings"));
  });

  it("the AI SDK's embed and embedMany, and LangChain.js's OpenAIEmbeddings", async () => {
    const test = await makeApp({ models: [embedder] });
    const network = through(test);
    const expected = close(await plainVectors(test, input));
    const provider = createOpenAI({ baseURL, apiKey: test.key, fetch: network.fetch });
    const one = await embed({ model: provider.embedding(embedder.id), value: input[0]! });
    expect(close([one.embedding])).toEqual([expected[0]]);
    const many = await embedMany({ model: provider.embedding(embedder.id), values: input });
    expect(close(many.embeddings)).toEqual(expected);
    const langchain = new OpenAIEmbeddings({
      model: embedder.id,
      apiKey: test.key,
      configuration: { baseURL, fetch: network.fetch },
    });
    expect(close(await langchain.embedDocuments(input))).toEqual(expected);
    expect(close([await langchain.embedQuery(input[1]!)])).toEqual([expected[1]]);
    expect(network.answered.filter((line) => line !== "200 /openai/v1/embeddings")).toEqual([]);
  });
});

import { describe, expect, it } from "vitest";
import { EngineError } from "../../../src/core/errors/engine.js";
import type { GenerationPart, GenerationRequest } from "../../../src/engines/contract.js";
import { chatCompletionChunkSchema, chatCompletionSchema } from "../../../src/core/wire/chat-completion.js";
import { errorBodySchema } from "../../../src/core/wire/error.js";
import { textCompletionSchema } from "../../../src/core/wire/text-completion.js";
import { ChoosingEngine } from "../../../src/engines/choice.js";
import { DeterministicEngine } from "../../../src/engines/deterministic/engine.js";
import {
  chatUsage,
  checkLedgerInvariant,
  makeApp,
  ScriptedEngine,
  sseEvents,
  tokenizers,
} from "../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const messages = [{ role: "user", content: "Hello" }];

async function errorOf(response: Response) {
  return {
    status: response.status,
    ...errorBodySchema.parse(await response.json()).error,
    requestId: response.headers.get("x-request-id"),
  };
}

describe("HTTP surface", () => {
  it("answers a chat completion with OpenAI's object and a request id", async () => {
    const { app, post } = await makeApp();
    const response = await app.handle(
      post("/v1/chat/completions", { model, messages, max_tokens: 5, temperature: 0.2 }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("x-request-id")).toBe("req_0001");
    const body = chatCompletionSchema.parse(await response.json());
    expect(body).toMatchObject({
      id: "chatcmpl-0002",
      object: "chat.completion",
      created: 1_700_000_000,
      model,
      system_fingerprint: null,
    });
    expect(body.choices[0]).toMatchObject({
      index: 0,
      finish_reason: "length",
      logprobs: null,
      message: { role: "assistant", refusal: null },
    });
    expect(body.usage.completion_tokens).toBe(5);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 5);
  });

  it("streams the exact SSE sequence the SDK expects", async () => {
    const { app, post } = await makeApp();
    const response = await app.handle(
      post("/chat/completions", {
        model,
        messages,
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
        n: 2,
      }),
    );
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = sseEvents(await response.text());
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)));
    for (const index of [0, 1]) {
      const mine = chunks.filter((chunk) => chunk.choices[0]?.index === index);
      expect(mine[0]?.choices[0]?.delta).toEqual({ role: "assistant", content: "", refusal: null });
      expect(mine.slice(0, -1).every((chunk) => chunk.choices[0]?.finish_reason === null)).toBe(true);
      expect(mine.at(-1)?.choices[0]).toEqual({ index, delta: {}, logprobs: null, finish_reason: "length" });
    }
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    // Two choices of four tokens; the prompt is billed once.
    expect(last.usage?.completion_tokens).toBe(8);
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
  });

  it("omits usage from chunks unless asked, as the hosted API does", async () => {
    const { app, post } = await makeApp();
    const events = sseEvents(
      await (await app.handle(post("/v1/chat/completions", { model, messages, max_tokens: 2, stream: true }))).text(),
    );
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as Record<string, unknown>);
    expect(chunks.every((chunk) => !("usage" in chunk))).toBe(true);
  });

  it("answers legacy completions with one choice per prompt and echo", async () => {
    const { app, post } = await makeApp();
    const response = await app.handle(
      post("/v1/completions", { model, prompt: ["One", "Two"], max_tokens: 3, echo: true }),
    );
    const body = textCompletionSchema.parse(await response.json());
    expect(body.choices.map((choice) => [choice.index, choice.text.split(/(?<=^(?:One|Two))/)[0]])).toEqual([
      [0, "One"],
      [1, "Two"],
    ]);
    expect(body.usage?.completion_tokens).toBe(6);
    const defaults = textCompletionSchema.parse(
      await (await app.handle(post("/v1/completions", { model, prompt: "Count" }))).json(),
    );
    // The legacy endpoint's default max_tokens is 16.
    expect(defaults.usage?.completion_tokens).toBeLessThanOrEqual(16);
  });

  it("takes a prompt of token ids, as OpenAI does: fed as those ids, counted as them, echoed as their text", async () => {
    const inputs: GenerationRequest["input"][] = [];
    class Recording extends DeterministicEngine {
      override generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
        inputs.push(request.input);
        return super.generate(request, signal);
      }
    }
    const { app, post, database } = await makeApp({ engine: new Recording({ tokenizers, tokenDelayMs: 0 }) });
    const tokenizer = await tokenizers.forFamily("llama3");
    const begin = tokenizer.encode("<|begin_of_text|>")[0]!;
    const hello = [begin, ...tokenizer.encode("Hello there")];
    const count = tokenizer.encode("One two three");
    const completion = async (body: Record<string, unknown>) => {
      const response = await app.handle(post("/v1/completions", { model, max_tokens: 2, ...body }));
      return { status: response.status, body: (await response.json()) as Record<string, never> };
    };
    const one = await completion({ prompt: hello, echo: true });
    expect(one.status).toBe(200);
    const parsed = textCompletionSchema.parse(one.body);
    expect(parsed.usage?.prompt_tokens).toBe(hello.length);
    expect(parsed.choices[0]!.text.startsWith("<|begin_of_text|>Hello there")).toBe(true);
    // The special id stays a control token; the rest is text for an engine that tokenizes again.
    expect(inputs[0]).toEqual({
      kind: "text",
      prompt: "<|begin_of_text|>Hello there",
      tokens: hello,
      pieces: [
        { text: "<|begin_of_text|>", control: true },
        { text: "Hello there", control: false },
      ],
    });
    const two = textCompletionSchema.parse((await completion({ prompt: [hello, count] })).body);
    expect(two.choices.map((choice) => choice.index)).toEqual([0, 1]);
    expect(two.usage?.prompt_tokens).toBe(hello.length + count.length);

    const outside = await completion({ prompt: [1, tokenizer.size] });
    expect(outside).toMatchObject({ status: 400, body: { error: { param: "prompt", code: "invalid_value" } } });
    expect(outside.body.error?.["message"]).toBe(
      `Invalid token in 'prompt': ${tokenizer.size}. Token ids of this model's tokenizer run from 0 to ${tokenizer.size - 1}.`,
    );
    const long = await completion({ prompt: Array.from({ length: 9_000 }, () => count[0]) });
    expect(long).toMatchObject({ status: 400, body: { error: { code: "context_length_exceeded" } } });
    await checkLedgerInvariant(database);
  });

  it("maps every failure to its status, with OpenAI's error body", async () => {
    const { app, post, get } = await makeApp();
    expect(await errorOf(await app.handle(post("/v1/chat/completions", { model: "nope", messages })))).toMatchObject({
      status: 404,
      code: "model_not_found",
      param: "model",
      message: "The model `nope` does not exist or you do not have access to it.",
    });
    expect(await errorOf(await app.handle(get("/v1/models/nope")))).toMatchObject({
      status: 404,
      code: "model_not_found",
    });
    expect(await errorOf(await app.handle(get("/v1/model/info")))).toMatchObject({ status: 400, param: "model" });
    expect(await errorOf(await app.handle(post("/v1/audio/speech", {})))).toMatchObject({
      status: 404,
      code: "unknown_url",
    });
    expect(
      await errorOf(
        await app.handle(post("/v1/chat/completions", { model, messages, stream_options: { include_usage: true } })),
      ),
    ).toMatchObject({
      status: 400,
      param: "stream_options",
    });
    expect(
      await errorOf(await app.handle(post("/v1/chat/completions", { model, messages, tool_choice: "required" }))),
    ).toMatchObject({ status: 400, param: "tool_choice" });
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
    expect(
      await errorOf(
        await app.handle(
          post("/v1/chat/completions", {
            model,
            messages,
            tools,
            tool_choice: { type: "function", function: { name: "other" } },
          }),
        ),
      ),
    ).toMatchObject({
      status: 400,
      param: "tool_choice.function.name",
    });
    // A name that is no tool's is quoted short, however long it is.
    const long = await errorOf(
      await app.handle(
        post("/v1/chat/completions", {
          model,
          messages,
          tools,
          tool_choice: { type: "function", function: { name: "x".repeat(100_000) } },
        }),
      ),
    );
    expect(long.message).toBe(
      `Invalid value for 'tool_choice': no function named '${"x".repeat(64)}…' was specified in 'tools'.`,
    );
  });

  it("refuses prompt plus max_tokens beyond the context window", async () => {
    const { app, post } = await makeApp();
    const small = "gamma-7b-instruct-v0.3";
    const over = await errorOf(
      await app.handle(post("/v1/chat/completions", { model: small, messages, max_tokens: 4093 })),
    );
    expect(over).toMatchObject({ status: 400, code: "context_length_exceeded", param: "messages" });
    expect(over.message).toMatch(/maximum context length is 4096 tokens/);
    const long = "word ".repeat(5000);
    expect(
      await errorOf(
        await app.handle(post("/v1/chat/completions", { model: small, messages: [{ role: "user", content: long }] })),
      ),
    ).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
    });
    expect(await errorOf(await app.handle(post("/v1/completions", { model: small, prompt: long })))).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      param: "prompt",
    });
    // Within the window, a missing max_tokens becomes what the prompt leaves.
    const engine = new ScriptedEngine(async function* () {
      yield { type: "finish", reason: "stop", usage: { promptTokens: 9, completionTokens: 0 } };
    });
    const scripted = await makeApp({ engine });
    await scripted.app.handle(scripted.post("/v1/chat/completions", { model: small, messages }));
    expect(engine.seen[0]?.sampling.maxTokens).toBeGreaterThan(4000);
    expect(engine.seen[0]?.sampling.maxTokens).toBeLessThan(4096);
  });

  it("writes a chat completion's usage with OpenAI's token details, whole and streamed; a legacy completion's without them", async () => {
    const { app, post } = await makeApp();
    const whole = chatCompletionSchema.parse(
      await (await app.handle(post("/v1/chat/completions", { model, messages, max_tokens: 3 }))).json(),
    );
    expect(whole.usage).toEqual(chatUsage(whole.usage.prompt_tokens, 3));
    const streamed = sseEvents(
      await (
        await app.handle(
          post("/v1/chat/completions", {
            model,
            messages,
            max_tokens: 3,
            stream: true,
            stream_options: { include_usage: true },
          }),
        )
      ).text(),
    );
    const last = chatCompletionChunkSchema.parse(JSON.parse(streamed.at(-2)!));
    expect(last.usage).toEqual(chatUsage(whole.usage.prompt_tokens, 3));
    const legacy = textCompletionSchema.parse(
      await (await app.handle(post("/v1/completions", { model, prompt: "Hello", max_tokens: 3 }))).json(),
    );
    expect(legacy.usage).toMatchObject({ completion_tokens: 3 });
    expect(legacy.usage).not.toHaveProperty("completion_tokens_details");
  });

  it("bills the prompt an engine saw: whole, with the prefix it reused reported as cached", async () => {
    const usageOf = async (
      usage: { promptTokens: number; cachedPromptTokens?: number; completionTokens: number },
      path = "/v1/chat/completions",
    ) => {
      const engine = new ScriptedEngine(async function* () {
        yield { type: "finish", reason: "stop", usage };
      });
      const scripted = await makeApp({ engine });
      const body = path.endsWith("chat/completions") ? { model, messages } : { model, prompt: "Hello" };
      return ((await (await scripted.app.handle(scripted.post(path, body))).json()) as { usage: unknown }).usage;
    };
    // Our count: what an engine that reused nothing and saw what we counted is billed.
    const counted = (
      (await usageOf({ promptTokens: 0, completionTokens: 1 })) as {
        prompt_tokens: number;
        prompt_tokens_details: { cached_tokens: number };
      }
    ).prompt_tokens_details.cached_tokens;
    expect(counted).toBeGreaterThan(4);
    // llama.cpp says what it reused: 4 prefilled of our `counted`, the rest from its cache.
    expect(await usageOf({ promptTokens: 4, cachedPromptTokens: counted - 4, completionTokens: 1 })).toMatchObject({
      prompt_tokens: counted,
      prompt_tokens_details: { cached_tokens: counted - 4 },
    });
    // One more than we counted (llama.cpp's BOS before a raw prompt), one of them reused: what it saw is billed.
    expect(
      await usageOf({ promptTokens: 1, cachedPromptTokens: 1, completionTokens: 1 }, "/v1/completions"),
    ).toMatchObject({ prompt_tokens: 2 });
    // web-llm says only what it prefilled: the rest of our count is the cached part.
    expect(await usageOf({ promptTokens: 3, completionTokens: 1 })).toMatchObject({
      prompt_tokens: counted,
      prompt_tokens_details: { cached_tokens: counted - 3 },
    });
    // An engine that says what it reused but saw fewer tokens than we counted (a control-token
    // string parsed as one token, say): billed our count, and what it never saw shows as cached.
    expect(await usageOf({ promptTokens: 3, cachedPromptTokens: 1, completionTokens: 1 })).toMatchObject({
      prompt_tokens: counted,
      prompt_tokens_details: { cached_tokens: counted - 3 },
    });
    // Saw exactly what we counted, reused nothing: no cached tokens at all.
    expect(await usageOf({ promptTokens: counted, cachedPromptTokens: 0, completionTokens: 1 })).toEqual(
      chatUsage(counted, 1),
    );
  });

  it("passes sampling, stop, seed and JSON mode through to the engine", async () => {
    const engine = new ScriptedEngine(async function* () {
      yield { type: "text-delta", text: "{}" };
      yield { type: "finish", reason: "stop", usage: { promptTokens: 3, completionTokens: 1 } };
    });
    const { app, post } = await makeApp({ engine });
    await app.handle(
      post("/v1/chat/completions", {
        model,
        messages: [{ role: "developer", content: "be json" }, ...messages],
        temperature: 0,
        top_p: 0.5,
        max_tokens: 9,
        stop: "END",
        presence_penalty: 1,
        frequency_penalty: -1,
        seed: 42,
        response_format: { type: "json_object" },
      }),
    );
    expect(engine.seen[0]).toMatchObject({
      input: {
        kind: "chat",
        messages: [
          { role: "system", content: "be json" },
          { role: "user", content: "Hello" },
        ],
      },
      sampling: {
        temperature: 0,
        topP: 0.5,
        maxTokens: 9,
        stop: ["END"],
        presencePenalty: 1,
        frequencyPenalty: -1,
        seed: 42,
      },
      constraint: { kind: "json" },
    });
  });

  it("samples each of n seeded choices with a seed of its own: they differ, and the request is reproducible", async () => {
    const { app, post } = await makeApp();
    const texts = async (body: Record<string, unknown>) => {
      const response = await app.handle(post("/v1/chat/completions", { model, messages, max_tokens: 12, ...body }));
      const completion = (await response.json()) as { choices: { message: { content: string } }[] };
      return completion.choices.map((choice) => choice.message.content);
    };
    const seeded = await texts({ n: 3, seed: 7 });
    expect(new Set(seeded).size).toBe(3);
    expect(await texts({ n: 3, seed: 7 })).toEqual(seeded);
    // The first choice keeps the client's seed: it is the reply of n = 1.
    expect(await texts({ seed: 7 })).toEqual([seeded[0]]);
  });

  it("turns unknown engine failures into 500 with the request id, before and after the first byte (in the stream after it)", async () => {
    const before = await makeApp({
      // eslint-disable-next-line require-yield -- an engine that fails before its first part
      engine: new ScriptedEngine(async function* () {
        throw new RangeError("kernel fault");
      }),
    });
    const error = await errorOf(
      await before.app.handle(before.post("/v1/chat/completions", { model, messages, stream: true })),
    );
    expect(error).toMatchObject({ status: 500, type: "server_error", code: "internal_error" });
    expect(error.message).toContain(error.requestId);

    const after = await makeApp({
      engine: new ScriptedEngine(async function* () {
        yield { type: "text-delta", text: "partial" };
        throw new RangeError("device lost");
      }),
    });
    const response = await after.app.handle(after.post("/v1/chat/completions", { model, messages, stream: true }));
    expect(response.status).toBe(200);
    const events = sseEvents(await response.text());
    const last = JSON.parse(events.at(-1)!) as { error: { type: string; message: string } };
    expect(last.error.type).toBe("server_error");
    expect(last.error.message).toContain("device lost");

    // Not streamed, nothing is committed before the reply is whole: the failure is a 500, never a 200.
    const whole = await after.app.handle(after.post("/v1/chat/completions", { model, messages }));
    const wholeError = await errorOf(whole);
    expect(wholeError).toMatchObject({ status: 500, type: "server_error", code: "internal_error" });
    expect(wholeError.message).toContain("device lost");
    await checkLedgerInvariant(after.database);
  });

  it("a structured reply that breaks its schema where the grammar is partial is never a success, and its tokens are billed", async () => {
    // uniqueItems is checked once the reply is whole: the grammar cannot see repeats.
    const schema = { type: "array", items: { type: "string" }, uniqueItems: true };
    const replies = { valid: '["a","b"]', repeated: '["a","a"]' };
    const appFor = (text: string) =>
      makeApp({
        engine: new ScriptedEngine(async function* () {
          for (const piece of [text.slice(0, 4), text.slice(4)]) yield { type: "text-delta", text: piece };
          yield { type: "finish", reason: "stop", usage: { promptTokens: 20, completionTokens: 2 } };
        }),
      });
    const body = { model, messages, response_format: { type: "json_schema", json_schema: { name: "tags", schema } } };
    const good = await appFor(replies.valid);
    const accepted = chatCompletionSchema.parse(
      await (await good.app.handle(good.post("/v1/chat/completions", body))).json(),
    );
    expect(accepted.choices[0]?.message.content).toBe(replies.valid);

    const bad = await appFor(replies.repeated);
    const refused = await errorOf(await bad.app.handle(bad.post("/v1/chat/completions", body)));
    expect(refused).toMatchObject({
      status: 500,
      type: "server_error",
      code: "invalid_model_output",
      param: "response_format.json_schema.schema",
      message: expect.stringContaining("the value at '/1' repeats an earlier item (uniqueItems)"),
    });
    const streamed = await bad.app.handle(bad.post("/v1/chat/completions", { ...body, stream: true }));
    const events = sseEvents(await streamed.text());
    expect(events.some((event) => event.includes('"finish_reason":"stop"'))).toBe(false);
    expect(JSON.parse(events.at(-1)!)).toMatchObject({ error: { code: "invalid_model_output" } });
    const charges = (await bad.database.getAll("ledger")).filter((entry) => entry.kind === "charge");
    expect(charges.map((entry) => entry.completionTokens)).toEqual([2, 2]);
    await checkLedgerInvariant(bad.database);
  });

  it("maps engine refusals: device cannot run, load failure, context", async () => {
    for (const [kind, status, code] of [
      ["device", 503, "model_not_runnable"],
      ["load_failed", 503, "model_load_failed"],
      ["context_length", 400, "context_length_exceeded"],
      ["unsupported", 400, "unsupported_request"],
    ] as const) {
      const { app, post } = await makeApp({
        // eslint-disable-next-line require-yield -- an engine that fails before its first part
        engine: new ScriptedEngine(async function* () {
          throw new EngineError(kind, "no");
        }),
      });
      expect(await errorOf(await app.handle(post("/v1/chat/completions", { model, messages })))).toMatchObject({
        status,
        code,
      });
    }
  });

  it("chooses the engine once per request: the engine the headers name is the one that runs", async () => {
    const reply = async function* (): AsyncGenerator<GenerationPart> {
      yield { type: "text-delta", text: "hi" };
      yield { type: "finish", reason: "stop", usage: { promptTokens: null, completionTokens: 1 } };
    };
    const webllm = new ScriptedEngine(reply);
    const llamacpp = new ScriptedEngine(reply);
    // The adapter goes away after the first look: choosing again would pick llama.cpp.
    let looks = 0;
    webllm.device = async () => ({ webgpu: looks++ === 0, features: new Set(["shader-f16"]) });
    const { app, post } = await makeApp({
      engine: new ChoosingEngine({ engines: { webllm, llamacpp }, policy: "auto" }),
    });
    const response = await app.handle(post("/v1/chat/completions", { model, messages }));
    expect(response.status).toBe(200);
    expect(response.headers.get("x-inference-engine")).toBe("webllm");
    expect([webllm.seen.length, llamacpp.seen.length]).toEqual([1, 0]);
    expect(webllm.seen[0]?.engine).toBe("webllm");
  });

  it("queues requests for the one engine and answers 503 past the bound", async () => {
    let releaseFirst!: () => void;
    const gate = new Promise<void>((resolve) => (releaseFirst = resolve));
    const engine = new ScriptedEngine(async function* () {
      await gate;
      yield { type: "finish", reason: "stop", usage: { promptTokens: 1, completionTokens: 0 } };
    });
    const { app, post } = await makeApp({ engine, maxQueued: 1 });
    const first = app.handle(post("/v1/chat/completions", { model, messages }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = app.handle(post("/v1/chat/completions", { model, messages }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const third = await app.handle(post("/v1/chat/completions", { model, messages }));
    expect(await errorOf(third)).toMatchObject({ status: 503, code: "engine_busy" });
    expect(third.headers.get("retry-after")).toBe("1");
    releaseFirst();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
  });

  it("stops the engine when the client aborts or stops reading", async () => {
    const aborted: boolean[] = [];
    const engine = new ScriptedEngine(async function* (_request, signal) {
      for (let index = 0; index < 1000 && !signal.aborted; index++) {
        yield { type: "text-delta", text: "x" };
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      aborted.push(signal.aborted);
      yield {
        type: "finish",
        reason: signal.aborted ? "abort" : "stop",
        usage: { promptTokens: 1, completionTokens: 1 },
      };
    });
    const { app, post } = await makeApp({ engine });
    const response = await app.handle(post("/v1/chat/completions", { model, messages, stream: true }));
    const reader = response.body!.getReader();
    await reader.read();
    await reader.read();
    await reader.cancel();
    const controller = new AbortController();
    const pending = app.handle(post("/v1/chat/completions", { model, messages }, { signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    const whole = await pending;
    expect(whole.status).toBe(200);
    // The status goes out at the first token; the body once the (aborted) generation ends.
    await whole.text();
    expect(aborted).toEqual([true, true]);
  });

  it("commits a response whose first token is late, keeping it alive, so a worker never holds a request for minutes", async () => {
    const slowStart = (fail: boolean) =>
      new ScriptedEngine(async function* () {
        await new Promise((resolve) => setTimeout(resolve, 80));
        if (fail) throw new EngineError("load_failed", "the weights could not be fetched");
        yield { type: "text-delta", text: "late" };
        yield { type: "finish", reason: "stop", usage: { promptTokens: 2, completionTokens: 1 } };
      });
    const respond = { graceMs: 20, keepAliveMs: 15 };

    const streamed = await makeApp({ engine: slowStart(false), respond });
    const sse = await streamed.app.handle(streamed.post("/v1/chat/completions", { model, messages, stream: true }));
    expect(sse.status).toBe(200);
    const text = await sse.text();
    expect(text.startsWith(": waiting for the model\n\n")).toBe(true);
    const frames = text.split("\n\n").filter((frame) => frame.startsWith("data: "));
    expect(frames.at(-1)).toBe("data: [DONE]");
    expect(frames.map((frame) => frame.slice(6)).join("")).toContain('"content":"late"');

    const whole = await makeApp({ engine: slowStart(false), respond });
    const json = await whole.app.handle(whole.post("/v1/chat/completions", { model, messages }));
    const body = await json.text();
    expect(body.startsWith(" ")).toBe(true);
    expect(chatCompletionSchema.parse(JSON.parse(body)).choices[0]!.message.content).toBe("late");

    const failing = await makeApp({ engine: slowStart(true), respond });
    const failed = await failing.app.handle(failing.post("/v1/chat/completions", { model, messages }));
    expect(failed.status).toBe(200);
    expect(JSON.parse(await failed.text())).toMatchObject({
      error: { type: "service_unavailable", code: "model_load_failed" },
    });
    await checkLedgerInvariant(failing.database);
    expect(
      (await failing.database.getAll("ledger")).filter((entry) => entry.kind === "charge").map((entry) => entry.status),
    ).toEqual(["failed"]);
  });
});

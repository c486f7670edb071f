/**
 * The /v1 API through the ready-made service worker, driven by the official openai SDK bundled
 * into a page, on the deterministic engine.
 */
import { chatCompletionChunkSchema, chatCompletionSchema } from "../../src/core/wire/chat-completion.js";
import { embeddingListSchema } from "../../src/core/wire/embeddings.js";
import { errorBodySchema } from "../../src/core/wire/error.js";
import { modelInfoSchema, modelListSchema, modelSchema } from "../../src/core/wire/models.js";
import { responseSchema } from "../../src/core/wire/response.js";
import { textCompletionSchema } from "../../src/core/wire/text-completion.js";
import { expect, openHarness, test } from "../support/browser.js";

const model = "alpha3:8b-instruct-q8_0";

test("models, one model and model info, with and without the /v1 prefix", async ({ page }) => {
  await openHarness(page);
  const result = await page.evaluate(async () => {
    const client = window.harness.client();
    const list = await client.models.list();
    const one = await client.models.retrieve("gamma-7b-instruct-v0.3");
    const base = window.harness.baseURL.replace(/\/v1$/, "");
    const authorization = `Bearer ${window.harness.key}`;
    const bare = await fetch(`${base}/models`, { headers: { authorization } }).then((response) => response.json());
    const info = await fetch(`${base}/v1/model/info?model=beta-2-9b-it`, { headers: { authorization } });
    const embedding = await fetch(`${base}/v1/model/info?model=nomic-embed-text-v1.5`, { headers: { authorization } });
    return {
      list: list.data,
      one,
      bare,
      info: await info.json(),
      embedding: await embedding.json(),
      requestId: info.headers.get("x-request-id"),
    };
  });
  expect(result.list.map((entry) => entry.id)).toEqual([
    "alpha3:8b-instruct-q8_0",
    "alpha-3-70b-instruct",
    "beta-2-9b-it",
    "gamma-7b-instruct-v0.3",
    "snowflake-arctic-embed-s",
    "nomic-embed-text-v1.5",
  ]);
  for (const entry of result.list) modelSchema.parse(entry);
  expect(result.embedding).toMatchObject({
    id: "nomic-embed-text-v1.5",
    kind: "embedding",
    dimensions: 768,
    matryoshka_dimensions: [64, 128, 256, 512],
    engine: "deterministic",
  });
  modelListSchema.parse(result.bare);
  expect(result.one).toMatchObject({ id: "gamma-7b-instruct-v0.3", object: "model", owned_by: "webgpu-inference" });
  const info = modelInfoSchema.parse(result.info);
  expect(info).toMatchObject({
    id: "beta-2-9b-it",
    context_window: 8192,
    pricing: {
      input_per_1m_tokens: 0.005,
      output_per_1m_tokens: 0.01,
      input_nano_usd_per_token: 5,
      output_nano_usd_per_token: 10,
    },
    engine: "deterministic",
    builds: ["gemma-2-9b-it-q4f16_1-MLC", "gemma-2-9b-it-q4f32_1-MLC"],
    runnable: { ok: true, reason: null },
  });
  expect(result.requestId).toMatch(/^req_[0-9a-f]{24}$/);
});

test("chat completion, non-streaming: shape, usage and determinism", async ({ page }) => {
  await openHarness(page);
  const [first, second] = await page.evaluate(async (modelId) => {
    const client = window.harness.client();
    const request = {
      model: modelId,
      messages: [
        { role: "system" as const, content: "Be brief." },
        { role: "user" as const, content: "Say hello." },
      ],
      seed: 7,
    };
    return [await client.chat.completions.create(request), await client.chat.completions.create(request)];
  }, model);
  const completion = chatCompletionSchema.parse(first);
  expect(completion.model).toBe(model);
  expect(completion.id).toMatch(/^chatcmpl-/);
  expect(completion.choices[0]?.message.content?.length).toBeGreaterThan(10);
  expect(completion.choices[0]?.finish_reason).toBe("stop");
  expect(completion.usage.total_tokens).toBe(completion.usage.prompt_tokens + completion.usage.completion_tokens);
  // Llama 3's template wraps two messages in 20-odd tokens; the count comes from the real tokenizer.
  expect(completion.usage.prompt_tokens).toBeGreaterThan(15);
  expect(second.choices[0]?.message.content).toBe(completion.choices[0]?.message.content);
});

test("chat completion, streaming: role first, null finish until the end, usage chunk, [DONE]", async ({ page }) => {
  await openHarness(page);
  const result = await page.evaluate(async (modelId) => {
    const response = await window.harness.fetch("/chat/completions", {
      method: "POST",
      body: JSON.stringify({
        model: modelId,
        messages: [{ role: "user", content: "Stream please." }],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 12,
      }),
    });
    const raw = await response.text();
    const client = window.harness.client();
    const stream = await client.chat.completions.create({
      model: modelId,
      messages: [{ role: "user", content: "Stream please." }],
      stream: true,
      max_tokens: 12,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    return { raw, contentType: response.headers.get("content-type"), text };
  }, model);
  expect(result.contentType).toMatch(/^text\/event-stream/);
  const frames = result.raw.split("\n\n").filter(Boolean);
  expect(frames.every((frame) => frame.startsWith("data: "))).toBe(true);
  expect(frames.at(-1)).toBe("data: [DONE]");
  const chunks = frames.slice(0, -1).map((frame) => chatCompletionChunkSchema.parse(JSON.parse(frame.slice(6))));
  expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
  const choiceChunks = chunks.filter((chunk) => chunk.choices.length > 0);
  expect(choiceChunks.slice(0, -1).every((chunk) => chunk.choices[0]?.finish_reason === null)).toBe(true);
  expect(choiceChunks.at(-1)?.choices[0]?.finish_reason).toBe("length");
  const usageChunk = chunks.at(-1)!;
  expect(usageChunk.choices).toEqual([]);
  expect(usageChunk.usage?.completion_tokens).toBe(12);
  expect(usageChunk.usage?.total_tokens).toBe((usageChunk.usage?.prompt_tokens ?? 0) + 12);
  expect(choiceChunks.every((chunk) => chunk.usage === null)).toBe(true);
  const streamedText = choiceChunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
  expect(result.text).toBe(streamedText);
});

test("the Responses API through the openai SDK: create, stream, continue, read back and delete", async ({ page }) => {
  await openHarness(page);
  const result = await page.evaluate(async (modelId) => {
    const client = window.harness.client();
    const first = await client.responses.create({ model: modelId, instructions: "Be brief.", input: "Say hello." });
    const next = await client.responses.create({
      model: modelId,
      input: "And again.",
      previous_response_id: first.id,
      max_output_tokens: 16,
    });
    const stream = client.responses.stream({ model: modelId, input: "Stream please.", max_output_tokens: 400 });
    const types: string[] = [];
    let streamed = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") streamed += event.delta;
    }
    const final = await stream.finalResponse();
    const read = await client.responses.retrieve(first.id);
    // The SDK pages through a response's input items, one a page here, after each page's last id.
    const items: { id: string; type: string; role?: string }[] = [];
    for await (const item of client.responses.inputItems.list(next.id, { limit: 1 }))
      items.push({ id: item.id!, type: item.type!, role: "role" in item ? item.role : undefined });
    await client.responses.delete(first.id);
    const gone = await client.responses.retrieve(first.id).then(
      () => null,
      (error: { status?: number }) => error.status,
    );
    return { first, next, types, streamed, final, read, items, gone };
  }, model);
  // The SDK adds `output_text` (its own convenience) to the wire object.
  const wire = ({ output_text: _text, ...object }: { output_text: string }) => object;
  const first = responseSchema.parse(wire(result.first));
  expect(first).toMatchObject({ object: "response", status: "completed", model, store: true });
  expect(first.output[0]).toMatchObject({ type: "message", role: "assistant", status: "completed" });
  expect(result.first.output_text.length).toBeGreaterThan(10);
  expect(first.usage!.total_tokens).toBe(first.usage!.input_tokens + first.usage!.output_tokens);
  const next = responseSchema.parse(wire(result.next));
  expect(next).toMatchObject({ status: "incomplete", previous_response_id: first.id });
  // The earlier turns are in the prompt: the instructions are not (they do not carry over), the rest is.
  expect(next.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens - 10);
  expect(result.types[0]).toBe("response.created");
  expect(result.types.at(-1)).toBe("response.completed");
  expect(result.final.output_text).toBe(result.streamed);
  expect(result.read).toEqual(result.first);
  // Newest first: this turn's input, the reply it continued (under its output id), the first input.
  expect(result.items.map((item) => item.role)).toEqual(["user", "assistant", "user"]);
  expect(result.items[1]!.id).toBe(first.output[0]!.id);
  expect(result.gone).toBe(404);
});

test("stored chat completions through the openai SDK: kept whole and streamed, listed, read, updated, deleted", async ({
  page,
}) => {
  await openHarness(page);
  const result = await page.evaluate(async (modelId) => {
    const client = window.harness.client();
    const messages = [{ role: "user" as const, content: "Say hello." }];
    const whole = await client.chat.completions.create({
      model: modelId,
      messages,
      max_tokens: 8,
      store: true,
      metadata: { run: "e2e" },
    });
    const chunks = [];
    for await (const chunk of await client.chat.completions.create({
      model: modelId,
      messages,
      max_tokens: 8,
      store: true,
      stream: true,
    }))
      chunks.push(chunk);
    const streamedText = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
    const keptStream = await client.chat.completions.retrieve(chunks[0]!.id);
    const tagged = [];
    for await (const each of client.chat.completions.list({ metadata: { run: "e2e" } })) tagged.push(each.id);
    const all = [];
    for await (const each of client.chat.completions.list({ limit: 1, order: "desc" })) all.push(each.id);
    const listedMessages = [];
    for await (const message of client.chat.completions.messages.list(whole.id)) listedMessages.push(message);
    const updated = await client.chat.completions.update(whole.id, { metadata: { run: "done" } });
    const deleted = await client.chat.completions.delete(whole.id);
    const gone = await client.chat.completions.retrieve(whole.id).then(
      () => null,
      (error: { status?: number }) => error.status,
    );
    return { whole, streamedText, keptStream, tagged, all, listedMessages, updated, deleted, gone };
  }, model);
  expect(result.keptStream.choices[0]!.message.content).toBe(result.streamedText);
  expect(result.keptStream.usage!.completion_tokens).toBe(8);
  expect(result.tagged).toEqual([result.whole.id]);
  expect(result.all).toEqual([result.keptStream.id, result.whole.id]);
  expect(result.listedMessages).toEqual([
    { id: `${result.whole.id}-0`, role: "user", content: "Say hello.", content_parts: null },
  ]);
  // The SDK's type has no `metadata`; the stored completion's object has it.
  expect((result.updated as { metadata?: unknown }).metadata).toEqual({ run: "done" });
  expect(result.deleted).toEqual({ object: "chat.completion.deleted", id: result.whole.id, deleted: true });
  expect(result.gone).toBe(404);
});

test("conversations through the openai SDK: created, continued by responses, items listed, added, deleted", async ({
  page,
}) => {
  await openHarness(page);
  const result = await page.evaluate(async (modelId) => {
    const client = window.harness.client();
    const conversation = await client.conversations.create({
      items: [{ type: "message", role: "user", content: "My name is Ann." }],
      metadata: { run: "e2e" },
    });
    const first = await client.responses.create({
      model: modelId,
      input: "What is my name?",
      conversation: conversation.id,
      max_output_tokens: 16,
    });
    const stream = client.responses.stream({
      model: modelId,
      input: "Once more.",
      conversation: { id: conversation.id },
      max_output_tokens: 16,
    });
    for await (const _event of stream);
    const second = await stream.finalResponse();
    const added = await client.conversations.items.create(conversation.id, {
      items: [{ type: "message", role: "user", content: "Noted." }],
    });
    const roles: string[] = [];
    for await (const item of client.conversations.items.list(conversation.id, { order: "asc", limit: 2 }))
      roles.push(item.type === "message" ? item.role : item.type);
    const addedId = (added.data[0] as { id: string }).id;
    const one = await client.conversations.items.retrieve(addedId, { conversation_id: conversation.id });
    await client.conversations.items.delete(addedId, { conversation_id: conversation.id });
    const updated = await client.conversations.update(conversation.id, { metadata: { run: "done" } });
    const deleted = await client.conversations.delete(conversation.id);
    const gone = await client.conversations.retrieve(conversation.id).then(
      () => null,
      (error: { status?: number }) => error.status,
    );
    return { conversation, first, second, roles, one, updated, deleted, gone };
  }, model);
  expect(result.conversation).toMatchObject({ object: "conversation", metadata: { run: "e2e" } });
  expect(result.first).toMatchObject({ status: "incomplete", conversation: { id: result.conversation.id } });
  // The second turn's prompt holds the first: the item it was given, the question and its reply.
  expect(result.second.usage!.input_tokens).toBeGreaterThan(
    result.first.usage!.input_tokens + result.first.usage!.output_tokens,
  );
  // Oldest first, two a page: the first item, each turn's input and reply, then the added one.
  expect(result.roles).toEqual(["user", "user", "assistant", "user", "assistant", "user"]);
  expect(result.one).toMatchObject({
    type: "message",
    role: "user",
    content: [{ type: "input_text", text: "Noted." }],
  });
  expect(result.updated.metadata).toEqual({ run: "done" });
  expect(result.deleted).toEqual({ id: result.conversation.id, object: "conversation.deleted", deleted: true });
  expect(result.gone).toBe(404);
});

test("legacy completions: one choice per prompt, stop sequences, streaming", async ({ page }) => {
  await openHarness(page);
  const result = await page.evaluate(async () => {
    const client = window.harness.client();
    const many = await client.completions.create({
      model: "gamma-7b-instruct-v0.3",
      prompt: ["Once upon a time", "The weather today"],
      max_tokens: 8,
    });
    const stopped = await client.completions.create({
      model: "gamma-7b-instruct-v0.3",
      prompt: "Once upon a time",
      max_tokens: 40,
      stop: [" "],
    });
    const stream = await client.completions.create({
      model: "gamma-7b-instruct-v0.3",
      prompt: "Once upon a time",
      max_tokens: 8,
      stream: true,
    });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? "";
    return { many, stopped, streamed };
  });
  const many = textCompletionSchema.parse(result.many);
  expect(many.object).toBe("text_completion");
  expect(many.choices.map((choice) => choice.index)).toEqual([0, 1]);
  expect(many.choices.every((choice) => choice.finish_reason === "length")).toBe(true);
  expect(many.usage?.completion_tokens).toBe(16);
  expect(result.stopped.choices[0]?.text).not.toContain(" ");
  expect(result.stopped.choices[0]?.finish_reason).toBe("stop");
  expect(result.streamed).toBe(many.choices[0]?.text);
});

test("every error has OpenAI's body, the right status and a request id", async ({ page }) => {
  await openHarness(page);
  const results = await page.evaluate(async (modelId) => {
    const call = async (path: string, init: RequestInit = {}) => {
      const response = await window.harness.fetch(path.startsWith("/v1/") ? path.slice(3) : path, {
        method: "POST",
        ...init,
      });
      return { status: response.status, body: await response.json(), requestId: response.headers.get("x-request-id") };
    };
    const body = (value: unknown) => ({ body: JSON.stringify(value) });
    const user = [{ role: "user", content: "hi" }];
    const client = window.harness.client();
    let sdkError: unknown;
    try {
      await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] });
    } catch (error) {
      const apiError = error as { status: number; code: string; param: string; type: string; requestID: string };
      sdkError = {
        status: apiError.status,
        code: apiError.code,
        param: apiError.param,
        type: apiError.type,
        requestID: apiError.requestID,
      };
    }
    return {
      sdkError,
      missing: await call("/chat/completions", body({ messages: user })),
      wrongType: await call("/chat/completions", body({ model: modelId, messages: user, temperature: "hot" })),
      range: await call("/chat/completions", body({ model: modelId, messages: user, top_p: 1.5 })),
      nested: await call("/chat/completions", body({ model: modelId, messages: [{ role: "wizard", content: "hi" }] })),
      unknown: await call("/chat/completions", body({ model: modelId, messages: user, temprature: 1 })),
      malformed: await call("/chat/completions", { body: "{not json" }),
      context: await call(
        "/chat/completions",
        body({ model: "gamma-7b-instruct-v0.3", messages: user, max_tokens: 5000 }),
      ),
      orphanTool: await call(
        "/chat/completions",
        body({ model: modelId, messages: [{ role: "tool", content: "42", tool_call_id: "call_1" }] }),
      ),
      badUrl: await call("/v1/audio/speech", body({})),
      wrongMethod: await window.harness.fetch("/completions").then(async (response) => ({
        status: response.status,
        body: await response.json(),
        requestId: response.headers.get("x-request-id"),
      })),
      completionsMissing: await call("/completions", body({ model: modelId })),
    };
  }, model);

  expect(results.sdkError).toMatchObject({
    status: 404,
    code: "model_not_found",
    param: "model",
    type: "invalid_request_error",
  });
  expect((results.sdkError as { requestID: string }).requestID).toMatch(/^req_/);
  const expectations: Record<string, [number, string | null, string | null]> = {
    missing: [400, "missing_required_parameter", "model"],
    wrongType: [400, "invalid_type", "temperature"],
    range: [400, "invalid_value", "top_p"],
    nested: [400, "invalid_value", "messages[0].role"],
    unknown: [400, "unknown_parameter", "temprature"],
    malformed: [400, "invalid_json", null],
    context: [400, "context_length_exceeded", "messages"],
    orphanTool: [400, null, "messages.[0].role"],
    badUrl: [404, "unknown_url", null],
    wrongMethod: [404, "unknown_url", null],
    completionsMissing: [400, "missing_required_parameter", "prompt"],
  };
  for (const [name, [status, code, param]] of Object.entries(expectations)) {
    const result = (results as unknown as Record<string, { status: number; body: unknown; requestId: string }>)[name]!;
    expect({ name, status: result.status }).toEqual({ name, status });
    const parsed = errorBodySchema.parse(result.body);
    expect({ name, code: parsed.error.code, param: parsed.error.param }).toEqual({ name, code, param });
    expect(parsed.error.type).toBe("invalid_request_error");
    expect(result.requestId).toMatch(/^req_/);
  }
});

test("a client that aborts its stream stops the generation", async ({ page }) => {
  await openHarness(page, { engine: "deterministic", tokenDelayMs: 80 });
  const result = await page.evaluate(async (modelId) => {
    const client = window.harness.client();
    // Find a prompt with a long reply, so a generation that kept going would be obvious.
    let prompt = "";
    let length = 0;
    for (let attempt = 0; length < 30; attempt++) {
      prompt = `Tell me about the number ${attempt}.`;
      const probe = await client.chat.completions.create({
        model: modelId,
        messages: [{ role: "user", content: prompt }],
        max_tokens: 1,
      });
      void probe;
      const full = await client.completions.create({ model: modelId, prompt, max_tokens: 200 });
      length = full.usage?.completion_tokens ?? 0;
    }
    const controller = new AbortController();
    const stream = await client.completions.create(
      { model: modelId, prompt, max_tokens: 200, stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        void chunk;
        if (++chunks === 3) controller.abort();
      }
    } catch {
      // The SDK raises on abort.
    }
    const started = performance.now();
    const next = await client.completions.create({ model: modelId, prompt: "x", max_tokens: 1, stream: true });
    for await (const chunk of next) {
      void chunk;
      break;
    }
    return { length, chunks, waited: performance.now() - started };
  }, model);
  expect(result.chunks).toBe(3);
  // Had the aborted generation gone on, the next request would have queued behind its
  // remaining (length - 3) tokens at 80 ms each.
  expect(result.waited).toBeLessThan(((result.length - 3) * 80) / 2);
});

test("two tabs share one engine: requests run one at a time, first come first served, and the queue is bounded", async ({
  context,
}) => {
  const first = await context.newPage();
  const second = await context.newPage();
  const options = { engine: "deterministic" as const, tokenDelayMs: 150, maxQueued: 1 };
  await openHarness(first, options);
  await openHarness(second, options);
  const run = (page: typeof first, label: string) =>
    page.evaluate(
      async ({ modelId, label: name }) => {
        const client = window.harness.client();
        const events: { label: string; event: string; at: number }[] = [];
        try {
          const stream = await client.chat.completions.create({
            model: modelId,
            messages: [{ role: "user", content: name }],
            max_tokens: 10,
            stream: true,
          });
          for await (const chunk of stream) {
            if (!chunk.choices[0]?.delta.content) continue;
            events.push({ label: name, event: "token", at: Date.now() });
            (window as unknown as { streaming: Set<string> }).streaming.add(name);
          }
          events.push({ label: name, event: "done", at: Date.now() });
        } catch (error) {
          events.push({
            label: name,
            event: `error ${(error as { status: number }).status} ${(error as { code: string }).code}`,
            at: Date.now(),
          });
        }
        return events;
      },
      { modelId: model, label },
    );
  for (const page of [first, second])
    await page.evaluate(() => ((window as unknown as { streaming: Set<string> }).streaming = new Set()));
  // The first generation loads the engine and its tokenizer, which holds the worker's thread for
  // a moment: requests sent meanwhile would all arrive together, in no telling which order.
  expect((await run(first, "warm")).at(-1)?.event).toBe("done");
  const a = run(first, "a");
  await first.waitForFunction(() => (window as unknown as { streaming: Set<string> }).streaming.has("a"));
  // From a's first token it has 9 more to go, at 150 ms each: time enough for b to reach the
  // queue (nothing in the page shows when it has), and then for c to find it full.
  const b = run(second, "b");
  await first.waitForTimeout(400);
  const c = run(first, "c");
  const [eventsA, eventsB, eventsC] = await Promise.all([a, b, c]);
  expect(eventsC).toEqual([expect.objectContaining({ event: "error 503 engine_busy" })]);
  const doneA = eventsA.find((event) => event.event === "done")!.at;
  const firstTokenB = eventsB.find((event) => event.event === "token")!.at;
  expect(eventsA.filter((event) => event.event === "token").length).toBeGreaterThan(0);
  expect(firstTokenB).toBeGreaterThanOrEqual(doneA);
  expect(first.context().serviceWorkers().length).toBe(1);
});

test("embeddings through the openai SDK in the page: base64 by default, floats, dimensions, refusals, the ledger", async ({
  page,
}) => {
  const embedder = {
    id: "page-embed",
    kind: "embedding" as const,
    family: "llama3" as const,
    contextWindow: 512,
    dimensions: 128,
    matryoshkaDimensions: [32],
    price: { inputNanoUsdPerToken: 2, outputNanoUsdPerToken: 0 },
    gguf: [
      {
        modelId: "page-embed-q8_0",
        file: "https://models.example/page-embed-q8_0.gguf",
        quantization: "Q8_0",
        sizeMB: 30,
        kvCache: { layers: 6, kvHeads: 12, headDim: 32 },
      },
    ],
  };
  await openHarness(page, { engine: "deterministic", models: [embedder] });
  const result = await page.evaluate(async (id) => {
    const client = window.harness.client();
    const input = ["tide tables for the harbour", "ships at sea"];
    const byDefault = await client.embeddings.create({ model: id, input });
    const floats = await client.embeddings.create({ model: id, input, encoding_format: "float" });
    const cut = await client.embeddings.create({ model: id, input: input[0]!, dimensions: 32 });
    const refused = await client.embeddings
      .create({ model: "alpha3:8b-instruct-q8_0", input: "x" })
      .catch((error: { status: number; message: string }) => ({ status: error.status, message: error.message }));
    const ledger = await window.harness.handle!.admin.ledger({ accountId: window.harness.accountId });
    return { byDefault, floats, cut, refused, ledger };
  }, embedder.id);
  const floats = embeddingListSchema.parse(result.floats);
  const decoded = result.byDefault.data.map((item) => (item.embedding as number[]).map((value) => value.toFixed(6)));
  expect(decoded).toEqual(floats.data.map((item) => (item.embedding as number[]).map((value) => value.toFixed(6))));
  expect(floats.data[0]!.embedding).toHaveLength(128);
  expect(result.cut.data[0]!.embedding).toHaveLength(32);
  expect(result.refused).toMatchObject({
    status: 400,
    message: expect.stringContaining("not allowed to generate embeddings"),
  });
  const charges = result.ledger.filter((entry) => entry.kind === "charge" && entry.model === embedder.id);
  expect(charges).toHaveLength(3);
  expect(
    charges.every((entry) => entry.amountNanoUsd === entry.promptTokens! * 2 && entry.completionTokens === 0),
  ).toBe(true);
});

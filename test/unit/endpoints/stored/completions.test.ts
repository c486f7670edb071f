/**
 * OpenAI's stored chat completions: `store: true` keeps a chat completion (a stream's chunks put
 * together) for the key's account, and `/v1/chat/completions` lists, reads, updates and deletes
 * what was kept, in OpenAI's objects.
 */
import { describe, expect, it } from "vitest";
import { chatCompletionChunkSchema, chatCompletionSchema } from "../../../../src/core/wire/chat-completion.js";
import {
  completionDeletedSchema,
  storedCompletionListSchema,
  storedCompletionSchema,
  storedMessageListSchema,
} from "../../../../src/core/wire/stored-completions.js";
import { checkLedgerInvariant, makeApp, readJsonAt, sseEvents, type TestApp } from "../../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

async function chat(test: TestApp, body: Record<string, unknown>) {
  const response = await test.app.handle(test.post("/v1/chat/completions", { model, max_tokens: 12, ...body }));
  expect(response.status).toBe(200);
  return chatCompletionSchema.parse(await response.json());
}

async function streamed(test: TestApp, body: Record<string, unknown>) {
  const response = await test.app.handle(
    test.post("/v1/chat/completions", { model, max_tokens: 12, stream: true, ...body }),
  );
  expect(response.status).toBe(200);
  const frames = sseEvents(await response.text());
  expect(frames.at(-1)).toBe("[DONE]");
  return frames.slice(0, -1).map((frame) => chatCompletionChunkSchema.parse(JSON.parse(frame)));
}

const read = readJsonAt;

describe("stored chat completions", () => {
  it("keeps a store: true completion for its account: read back, its messages, listed by model and metadata, updated, deleted", async () => {
    const test = await makeApp();
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "Hello" }], name: "ann" },
    ];
    const first = await chat(test, { messages, store: true, metadata: { topic: "greeting" } });
    const second = await chat(test, { messages, store: true, model: "beta-2-9b-it" });
    const unstored = await chat(test, { messages });

    expect(storedCompletionSchema.parse(await read(test, `/chat/completions/${first.id}`))).toEqual({
      ...first,
      metadata: { topic: "greeting" },
    });
    expect(await read(test, `/chat/completions/${unstored.id}`)).toMatchObject({ status: 404 });
    const listedMessages = storedMessageListSchema.parse(await read(test, `/chat/completions/${first.id}/messages`));
    expect(listedMessages.data).toEqual([
      { id: `${first.id}-0`, role: "system", content: "Be brief.", content_parts: null },
      {
        id: `${first.id}-1`,
        role: "user",
        content: "Hello",
        content_parts: [{ type: "text", text: "Hello" }],
        name: "ann",
      },
    ]);

    const ids = async (query: string) =>
      storedCompletionListSchema.parse(await read(test, `/chat/completions${query}`)).data.map((each) => each.id);
    expect(await ids("")).toEqual([first.id, second.id]);
    expect(await ids("?order=desc")).toEqual([second.id, first.id]);
    expect(await ids(`?model=${model}`)).toEqual([first.id]);
    expect(await ids("?metadata[topic]=greeting")).toEqual([first.id]);
    expect(await ids("?metadata[topic]=other")).toEqual([]);
    const page = storedCompletionListSchema.parse(await read(test, "/chat/completions?limit=1"));
    expect([page.data.length, page.has_more, page.last_id]).toEqual([1, true, first.id]);
    expect(await ids(`?limit=1&after=${first.id}`)).toEqual([second.id]);
    expect(await read(test, "/chat/completions?after=chatcmpl-none")).toMatchObject({ status: 400, param: "after" });
    expect(await read(test, "/chat/completions?limit=101")).toMatchObject({ status: 400, param: "limit" });

    const updated = await read(test, `/chat/completions/${first.id}`, {
      method: "POST",
      body: JSON.stringify({ metadata: { topic: "hello", reviewed: "yes" } }),
    });
    expect(storedCompletionSchema.parse(updated).metadata).toEqual({ topic: "hello", reviewed: "yes" });
    expect(await ids("?metadata[reviewed]=yes&metadata[topic]=hello")).toEqual([first.id]);
    expect(
      await read(test, `/chat/completions/${first.id}`, {
        method: "POST",
        body: JSON.stringify({ metadata: {}, model }),
      }),
    ).toMatchObject({ status: 400, param: "model" });

    const otherKey = await test.admin.createKey({
      accountId: (await test.admin.createAccount({ name: "other", creditUsd: 1 })).id,
    });
    // Another account can neither read, update nor delete it.
    const asOther = (init: RequestInit = {}) => read(test, `/chat/completions/${first.id}`, init, otherKey.key);
    expect(await asOther()).toMatchObject({ status: 404 });
    expect(await asOther({ method: "POST", body: JSON.stringify({ metadata: {} }) })).toMatchObject({ status: 404 });
    expect(await asOther({ method: "DELETE" })).toMatchObject({ status: 404 });
    expect(storedCompletionSchema.parse(await read(test, `/chat/completions/${first.id}`)).metadata).toEqual({
      topic: "hello",
      reviewed: "yes",
    });

    const deleted = await read(test, `/chat/completions/${first.id}`, { method: "DELETE" });
    expect(completionDeletedSchema.parse(deleted)).toEqual({
      object: "chat.completion.deleted",
      id: first.id,
      deleted: true,
    });
    expect(await read(test, `/chat/completions/${first.id}`)).toMatchObject({ status: 404 });
    expect(await ids("")).toEqual([second.id]);
    await checkLedgerInvariant(test.database);
  });

  it("keeps a stored stream as the completion its chunks make, usage included, and streams it as if unstored", async () => {
    const test = await makeApp();
    const messages = [{ role: "user", content: "Hello" }];
    for (const extra of [
      {},
      { n: 2, logprobs: true, top_logprobs: 1 },
      { tools: [weather], tool_choice: "required" },
    ]) {
      const plain = await streamed(test, { messages, ...extra });
      const kept = await streamed(test, { messages, ...extra, store: true });
      // What the client sees is what it sees unstored: no usage it did not ask for.
      const shape = (chunks: typeof plain) =>
        chunks.map(({ id: _id, created: _created, ...chunk }) => JSON.stringify(chunk).replace(/call_\w+/g, "call"));
      expect(shape(kept)).toEqual(shape(plain));
      expect(kept.some((chunk) => "usage" in chunk)).toBe(false);

      const whole = await chat(test, { messages, ...extra });
      const stored = storedCompletionSchema.parse(await read(test, `/chat/completions/${kept[0]!.id}`));
      const withoutIds = (completion: typeof whole) =>
        JSON.stringify({ ...completion, id: "", created: 0 }).replace(/call_\w+/g, "call");
      expect(withoutIds({ ...stored, metadata: undefined } as typeof whole)).toEqual(withoutIds(whole));
      expect(stored.usage.completion_tokens).toBeGreaterThan(0);
    }
    // A stream that asked for its usage gets it, as unstored.
    const asked = await streamed(test, { messages, store: true, stream_options: { include_usage: true } });
    expect(asked.at(-1)!.usage).toMatchObject({ completion_tokens: 12 });
    await checkLedgerInvariant(test.database);
  });
});

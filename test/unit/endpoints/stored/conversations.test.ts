/**
 * OpenAI's Conversations API: a conversation keeps items for the key's account; a Responses
 * request with `conversation` answers over them and adds its input and output when it finishes.
 */
import { describe, expect, it } from "vitest";
import { conversationDeletedSchema, conversationSchema } from "../../../../src/core/wire/conversations.js";
import { inputItemListSchema, responseSchema } from "../../../../src/core/wire/response.js";
import { checkLedgerInvariant, makeApp, readJsonAt, type TestApp } from "../../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const post = (body: unknown): RequestInit => ({ method: "POST", body: JSON.stringify(body) });

async function respond(test: TestApp, body: Record<string, unknown>) {
  return responseSchema.parse(await readJsonAt(test, "/responses", post({ model, max_output_tokens: 16, ...body })));
}

async function itemIds(test: TestApp, id: string, query = "?order=asc") {
  return inputItemListSchema
    .parse(await readJsonAt(test, `/conversations/${id}/items${query}`))
    .data.map((item) => item.id);
}

const texts = (list: unknown) =>
  inputItemListSchema
    .parse(list)
    .data.map((item) =>
      item.type === "message" ? item.content.map((part) => ("text" in part ? part.text : "")).join("") : item.type,
    );

describe("the Conversations API", () => {
  it("creates a conversation, reads it, lists, adds, reads and deletes its items, replaces its metadata, deletes it", async () => {
    const test = await makeApp();
    const conversation = conversationSchema.parse(
      await readJsonAt(
        test,
        "/conversations",
        post({
          items: [
            { type: "message", role: "user", content: "Hello" },
            { role: "assistant", content: [{ type: "output_text", text: "Hi there" }], id: "msg_mine" },
          ],
          metadata: { topic: "greeting" },
        }),
      ),
    );
    expect(conversation).toMatchObject({ object: "conversation", metadata: { topic: "greeting" } });
    expect(conversation.id).toMatch(/^conv_/);
    expect(await readJsonAt(test, `/conversations/${conversation.id}`)).toEqual(conversation);

    const [first, second] = await itemIds(test, conversation.id);
    expect(second).toBe("msg_mine");
    expect(first).toMatch(/^msg_/);
    // An item whose id the conversation has gets a new one: a cursor and a deletion name one item.
    const added = inputItemListSchema.parse(
      await readJsonAt(
        test,
        `/conversations/${conversation.id}/items`,
        post({
          items: [
            { role: "user", content: "Again", id: "msg_mine" },
            { type: "function_call", call_id: "call_1", name: "f", arguments: "{}" },
            { type: "function_call_output", call_id: "call_1", output: "42" },
          ],
        }),
      ),
    );
    expect(added.data.map((item) => item.type)).toEqual(["message", "function_call", "function_call_output"]);
    expect(added.data[0]!.id).not.toBe("msg_mine");
    expect(added.has_more).toBe(false);
    const all = await itemIds(test, conversation.id);
    expect(all).toEqual([first, second, ...added.data.map((item) => item.id)]);
    expect(new Set(all).size).toBe(5);
    // Newest first by default, a page at a time.
    expect(await itemIds(test, conversation.id, "")).toEqual([...all].reverse());
    expect(await itemIds(test, conversation.id, `?order=asc&limit=2&after=${first}`)).toEqual(all.slice(1, 3));
    expect(await readJsonAt(test, `/conversations/${conversation.id}/items?after=msg_none`)).toMatchObject({
      status: 400,
      param: "after",
    });

    expect(await readJsonAt(test, `/conversations/${conversation.id}/items/${second}`)).toMatchObject({
      id: second,
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "Hi there" }],
    });
    expect(await readJsonAt(test, `/conversations/${conversation.id}/items/msg_none`)).toMatchObject({ status: 404 });
    const afterDeletion = await readJsonAt(test, `/conversations/${conversation.id}/items/${second}`, {
      method: "DELETE",
    });
    expect(conversationSchema.parse(afterDeletion).id).toBe(conversation.id);
    expect(await itemIds(test, conversation.id)).toEqual(all.filter((id) => id !== second));

    const updated = await readJsonAt(test, `/conversations/${conversation.id}`, post({ metadata: { topic: "x" } }));
    expect(conversationSchema.parse(updated).metadata).toEqual({ topic: "x" });
    expect(
      conversationDeletedSchema.parse(
        await readJsonAt(test, `/conversations/${conversation.id}`, { method: "DELETE" }),
      ),
    ).toEqual({ id: conversation.id, object: "conversation.deleted", deleted: true });
    expect(await readJsonAt(test, `/conversations/${conversation.id}`)).toMatchObject({ status: 404 });
    // Its items went with it.
    expect(await test.database.count("conversationItems")).toBe(0);
  });

  it("is the account's own: another account's key finds none of it", async () => {
    const test = await makeApp();
    const { id } = conversationSchema.parse(
      await readJsonAt(test, "/conversations", post({ items: [{ role: "user", content: "Hello" }] })),
    );
    const [item] = await itemIds(test, id);
    const other = await test.admin.createKey({
      accountId: (await test.admin.createAccount({ name: "other", creditUsd: 1 })).id,
    });
    const asOther = (path: string, init: RequestInit = {}) => readJsonAt(test, path, init, other.key);
    for (const [path, init] of [
      [`/conversations/${id}`, {}],
      [`/conversations/${id}`, post({ metadata: {} })],
      [`/conversations/${id}`, { method: "DELETE" }],
      [`/conversations/${id}/items`, {}],
      [`/conversations/${id}/items`, post({ items: [{ role: "user", content: "Mine" }] })],
      [`/conversations/${id}/items/${item}`, {}],
      [`/conversations/${id}/items/${item}`, { method: "DELETE" }],
      ["/responses", post({ model, input: "Hi", conversation: id })],
    ] as const)
      expect(await asOther(path, init), `${init.method ?? "GET"} ${path}`).toMatchObject({ status: 404 });
    expect(await itemIds(test, id)).toEqual([item]);
  });

  it("refuses in OpenAI's words what it cannot keep or find", async () => {
    const test = await makeApp();
    const create = (body: unknown) => readJsonAt(test, "/conversations", post(body));
    const many = Array.from({ length: 21 }, () => ({ role: "user", content: "x" }));
    expect(await create({ items: many })).toMatchObject({ status: 400, param: "items" });
    expect(
      await create({ items: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }),
    ).toMatchObject({ status: 400, param: "items[0].content[0].type" });
    expect(await create({ items: [{ type: "item_reference", id: "msg_none" }] })).toMatchObject({
      status: 400,
      param: "items[0]",
    });
    expect(await create({ title: "x" })).toMatchObject({ status: 400, param: "title" });
    const { id } = conversationSchema.parse(await create({}));
    expect(await readJsonAt(test, `/conversations/${id}/items`, post({ items: [] }))).toMatchObject({
      status: 400,
      param: "items",
    });
    expect(await readJsonAt(test, `/conversations/${id}/items?include=nothing`)).toMatchObject({
      status: 400,
      param: "include[0]",
    });
    expect(await readJsonAt(test, "/conversations/conv_none/items")).toMatchObject({
      status: 404,
      message: "Conversation with id 'conv_none' not found.",
    });
    const both = await readJsonAt(
      test,
      "/responses",
      post({ model, input: "Hi", conversation: id, previous_response_id: "resp_x" }),
    );
    expect(both).toMatchObject({ status: 400, code: "mutually_exclusive_parameters" });
    expect(await readJsonAt(test, "/responses", post({ model, input: "Hi", conversation: "conv_none" }))).toMatchObject(
      {
        status: 404,
        param: "conversation",
      },
    );
  });

  it("a response with `conversation` answers over its items and adds its input and output to them, whole and streamed", async () => {
    const test = await makeApp();
    const { id } = conversationSchema.parse(
      await readJsonAt(
        test,
        "/conversations",
        post({
          items: [
            { role: "user", content: "My name is Ann." },
            { role: "assistant", content: "Hello Ann." },
          ],
        }),
      ),
    );
    const counted = await readJsonAt(
      test,
      "/responses/input_tokens",
      post({ model, input: "What is my name?", conversation: id }),
    );
    const first = await respond(test, { input: "What is my name?", conversation: id });
    expect(counted).toEqual({ object: "response.input_tokens", input_tokens: first.usage!.input_tokens });
    expect(first.conversation).toEqual({ id });
    // The same prompt as the items sent whole: the same reply, the same input tokens.
    const sent = await respond(test, {
      input: [
        { role: "user", content: "My name is Ann." },
        { role: "assistant", content: "Hello Ann." },
        { role: "user", content: "What is my name?" },
      ],
    });
    expect([first.output, first.usage?.input_tokens]).toEqual([
      sent.output.map((item, index) => ({ ...item, id: first.output[index]!.id })),
      sent.usage?.input_tokens,
    ]);
    const afterFirst = await readJsonAt(test, `/conversations/${id}/items?order=asc`);
    expect(texts(afterFirst)).toEqual(["My name is Ann.", "Hello Ann.", "What is my name?", outputFirst(first)]);
    expect(inputItemListSchema.parse(afterFirst).data.at(-1)!.id).toBe(first.output[0]!.id);

    // Streamed, with the object form: the same rule, and the next turn sees the first one's reply.
    const response = await test.app.handle(
      test.post("/v1/responses", {
        model,
        input: "And again?",
        conversation: { id },
        stream: true,
        max_output_tokens: 16,
      }),
    );
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('"conversation":{"id":"');
    const afterSecond = texts(await readJsonAt(test, `/conversations/${id}/items?order=asc`));
    expect(afterSecond.slice(0, 5)).toEqual([...texts(afterFirst), "And again?"]);
    expect(afterSecond).toHaveLength(6);
    await checkLedgerInvariant(test.database);
  });

  it("with truncation auto, adds only its own items it answered over, as it bills and stores them", async () => {
    const test = await makeApp();
    const { id } = conversationSchema.parse(await readJsonAt(test, "/conversations", post({})));
    const input = [
      ...Array.from({ length: 12 }, (_, index) => [
        { role: "user", content: `Question ${index}: ${"word ".repeat(300)}` },
        { role: "assistant", content: `Answer ${index}: ${"reply ".repeat(300)}` },
      ]).flat(),
      { role: "user", content: "And now?" },
    ];
    const model = "gamma-7b-instruct-v0.3";
    const answered = await respond(test, {
      model,
      input,
      truncation: "auto",
      conversation: id,
      max_output_tokens: 1000,
    });
    const kept = await readJsonAt(test, `/responses/${answered.id}/input_items?order=asc&limit=100`);
    const keptIds = inputItemListSchema.parse(kept).data.map((item) => item.id);
    expect(keptIds.length).toBeLessThan(input.length);
    expect(await itemIds(test, id, "?order=asc&limit=100")).toEqual([
      ...keptIds,
      ...answered.output.map((item) => item.id),
    ]);
  });
});

function outputFirst(response: { output: { type: string; content?: { text: string }[] }[] }): string {
  return response.output[0]!.content!.map((part) => part.text).join("");
}

/**
 * `POST /v1/responses`: OpenAI's Responses API (what the Vercel AI SDK's `openai(model)` and the
 * SDKs' `responses.create` send), served as the chat request it amounts to, answered and streamed
 * in the Responses API's own objects and events, and stored for `previous_response_id` and
 * `item_reference`.
 */
import { describe, expect, it } from "vitest";
import { Ajv } from "ajv";
import { chatCompletionSchema } from "../../../../src/core/wire/chat-completion.js";
import { errorBodySchema } from "../../../../src/core/wire/error.js";
import {
  compactedResponseSchema,
  inputItemListSchema,
  responseEventSchema,
  responseSchema,
  type ResponseEvent,
} from "../../../../src/core/wire/response.js";
import { checkLedgerInvariant, makeApp, ScriptedEngine, type TestApp } from "../../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const families = ["alpha3:8b-instruct-q8_0", "beta-2-9b-it", "gamma-7b-instruct-v0.3"];
const weather = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
};

async function create(test: TestApp, body: Record<string, unknown>) {
  const response = await test.app.handle(test.post("/v1/responses", { model, ...body }));
  expect(response.status, JSON.stringify(body).slice(0, 120)).toBe(200);
  return responseSchema.parse(await response.json());
}

async function refusal(test: TestApp, body: Record<string, unknown>) {
  const response = await test.app.handle(test.post("/v1/responses", { model, ...body }));
  return { status: response.status, ...errorBodySchema.parse(await response.json()).error };
}

/** A Responses API stream's events, each checked: its `event:` line names its type, and no `[DONE]`. */
async function events(test: TestApp, body: Record<string, unknown>): Promise<ResponseEvent[]> {
  const response = await test.app.handle(test.post("/v1/responses", { model, stream: true, ...body }));
  expect(response.headers.get("content-type")).toContain("text/event-stream");
  const frames = (await response.text()).split("\n\n").filter(Boolean);
  return frames.map((frame) => {
    const [name, data, ...rest] = frame.split("\n");
    expect(rest).toEqual([]);
    const event = responseEventSchema.parse(JSON.parse(data!.replace(/^data: /, "")));
    expect(name).toBe(`event: ${event.type}`);
    return event;
  });
}

const outputText = (response: { output: { type: string; content?: { text: string }[] }[] }) =>
  response.output.flatMap((item) => (item.type === "message" ? item.content!.map((part) => part.text) : [])).join("");

describe("the Responses API", () => {
  it("answers with the reply the same chat request gets: instructions as the system turn, usage, and incomplete at the limit", async () => {
    const test = await makeApp();
    for (const id of families) {
      const chat = await test.app.handle(
        test.post("/v1/chat/completions", {
          model: id,
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Hello there" },
          ],
          max_completion_tokens: 20,
        }),
      );
      const completion = chatCompletionSchema.parse(await chat.json());
      const response = await create(test, {
        model: id,
        instructions: "Be brief.",
        input: "Hello there",
        max_output_tokens: 20,
      });
      expect(response).toMatchObject({
        object: "response",
        model: id,
        status: "incomplete",
        incomplete_details: { reason: "max_output_tokens" },
        instructions: "Be brief.",
        store: true,
        usage: {
          input_tokens: completion.usage.prompt_tokens,
          output_tokens: 20,
          total_tokens: completion.usage.prompt_tokens + 20,
        },
      });
      expect(response.id).toMatch(/^resp_/);
      expect(response.output).toHaveLength(1);
      expect(response.output[0]).toMatchObject({ type: "message", role: "assistant", status: "incomplete" });
      expect(outputText(response)).toBe(completion.choices[0]!.message.content);
    }
    await checkLedgerInvariant(test.database);
    expect((await test.database.getAll("ledger")).filter((entry) => entry.kind === "charge")).toHaveLength(6);
  });

  it("streams its events in order, numbered, each item opened and closed, the last one the whole response", async () => {
    const test = await makeApp();
    const streamed = await events(test, { input: "Tell me more", max_output_tokens: 400 });
    expect(streamed.map((event) => event.sequence_number)).toEqual(streamed.map((_, index) => index));
    expect(streamed.map((event) => event.type).filter((type) => type !== "response.output_text.delta")).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const deltas = streamed.flatMap((event) => (event.type === "response.output_text.delta" ? [event.delta] : []));
    expect(deltas.length).toBeGreaterThan(1);
    const [created, last] = [streamed[0]!, streamed.at(-1)!];
    if (created.type !== "response.created" || last.type !== "response.completed") throw new Error(last.type);
    expect([created.response.store, created.response.status, last.response.store]).toEqual([true, "in_progress", true]);
    expect(last.response.status).toBe("completed");
    expect(outputText(last.response)).toBe(deltas.join(""));
    const whole = await create(test, { input: "Tell me more", max_output_tokens: 400 });
    expect(outputText(whole)).toBe(deltas.join(""));
    expect(last.response.usage).toEqual(whole.usage);
  });

  it("calls function tools as function_call items, streams their arguments, and answers their outputs", async () => {
    const test = await makeApp();
    const ajv = new Ajv();
    for (const id of families) {
      const called = await create(test, {
        model: id,
        input: "Weather in Oslo?",
        tools: [weather],
        tool_choice: "required",
      });
      const calls = called.output.filter((item) => item.type === "function_call");
      expect(calls.length).toBeGreaterThan(0);
      for (const call of calls) {
        expect(call).toMatchObject({
          name: "get_weather",
          status: "completed",
          call_id: expect.stringMatching(/^call_/),
        });
        expect(ajv.validate(weather.parameters, JSON.parse(call.arguments))).toBe(true);
      }
      const streamed = await events(test, {
        model: id,
        input: "Weather in Oslo?",
        tools: [weather],
        tool_choice: "required",
      });
      const done = streamed.filter((event) => event.type === "response.function_call_arguments.done");
      for (const event of done) {
        const pieces = streamed.filter(
          (each) => each.type === "response.function_call_arguments.delta" && each.item_id === event.item_id,
        );
        expect(pieces.map((piece) => ("delta" in piece ? piece.delta : "")).join("")).toBe(event.arguments);
      }
      expect(done.length).toBeGreaterThan(0);
      const answered = await create(test, {
        model: id,
        tools: [weather],
        input: [
          { role: "user", content: "Weather in Oslo?" },
          ...calls,
          ...calls.map((call) => ({ type: "function_call_output", call_id: call.call_id, output: '{"temp":3}' })),
        ],
      });
      expect(answered.output.map((item) => item.type)).toEqual(["message"]);
      // A message between a call and its output, as the Responses API takes it: the output
      // answers its call, and the message follows (the prompt the reordered items make).
      const outputs = calls.map((call) => ({ type: "function_call_output", call_id: call.call_id, output: "3" }));
      const [between, after] = await Promise.all(
        [
          [...calls, { role: "user", content: "Thanks." }, ...outputs],
          [...calls, ...outputs, { role: "user", content: "Thanks." }],
        ].map((items) =>
          create(test, { model: id, tools: [weather], input: [{ role: "user", content: "Weather?" }, ...items] }),
        ),
      );
      // Ids and call ids are new in each response; the rest is the same.
      const made = (response: typeof after) =>
        [response!.output.map(({ id: _id, ...item }) => ({ ...item, call_id: "" })), response!.usage] as const;
      expect(made(between)).toEqual(made(after));
    }
  });

  it("takes tool_choice in its own forms: a function by name, allowed_tools, and parallel_tool_calls false", async () => {
    const test = await makeApp();
    // Null where chat leaves a field out, as the Responses API allows.
    const lights = { ...weather, name: "set_lights", description: null, strict: null };
    const names = async (extra: Record<string, unknown>) => {
      const response = await create(test, {
        model: "gamma-7b-instruct-v0.3",
        input: "Go",
        tools: [weather, lights],
        ...extra,
      });
      return response.output.flatMap((item) => (item.type === "function_call" ? [item.name] : []));
    };
    expect(await names({ tool_choice: { type: "function", name: "set_lights" } })).toEqual(["set_lights"]);
    expect(await names({ tool_choice: "required" })).toHaveLength(2);
    expect(await names({ tool_choice: "required", parallel_tool_calls: false })).toHaveLength(1);
    const allowed = { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "get_weather" }] };
    expect(await names({ tool_choice: allowed })).toEqual(["get_weather"]);
    // A choice the tools cannot meet, in the Responses API's own words (not chat's).
    const notFound = {
      status: 400,
      param: "tool_choice",
      message: "Tool choice 'function' not found in 'tools' parameter.",
    };
    for (const tools of [[weather], [], undefined])
      expect(
        await refusal(test, { input: "Go", tools, tool_choice: { type: "function", name: "nope" } }),
      ).toMatchObject(notFound);
    for (const tools of [[], undefined])
      expect(await refusal(test, { input: "Go", tools, tool_choice: "required" })).toMatchObject({
        status: 400,
        param: "tool_choice",
        message: "Tool choice 'required' must be specified with 'tools' parameter.",
      });
    // Its auto and none need no tools, and an empty list is none.
    for (const tool_choice of ["auto", "none", undefined])
      expect((await create(test, { input: "Go", tools: [], tool_choice, max_output_tokens: 16 })).status).toBe(
        "incomplete",
      );
  });

  it("gives log probabilities when include asks for them, top_logprobs alternatives each", async () => {
    const test = await makeApp();
    const plain = await create(test, { input: "Hello", max_output_tokens: 16 });
    const part = (response: typeof plain) => (response.output[0] as { content: { logprobs: unknown[] }[] }).content[0]!;
    expect(part(plain).logprobs).toEqual([]);
    const asked = await create(test, {
      input: "Hello",
      max_output_tokens: 16,
      include: ["message.output_text.logprobs"],
      top_logprobs: 2,
    });
    const logprobs = part(asked).logprobs as { token: string; top_logprobs: unknown[] }[];
    expect(logprobs).toHaveLength(16);
    expect(logprobs.map((entry) => entry.token).join("")).toBe(outputText(asked));
    expect(logprobs.every((entry) => entry.top_logprobs.length === 2)).toBe(true);
  });

  it("answers in the JSON of a text.format json_schema", async () => {
    const test = await makeApp();
    const schema = {
      type: "object",
      properties: { name: { type: "string" }, age: { type: "integer" } },
      required: ["name", "age"],
      additionalProperties: false,
    };
    const response = await create(test, {
      input: "A person",
      // Null where chat leaves a field out, as the Responses API allows.
      text: { format: { type: "json_schema", name: "person", schema, strict: true, description: null } },
    });
    expect(new Ajv().validate(schema, JSON.parse(outputText(response)))).toBe(true);
    expect(response.text.format).toMatchObject({ type: "json_schema", name: "person" });
  });

  it("keeps a response for its account: previous_response_id continues it, item_reference finds its items, GET and DELETE", async () => {
    const test = await makeApp();
    const first = await create(test, { input: "Hello", max_output_tokens: 16 });
    const continued = await create(test, { input: "And then?", previous_response_id: first.id, max_output_tokens: 16 });
    // The same conversation sent whole, items and all, gets the same reply.
    const sent = await create(test, {
      input: [{ role: "user", content: "Hello" }, ...first.output, { role: "user", content: "And then?" }],
      max_output_tokens: 16,
      store: false,
    });
    expect(sent.store).toBe(false);
    expect([outputText(continued), continued.usage]).toEqual([outputText(sent), sent.usage]);
    expect(continued.previous_response_id).toBe(first.id);
    const referred = await create(test, {
      input: [
        { role: "user", content: "Hello" },
        { type: "item_reference", id: first.output[0]!.id },
        { role: "user", content: "And then?" },
      ],
      max_output_tokens: 16,
    });
    expect(outputText(referred)).toBe(outputText(sent));

    const read = await test.app.handle(test.get(`/v1/responses/${first.id}`));
    expect(responseSchema.parse(await read.json())).toEqual(first);
    // Only a background response streams again, and there are none here.
    const again = await test.app.handle(test.get(`/v1/responses/${first.id}?stream=true`));
    expect([again.status, errorBodySchema.parse(await again.json()).error.param]).toEqual([400, "stream"]);
    const unstored = await test.app.handle(test.get(`/v1/responses/${sent.id}`));
    expect(unstored.status).toBe(404);
    // Only a background response can be cancelled, and there are none.
    const cancel = async (id: string) => {
      const response = await test.app.handle(test.post(`/v1/responses/${id}/cancel`, {}));
      return { status: response.status, message: errorBodySchema.parse(await response.json()).error.message };
    };
    expect(await cancel(first.id)).toEqual({ status: 400, message: "Cannot cancel a synchronous response." });
    expect((await cancel(sent.id)).status).toBe(404);

    const otherKey = await test.admin.createKey({
      accountId: (await test.admin.createAccount({ name: "other", creditUsd: 1 })).id,
    });
    const asOther = await test.app.handle(
      new Request(`https://app.example/openai/v1/responses/${first.id}`, {
        headers: { authorization: `Bearer ${otherKey.key}` },
      }),
    );
    expect(asOther.status).toBe(404);

    const deleting = (key: string) =>
      new Request(`https://app.example/openai/v1/responses/${first.id}`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${key}` },
      });
    expect((await test.app.handle(deleting(otherKey.key))).status).toBe(404);
    expect(await (await test.app.handle(deleting(test.key))).json()).toEqual({
      id: first.id,
      object: "response",
      deleted: true,
    });
    expect((await refusal(test, { input: "x", previous_response_id: first.id })).code).toBe(
      "previous_response_not_found",
    );
  });

  it("lists the items a stored response was given, under the ids they keep in later responses, a page at a time", async () => {
    const test = await makeApp();
    const list = async (id: string, query = "", as = test.key) => {
      const response = await test.app.handle(
        new Request(`https://app.example/openai/v1/responses/${id}/input_items${query}`, {
          headers: { authorization: `Bearer ${as}` },
        }),
      );
      const body: unknown = await response.json();
      return response.ok
        ? inputItemListSchema.parse(body)
        : { status: response.status, ...errorBodySchema.parse(body).error };
    };
    const first = await create(test, {
      input: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "input_text", text: "Weather in Oslo?" }] },
      ],
      tools: [weather],
      tool_choice: "required",
    });
    const call = first.output.find((item) => item.type === "function_call")!;
    const second = await create(test, {
      previous_response_id: first.id,
      tools: [weather],
      input: [
        { type: "function_call_output", call_id: call.call_id, output: '{"temp":3}' },
        { role: "user", content: "And Bergen?", id: "msg_mine" },
        { role: "user", content: "And Bergen?", id: "msg_mine" },
      ],
    });
    const ascending = await list(second.id, "?order=asc");
    if (!("data" in ascending)) throw new Error(JSON.stringify(ascending));
    const items = ascending.data;
    expect(
      items.map((item) => [item.type, "role" in item ? item.role : "call_id" in item ? item.call_id : item.type]),
    ).toEqual([
      ["message", "developer"],
      ["message", "user"],
      ...first.output.map((item) => [
        item.type,
        item.type === "message" ? "assistant" : "call_id" in item ? item.call_id : item.type,
      ]),
      ["function_call_output", call.call_id],
      ["message", "user"],
      ["message", "user"],
    ]);
    expect(items[1]).toEqual({
      id: expect.stringMatching(/^msg_/),
      type: "message",
      status: "completed",
      role: "user",
      content: [{ type: "input_text", text: "Weather in Oslo?" }],
    });
    // An earlier reply keeps its output id; the first response's items keep theirs; ids are unique.
    expect(items.slice(2, 2 + first.output.length).map((item) => item.id)).toEqual(first.output.map((item) => item.id));
    const firstItems = await list(first.id, "?order=asc");
    expect("data" in firstItems && firstItems.data).toEqual(items.slice(0, 2));
    expect(items.at(-3)!.id).toMatch(/^fco_/);
    expect(items.at(-2)!.id).toBe("msg_mine");
    expect(new Set(items.map((item) => item.id)).size).toBe(items.length);

    // Newest first by default, 20 at most; a cursor walks the rest, the same on every read.
    const newest = await list(second.id);
    expect("data" in newest && newest.data).toEqual([...items].reverse());
    const walked: string[] = [];
    let page = await list(second.id, "?limit=2");
    while ("data" in page) {
      walked.push(...page.data.map((item) => item.id));
      if (!page.has_more) break;
      expect(page.last_id).toBe(page.data.at(-1)!.id);
      page = await list(second.id, `?limit=2&after=${page.last_id}`);
    }
    expect(walked).toEqual(items.map((item) => item.id).reverse());

    expect(await list(second.id, "?limit=0")).toMatchObject({ status: 400, param: "limit" });
    expect(await list(second.id, "?limit=many")).toMatchObject({ status: 400, param: "limit" });
    expect(await list(second.id, "?order=up")).toMatchObject({ status: 400, param: "order" });
    expect(await list(second.id, "?after=msg_none")).toMatchObject({ status: 400, param: "after" });
    expect(await list("resp_missing")).toMatchObject({ status: 404 });
    const otherKey = await test.admin.createKey({
      accountId: (await test.admin.createAccount({ name: "other", creditUsd: 1 })).id,
    });
    expect(await list(second.id, "", otherKey.key)).toMatchObject({ status: 404 });
  });

  it("lists the items of a response stored without their ids (by an earlier version) under ids that stay put", async () => {
    const test = await makeApp();
    const first = await create(test, { input: "Hello", max_output_tokens: 16 });
    // An earlier version kept the whole conversation in `input`, and no chain.
    const {
      conversationLength: _length,
      previousResponseId: _previous,
      ...record
    } = (await test.database.get("responses", first.id))!;
    const input = [
      { role: "user", content: "Hello" },
      { type: "function_call_output", call_id: "call_1", output: "3" },
    ];
    await test.database.put("responses", { ...record, input });
    const read = async () =>
      inputItemListSchema.parse(
        await (await test.app.handle(test.get(`/v1/responses/${first.id}/input_items`))).json(),
      );
    const [once, again] = [await read(), await read()];
    expect(once).toEqual(again);
    expect(once.data.map((item) => item.id)).toEqual([expect.stringMatching(/^fco_/), expect.stringMatching(/^msg_/)]);
  });

  it("truncation auto drops a conversation's first turns until it fits the window, as OpenAI does; disabled refuses it", async () => {
    const test = await makeApp();
    const gamma = "gamma-7b-instruct-v0.3";
    const turns = Array.from({ length: 12 }, (_, index) => [
      { role: "user", content: `Question ${index}: ${"word ".repeat(300)}` },
      { role: "assistant", content: `Answer ${index}: ${"reply ".repeat(300)}` },
    ]).flat();
    const input = [...turns, { role: "user", content: "And now?" }];
    const body = { model: gamma, instructions: "Be brief.", input, max_output_tokens: 1000 };
    expect(await refusal(test, body)).toMatchObject({ status: 400, code: "context_length_exceeded", param: "input" });

    const answered = await create(test, { ...body, truncation: "auto" });
    expect(answered.truncation).toBe("auto");
    const inputTokens = answered.usage!.input_tokens;
    expect(inputTokens + 1000).toBeLessThanOrEqual(4096);
    const listed = await (
      await test.app.handle(test.get(`/v1/responses/${answered.id}/input_items?order=asc&limit=100`))
    ).json();
    const kept = inputItemListSchema.parse(listed).data;
    // The longest end that fits, from a user's turn: one turn more does not fit.
    const start = input.length - kept.length;
    expect(start).toBeGreaterThan(0);
    expect(kept[0]).toMatchObject({ role: "user", content: [{ text: input[start]!.content }] });
    expect(await refusal(test, { ...body, input: input.slice(start - 2) })).toMatchObject({ status: 400 });
    // Counting takes no max_output_tokens: its truncation keeps what the window holds without one.
    const { max_output_tokens: _limit, ...counted } = body;
    const count = async (extra: Record<string, unknown>) => {
      const response = await test.app.handle(test.post("/v1/responses/input_tokens", { ...counted, ...extra }));
      return ((await response.json()) as { input_tokens: number }).input_tokens;
    };
    expect(await count({ input: input.slice(start) })).toBe(inputTokens);
    const withoutLimit = await count({ truncation: "auto" });
    expect(withoutLimit).toBeGreaterThan(inputTokens);
    expect(withoutLimit).toBeLessThan(4096);

    // A last turn too long for the window on its own is refused, truncation or not.
    const tooLong = [...turns, { role: "user", content: "word ".repeat(5000) }];
    expect(await refusal(test, { ...body, input: tooLong, truncation: "auto" })).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
    });
    await checkLedgerInvariant(test.database);
  });

  it("forgets a response after 30 days, as OpenAI does", async () => {
    const test = await makeApp();
    const first = await create(test, { input: "Hello", max_output_tokens: 16 });
    test.clock.now += 30 * 24 * 60 * 60 * 1000 + 1;
    expect((await test.app.handle(test.get(`/v1/responses/${first.id}`))).status).toBe(404);
    await create(test, { input: "Hello", max_output_tokens: 16 });
    expect((await test.database.getAll("responses")).map((record) => record.id)).not.toContain(first.id);
  });

  it("counts a response's input tokens as the response is billed them, charging nothing: POST /v1/responses/input_tokens", async () => {
    const test = await makeApp();
    const count = async (body: Record<string, unknown>) => {
      const response = await test.app.handle(test.post("/v1/responses/input_tokens", { model, ...body }));
      expect(response.status, JSON.stringify(body).slice(0, 120)).toBe(200);
      expect(response.headers.get("x-ratelimit-remaining-requests")).not.toBeNull();
      return (await response.json()) as unknown;
    };
    const first = await create(test, { instructions: "Be brief.", input: "Hello there", max_output_tokens: 16 });
    const asked = [
      { instructions: "Be brief.", input: "Hello there" },
      { input: "What is the weather in Paris?", tools: [weather], tool_choice: "required" },
      { previous_response_id: first.id, input: [{ role: "user", content: "And again?" }] },
      { input: "Answer in JSON.", text: { format: { type: "json_object" } } },
    ];
    for (const body of asked) {
      const charges = (await test.database.getAll("ledger")).length;
      const counted = await count(body);
      expect((await test.database.getAll("ledger")).length).toBe(charges);
      const response = await create(test, { ...body, max_output_tokens: 16 });
      expect(counted).toEqual({ object: "response.input_tokens", input_tokens: response.usage!.input_tokens });
    }
    const refused = await test.app.handle(
      test.post("/v1/responses/input_tokens", { model, input: "Hi", temperature: 1 }),
    );
    expect(refused.status).toBe(400);
    expect(errorBodySchema.parse(await refused.json()).error).toMatchObject({ param: "temperature" });
    const missing = await test.app.handle(
      test.post("/v1/responses/input_tokens", { model, input: "Hi", previous_response_id: "resp_none" }),
    );
    expect(errorBodySchema.parse(await missing.json()).error).toMatchObject({
      param: "previous_response_id",
      code: "previous_response_not_found",
    });
  });

  it("refuses in OpenAI's words what it cannot honour or find", async () => {
    const test = await makeApp();
    expect(await refusal(test, { input: "x", max_output_tokens: 8 })).toMatchObject({
      status: 400,
      param: "max_output_tokens",
    });
    expect(await refusal(test, { input: "x", reasoning: { effort: "low" } })).toMatchObject({
      status: 400,
      param: "reasoning",
      code: "unsupported_parameter",
      message: "Unsupported parameter: 'reasoning' is not supported with this model.",
    });
    expect(await refusal(test, { input: "x", seed: 1 })).toMatchObject({
      status: 400,
      param: "seed",
      code: "unknown_parameter",
    });
    expect(await refusal(test, { input: "x", previous_response_id: "resp_missing" })).toMatchObject({
      status: 400,
      param: "previous_response_id",
      message: "Previous response with id 'resp_missing' not found.",
    });
    const reference = await refusal(test, { input: [{ type: "item_reference", id: "msg_missing" }] });
    expect(reference).toMatchObject({ status: 400, param: "input[0]" });
    expect(reference.message).toMatch(/^Item with id 'msg_missing' not found\./);
    expect(await refusal(test, { input: "x", background: true })).toMatchObject({ status: 400, param: "background" });
    expect(await refusal(test, { input: "x", include: ["bogus"] })).toMatchObject({
      status: 400,
      param: "include[0]",
      message: expect.stringMatching(
        /^Invalid value: 'bogus'\. Supported values are: 'code_interpreter_call\.outputs',/,
      ),
    });
    // A refusal of the chat request it became names the Responses request's own fields.
    expect(
      await refusal(test, { model: "gamma-7b-instruct-v0.3", instructions: "Be brief.", input: "word ".repeat(5000) }),
    ).toMatchObject({ status: 400, param: "input", code: "context_length_exceeded" });
    expect(
      await refusal(test, {
        input: "x",
        text: { format: { type: "json_schema", name: "s", schema: { type: "nope" } } },
      }),
    ).toMatchObject({ status: 400, param: "text.format.schema" });
    expect(
      await refusal(test, {
        input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }],
      }),
    ).toMatchObject({
      status: 400,
      code: "invalid_value",
      param: "input[0].content[0].type",
      message: `Invalid content type. input_image is only supported by models that take images; ${model} takes text only.`,
    });
    expect(await refusal(test, { input: "x", tools: [{ type: "web_search" }] })).toMatchObject({
      status: 400,
      param: "tools[0].type",
    });
  });
});

describe("the response object, as Open Responses' schema asks", () => {
  it("says when it completed, echoes its sampling parameters, and each function tool with all its fields", async () => {
    const test = await makeApp();
    const bare = { type: "function", name: "ping" };
    const answered = await create(test, {
      input: "Hi",
      presence_penalty: 0.5,
      tools: [weather, bare],
      tool_choice: "none",
    });
    expect(answered.completed_at).toBeGreaterThanOrEqual(answered.created_at);
    expect(answered).toMatchObject({ presence_penalty: 0.5, frequency_penalty: 0 });
    expect(answered.tools).toEqual([weather, { ...bare, description: null, parameters: null, strict: null }]);
    const cut = await create(test, { input: "Hi", max_output_tokens: 16, temperature: 0 });
    expect([cut.status, cut.completed_at]).toEqual(["incomplete", null]);
    const streamed = await events(test, { input: "Hi" });
    expect(streamed[0]).toMatchObject({ response: { completed_at: null, presence_penalty: 0 } });
    expect((streamed.at(-1) as { response: { completed_at: number | null } }).response.completed_at).toBeTypeOf(
      "number",
    );
  });
});

describe("compaction: POST /v1/responses/compact", () => {
  const compact = async (test: TestApp, body: Record<string, unknown>, key = test.key) => {
    const response = await test.app.handle(
      new Request(test.post("/v1/responses/compact", {}).url, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
    );
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const conversation = [
    { role: "user", content: "We agreed to launch on Tuesday and notify support first." },
    { role: "assistant", content: "Understood. The launch is Tuesday, with support notified beforehand." },
  ];

  it("keeps the user's messages and puts one sealed item for the rest, billed; a later request continues from it", async () => {
    const scripted = new ScriptedEngine(async function* (request) {
      const text = request.input.kind === "chat" ? request.input.pieces.map((piece) => piece.text).join("") : "";
      yield { type: "text-delta", text: text.includes("Summarize") ? "Launch Tuesday; tell support." : "OK" };
      yield { type: "finish", reason: "stop", usage: { promptTokens: null, completionTokens: 3 } };
    });
    const test = await makeApp({ engine: scripted });
    const { status, body } = await compact(test, { model, input: conversation, prompt_cache_key: "k" });
    expect(status).toBe(200);
    const compacted = compactedResponseSchema.parse(body);
    expect(compacted.object).toBe("response.compaction");
    expect(compacted.output.map((item) => item.type)).toEqual(["message", "compaction"]);
    expect(compacted.output[0]).toMatchObject({ role: "user", content: [{ text: conversation[0]!.content }] });
    const sealed = compacted.output[1] as { encrypted_content: string };
    expect(sealed.encrypted_content).not.toContain("Tuesday");
    expect(compacted.usage.output_tokens).toBe(3);
    const ledger = (await test.admin.ledger({ accountId: test.accountId })).filter((entry) => entry.kind === "charge");
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ completionTokens: 3, status: "completed" });
    // The next request reads the summary where the item stands.
    await create(test, { input: [...compacted.output, { role: "user", content: "When do we launch?" }] });
    const prompt = scripted.seen.at(-1)!.input;
    const text = prompt.kind === "chat" ? prompt.pieces.map((piece) => piece.text).join("") : "";
    expect(text).toContain("Launch Tuesday; tell support.");
    expect(text).not.toContain(sealed.encrypted_content);
    await checkLedgerInvariant(test.database);
  });

  it("refuses a compaction item of another account or altered, and a request without a model", async () => {
    const test = await makeApp();
    const { body } = await compact(test, { model, input: conversation });
    const item = (body.output as { type: string; encrypted_content: string }[]).at(-1)!;
    const other = await test.admin.createAccount({ name: "other", creditUsd: 1 });
    const { key } = await test.admin.createKey({ accountId: other.id });
    const replayed = await test.app.handle(
      new Request(test.post("/v1/responses", {}).url, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model, input: [item, { role: "user", content: "And?" }] }),
      }),
    );
    expect(replayed.status).toBe(400);
    expect(((await replayed.json()) as { error: object }).error).toMatchObject({
      code: "invalid_encrypted_content",
      param: "input[0].encrypted_content",
    });
    const altered = { ...item, encrypted_content: `${item.encrypted_content}A` };
    expect(await refusal(test, { input: [altered, { role: "user", content: "And?" }] })).toMatchObject({
      status: 400,
      code: "invalid_encrypted_content",
    });
    const missing = await compact(test, { input: conversation });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ param: "model" });
  });
});

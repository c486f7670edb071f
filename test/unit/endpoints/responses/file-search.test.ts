/**
 * The Responses API's `file_search` tool through openai-node unchanged: the account's stores
 * searched for the user's question, the `file_search_call` item (with its results when included),
 * an answer whose `file_citation`s name the passages it cites, the events OpenAI streams for it,
 * the search billed beside the answer, and nothing of another account's stores; and the Agents
 * SDK's `fileSearchTool()` on it.
 */
import { Agent, fileSearchTool, OpenAIProvider, Runner } from "@openai/agents";
import OpenAI, { toFile } from "openai";
import { describe, expect, it } from "vitest";
import { responseEventSchema, responseSchema } from "../../../../src/core/wire/response.js";
import type { Engine, GenerationPart, GenerationRequest } from "../../../../src/engines/contract.js";
import { DeterministicEngine } from "../../../../src/engines/deterministic/engine.js";
import { toolSyntax } from "../../../../src/prompt/templates.js";
import { checkLedgerInvariant, makeApp, tokenizers, type TestApp } from "../../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const embeddingModel = "snowflake-arctic-embed-s";

function client(test: TestApp, apiKey = test.key) {
  const fetch = async (input: string | URL | Request, init?: RequestInit) => test.app.handle(new Request(input, init));
  return new OpenAI({
    baseURL: "https://app.example/openai/v1",
    apiKey,
    fetch: fetch as typeof globalThis.fetch,
    maxRetries: 0,
  });
}

const kettle = "To descale the kettle, fill it with water and white vinegar, boil it, and rinse it twice.";
const bread = "Bread needs flour, water, salt and yeast. Knead the dough for ten minutes, then let it rise.";
const question = "How do I descale the kettle?";

/** A store holding the kettle's manual and a bread recipe, indexed. */
async function storeOfTwo(openai: OpenAI) {
  const store = await openai.vectorStores.create({ name: "Home" });
  const files = [];
  for (const [name, text] of [
    ["kettle.md", kettle],
    ["bread.txt", bread],
  ] as const)
    files.push(
      await openai.vectorStores.files.uploadAndPoll(store.id, await toFile(Buffer.from(text), name), {
        pollIntervalMs: 5,
      }),
    );
  return { store, kettleFile: files[0]!, breadFile: files[1]! };
}

/** Whether a generation is the model asked whether to search: offered the `file_search` function. */
const isDecision = (request: GenerationRequest) =>
  request.constraint?.kind === "tools" && request.constraint.tools.some((tool) => tool.name === "file_search");

/**
 * The deterministic engine, scripted where the test says. Asked whether to search, it calls
 * `file_search` with the queries `decide` gives for the prompt, or (given null) answers; every
 * other answer is `reply`, when given (to cite passages by number).
 */
function scriptedEngine({
  decide = () => [question],
  reply,
}: {
  decide?: (prompt: string) => string[] | null;
  reply?: string;
}): Engine & { seen: GenerationRequest[] } {
  const deterministic = new DeterministicEngine({ tokenizers, tokenDelayMs: 0 });
  const seen: GenerationRequest[] = [];
  return Object.assign(Object.create(deterministic) as Engine, {
    seen,
    embed: (...args: Parameters<NonNullable<Engine["embed"]>>) => deterministic.embed(...args),
    async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
      seen.push(request);
      const queries = isDecision(request) ? decide(JSON.stringify(request.input)) : undefined;
      const text =
        queries === undefined
          ? reply
          : queries
            ? toolSyntax[request.model.family].write([{ name: "file_search", arguments: { queries } }])
            : "Hello! How can I help?";
      if (text === undefined) return yield* deterministic.generate(request, signal);
      for (const word of text.split(/(?<= )/)) yield { type: "text-delta", text: word };
      yield { type: "finish", reason: "stop", usage: { promptTokens: 50, completionTokens: 9 } };
    },
  });
}

type AgentsClient = NonNullable<NonNullable<ConstructorParameters<typeof OpenAIProvider>[0]>["openAIClient"]>;

/** The account's charges, oldest first. */
const charges = async (test: TestApp) =>
  (await test.admin.ledger({ accountId: test.accountId })).filter((entry) => entry.kind === "charge").reverse();

describe("file_search in the Responses API", () => {
  it("searches the store for the question, then answers with the passages found and cites their files", async () => {
    const test = await makeApp({ engine: scriptedEngine({}) });
    const openai = client(test);
    const { store, kettleFile } = await storeOfTwo(openai);
    const before = (await charges(test)).length;
    const response = await openai.responses.create({
      model,
      input: question,
      tools: [{ type: "file_search", vector_store_ids: [store.id], max_num_results: 2 }],
      include: ["file_search_call.results"],
    });
    const { output_text: _text, ...wire } = response;
    responseSchema.parse(wire);
    const [call, message] = response.output;
    expect(call).toMatchObject({ type: "file_search_call", status: "completed", queries: [question] });
    expect(call!.id).toMatch(/^fs_/);
    if (call?.type !== "file_search_call") throw new Error("no file_search_call first");
    expect(call.results!.map((result) => result.filename)).toEqual(["kettle.md", "bread.txt"]);
    expect(call.results![0]).toMatchObject({ file_id: kettleFile.id, text: kettle, attributes: {} });
    expect(call.results![0]!.score).toBeGreaterThan(call.results![1]!.score!);
    if (message?.type !== "message" || message.content[0]?.type !== "output_text") throw new Error("no answer");
    const text = message.content[0];
    // The deterministic engine cites no number, so each file it was given is cited at the end of the text.
    expect(text.annotations).toEqual([
      { type: "file_citation", file_id: kettleFile.id, filename: "kettle.md", index: text.text.length },
      expect.objectContaining({ type: "file_citation", filename: "bread.txt", index: text.text.length }),
    ]);
    expect(response.tools).toEqual([
      {
        type: "file_search",
        vector_store_ids: [store.id],
        max_num_results: 2,
        filters: null,
        ranking_options: { ranker: "auto", score_threshold: 0 },
      },
    ]);
    // Three entries: the model's decision to search, the question embedded with the store's model, and the answer.
    const added = (await charges(test)).slice(before);
    expect(added.map((entry) => entry.model)).toEqual([model, embeddingModel, model]);
    const search = added.find((entry) => entry.model === embeddingModel)!;
    expect(search.completionTokens).toBe(0);
    expect(search.amountNanoUsd).toBe(search.promptTokens! * 1);
    await checkLedgerInvariant(test.database);

    // Without `include`, the call says what it searched for and not what it found.
    const plain = await openai.responses.create({
      model,
      input: question,
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
    });
    expect(plain.output[0]).toMatchObject({ type: "file_search_call", queries: [question], results: null });
  });

  it("gives the model the passages, numbered, and cites the passage each [n] of the answer names", async () => {
    const engine = scriptedEngine({ reply: "Boil water and white vinegar in it [1], then rinse it." });
    const test = await makeApp({ engine });
    const openai = client(test);
    const { store, kettleFile } = await storeOfTwo(openai);
    const response = await openai.responses.create({
      model,
      instructions: "Answer briefly.",
      input: question,
      tools: [{ type: "file_search", vector_store_ids: [store.id], max_num_results: 1 }],
    });
    const prompt = JSON.stringify(engine.seen.at(-1)!.input);
    expect(prompt).toContain("Answer briefly.");
    expect(prompt).toContain(`[1] kettle.md\\n${kettle}`);
    expect(prompt).not.toContain("Knead the dough");
    const text = response.output_text;
    expect(text).toBe("Boil water and white vinegar in it [1], then rinse it.");
    const message = response.output[1];
    if (message?.type !== "message" || message.content[0]?.type !== "output_text") throw new Error("no answer");
    expect(message.content[0].annotations).toEqual([
      { type: "file_citation", file_id: kettleFile.id, filename: "kettle.md", index: text.indexOf("[1]") },
    ]);
  });

  it("streams the call's events before the answer, and the annotations before its text is done", async () => {
    const engine = scriptedEngine({ reply: "Use vinegar [1] and rinse [2]." });
    const test = await makeApp({ engine });
    const openai = client(test);
    const { store } = await storeOfTwo(openai);
    const stream = await openai.responses.create({
      model,
      input: question,
      stream: true,
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
      include: ["file_search_call.results"],
    });
    const events = [];
    for await (const event of stream) events.push(responseEventSchema.parse(event));
    const types = events.map((event) => event.type);
    expect(types.slice(0, 7)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.file_search_call.in_progress",
      "response.file_search_call.searching",
      "response.file_search_call.completed",
      "response.output_item.done",
    ]);
    expect(events[2]).toMatchObject({ output_index: 0, item: { type: "file_search_call", status: "in_progress" } });
    const annotations = events.filter((event) => event.type === "response.output_text.annotation.added");
    expect(annotations.map((event) => event.annotation_index)).toEqual([0, 1]);
    expect(annotations.every((event) => event.output_index === 1)).toBe(true);
    expect(types.indexOf("response.output_text.annotation.added")).toBeLessThan(
      types.indexOf("response.output_text.done"),
    );
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    const completed = events.at(-1)!;
    if (completed.type !== "response.completed") throw new Error(`ended with ${completed.type}`);
    const whole = await openai.responses.create({
      model,
      input: question,
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
      include: ["file_search_call.results"],
    });
    const shape = (output: typeof whole.output) =>
      output.map((item) => (item.type === "file_search_call" ? { ...item, id: "" } : { ...item, id: "" }));
    expect(shape(completed.response.output as typeof whole.output)).toEqual(shape(whole.output));
  });

  it("does not search under tool_choice none, and runs the search when the choice names it", async () => {
    const test = await makeApp();
    const openai = client(test);
    const { store } = await storeOfTwo(openai);
    const tools: OpenAI.Responses.Tool[] = [{ type: "file_search", vector_store_ids: [store.id] }];
    const before = (await charges(test)).length;
    const none = await openai.responses.create({ model, input: question, tools, tool_choice: "none" });
    expect(none.output.map((item) => item.type)).toEqual(["message"]);
    expect((await charges(test)).slice(before).map((entry) => entry.model)).toEqual([model]);
    // Forced, the search is for the user's message, and the model is not asked whether to search.
    for (const choice of ["required", { type: "file_search" }] as const) {
      const forced = await openai.responses.create({ model, input: question, tools, tool_choice: choice });
      expect(forced.output.map((item) => item.type)).toEqual(["file_search_call", "message"]);
      expect(forced.output[0]).toMatchObject({ queries: [question] });
    }
    expect((await charges(test)).slice(before).map((entry) => entry.model)).toEqual([
      model,
      embeddingModel,
      model,
      embeddingModel,
      model,
    ]);
    // A named function is what the model must call: nothing is searched.
    const weather: OpenAI.Responses.FunctionTool = {
      type: "function",
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      strict: false,
    };
    const both = await openai.responses.create({
      model,
      input: question,
      tools: [...tools, weather],
      tool_choice: { type: "function", name: "get_weather" },
    });
    expect(both.output.map((item) => item.type)).toEqual(["function_call"]);
    const charged = (await charges(test)).slice(before).map((entry) => entry.model);
    expect(charged.filter((name) => name === embeddingModel)).toHaveLength(2);
    // A message past the embedding model's window is searched for by its end, not refused.
    const long = `${"Some words of a long letter. ".repeat(400)}${question}`;
    const searched = await openai.responses.create({ model, input: long, tools, tool_choice: "required" });
    expect(searched.output[0]).toMatchObject({ type: "file_search_call", status: "completed" });
  });

  it("under auto, the model decides: it searches for the queries it writes, or answers without searching", async () => {
    const engine = scriptedEngine({
      decide: (prompt) => (prompt.includes("Hello") ? null : ["descale kettle", "  ", "kettle vinegar"]),
    });
    const test = await makeApp({ engine });
    const openai = client(test);
    const { store } = await storeOfTwo(openai);
    const tools: OpenAI.Responses.Tool[] = [{ type: "file_search", vector_store_ids: [store.id] }];
    const before = (await charges(test)).length;
    const searched = await openai.responses.create({ model, input: question, tools });
    const decision = engine.seen.at(-2)!;
    expect(isDecision(decision)).toBe(true);
    expect(JSON.stringify(decision.input)).toContain(question);
    expect(decision.sampling.maxTokens).toBeLessThanOrEqual(128);
    // The user's message, then the model's queries, the blank one dropped.
    expect(searched.output[0]).toMatchObject({
      type: "file_search_call",
      queries: [question, "descale kettle", "kettle vinegar"],
    });
    expect(JSON.stringify(engine.seen.at(-1)!.input)).toContain("kettle.md");
    const added = (await charges(test)).slice(before);
    expect(added.map((entry) => entry.model)).toEqual([model, embeddingModel, model]);
    // The response's usage is both passes', as billed.
    const usageOf = (entries: typeof added) => ({
      input_tokens: entries.reduce((sum, entry) => sum + entry.promptTokens!, 0),
      output_tokens: entries.reduce((sum, entry) => sum + entry.completionTokens!, 0),
    });
    expect(searched.usage).toMatchObject(usageOf(added.filter((entry) => entry.model === model)));
    const answered = await openai.responses.create({ model, input: "Hello there", tools });
    expect(answered.output.map((item) => item.type)).toEqual(["message"]);
    expect(JSON.stringify(engine.seen.at(-1)!.input)).not.toContain("kettle.md");
    expect(isDecision(engine.seen.at(-1)!)).toBe(false);
    const passes = (await charges(test)).slice(before + 3);
    expect(passes.map((entry) => entry.model)).toEqual([model, model]);
    expect(answered.usage).toMatchObject(usageOf(passes));
    await checkLedgerInvariant(test.database);
  });

  it("under auto, the tokens spent deciding come out of max_output_tokens", async () => {
    const test = await makeApp({ engine: scriptedEngine({}) });
    const openai = client(test);
    const { store } = await storeOfTwo(openai);
    const tools: OpenAI.Responses.Tool[] = [{ type: "file_search", vector_store_ids: [store.id] }];
    const response = await openai.responses.create({ model, input: question, tools, max_output_tokens: 40 });
    expect(response.output[0]).toMatchObject({ type: "file_search_call" });
    expect(response.usage!.output_tokens).toBeLessThanOrEqual(40);
    const engine = (test.engine as ReturnType<typeof scriptedEngine>).seen;
    expect(engine.at(-2)!.sampling.maxTokens).toBe(40);
    expect(engine.at(-1)!.sampling.maxTokens).toBe(40 - 9);
  });

  it("on the deterministic engine, auto searches for the question and the queries it draws, and the model's tokens are billed", async () => {
    const test = await makeApp();
    const openai = client(test);
    const { store } = await storeOfTwo(openai);
    const before = (await charges(test)).length;
    const response = await openai.responses.create({
      model,
      input: question,
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
      include: ["file_search_call.results"],
    });
    const call = response.output[0];
    if (call?.type !== "file_search_call") throw new Error("no file_search_call first");
    // The question, then the words it drew: the question's passage still leads.
    expect(call.queries[0]).toBe(question);
    expect(call.queries.length).toBeGreaterThan(1);
    expect(call.results![0]!.filename).toBe("kettle.md");
    const added = (await charges(test)).slice(before);
    expect(added.map((entry) => entry.model)).toEqual([model, embeddingModel, model]);
    const billed = added.filter((entry) => entry.model === model);
    expect(response.usage!.output_tokens).toBe(billed.reduce((sum, entry) => sum + entry.completionTokens!, 0));
    expect(response.usage!.input_tokens).toBe(billed.reduce((sum, entry) => sum + entry.promptTokens!, 0));
  });

  it("gives the model the best passages that fit half its window, and cites only those", async () => {
    const engine = scriptedEngine({ reply: "See [1] and [9]." });
    const test = await makeApp({ engine });
    const openai = client(test);
    const store = await openai.vectorStores.create({ name: "Long notes" });
    const words = "kettle water vinegar boil rinse scale mineral heat element switch".split(" ");
    for (let file = 0; file < 12; file++) {
      const text = Array.from({ length: 300 }, (_, index) => words[(index * (file + 3)) % words.length]).join(" ");
      await openai.vectorStores.files.uploadAndPoll(store.id, await toFile(Buffer.from(text), `note-${file}.txt`), {
        pollIntervalMs: 5,
      });
    }
    // gamma's window is 4,096 tokens: twelve passages of some 300 tokens would not leave room for the answer.
    const response = await openai.responses.create({
      model: "gamma-7b-instruct-v0.3",
      input: "How do I descale the kettle?",
      tools: [{ type: "file_search", vector_store_ids: [store.id], max_num_results: 12 }],
      include: ["file_search_call.results"],
    });
    const call = response.output[0];
    if (call?.type !== "file_search_call") throw new Error("no file_search_call first");
    expect(call.results).toHaveLength(12);
    const prompt = JSON.stringify(engine.seen.at(-1)!.input);
    const given = [...prompt.matchAll(/\[(\d+)\] note-/g)].length;
    expect(given).toBeGreaterThan(1);
    expect(given).toBeLessThan(12);
    const message = response.output[1];
    if (message?.type !== "message" || message.content[0]?.type !== "output_text") throw new Error("no answer");
    // [9] names no passage the model was given: only [1] is cited.
    expect(message.content[0].annotations).toHaveLength(given >= 9 ? 2 : 1);
  });

  it("continues from a response that searched, and takes its call back as input", async () => {
    const engine = scriptedEngine({ decide: (prompt) => [prompt.includes("And the bread?") ? "bread" : question] });
    const test = await makeApp({ engine });
    const openai = client(test);
    const { store } = await storeOfTwo(openai);
    const tools: OpenAI.Responses.Tool[] = [{ type: "file_search", vector_store_ids: [store.id] }];
    const first = await openai.responses.create({ model, input: question, tools, store: true });
    const second = await openai.responses.create({
      model,
      previous_response_id: first.id,
      input: "And the bread?",
      tools,
    });
    expect(second.output[0]).toMatchObject({ type: "file_search_call", queries: ["And the bread?", "bread"] });
    const items = await openai.responses.inputItems.list(second.id);
    expect(items.data.map((item) => item.type)).toContain("file_search_call");
    // A client that keeps its own history (the Agents SDK does) sends the call back with its results.
    const again = await openai.responses.create({
      model,
      input: [
        { role: "user", content: question },
        ...(first.output as OpenAI.Responses.ResponseInputItem[]),
        { role: "user", content: "Thanks" },
      ],
      tools,
    });
    expect(again.status).toBe("completed");
  });

  it("refuses a store that is not the account's by name, with nothing billed", async () => {
    const test = await makeApp();
    const { store } = await storeOfTwo(client(test));
    const other = await test.admin.createAccount({ name: "other", creditUsd: 1 });
    const intruder = client(test, (await test.admin.createKey({ accountId: other.id })).key);
    const tools: OpenAI.Responses.Tool[] = [{ type: "file_search", vector_store_ids: [store.id] }];
    await expect(intruder.responses.create({ model, input: question, tools })).rejects.toMatchObject({
      status: 404,
      param: "tools[0].vector_store_ids",
    });
    expect((await test.admin.ledger({ accountId: other.id })).filter((entry) => entry.kind === "charge")).toEqual([]);
    // Its own store first, then another's: refused before its own is searched.
    const own = await intruder.vectorStores.create({ name: "Own" });
    await intruder.vectorStores.files.uploadAndPoll(own.id, await toFile(Buffer.from(kettle), "own.md"), {
      pollIntervalMs: 5,
    });
    const before = (await test.admin.ledger({ accountId: other.id })).length;
    await expect(
      intruder.responses.create({
        model,
        input: question,
        tools: [{ type: "file_search", vector_store_ids: [own.id, store.id] }],
      }),
    ).rejects.toMatchObject({ status: 404, param: "tools[0].vector_store_ids" });
    expect(await test.admin.ledger({ accountId: other.id })).toHaveLength(before);
    await expect(
      intruder.responses.create({ model, input: question, tools, tool_choice: { type: "file_search" } }),
    ).rejects.toMatchObject({ status: 404 });
    await expect(
      client(test).responses.create({ model, input: question, tool_choice: { type: "file_search" } }),
    ).rejects.toMatchObject({ status: 400, param: "tool_choice" });
    // A store past its expires_after is a 400 naming the tool, with nothing searched or billed.
    const openai = client(test);
    const lapsing = await openai.vectorStores.create({ expires_after: { anchor: "last_active_at", days: 1 } });
    test.clock.now += 2 * 86_400_000;
    const charged = (await charges(test)).length;
    await expect(
      openai.responses.create({
        model,
        input: question,
        tools: [{ type: "file_search", vector_store_ids: [store.id, lapsing.id] }],
      }),
    ).rejects.toMatchObject({ status: 400, code: "vector_store_expired", param: "tools[0].vector_store_ids" });
    expect(await charges(test)).toHaveLength(charged);
  });
});

describe("file_search through the Agents SDK", () => {
  it("an agent with fileSearchTool() searches the store and answers from it", async () => {
    const test = await makeApp({ engine: scriptedEngine({}) });
    const openai = client(test);
    const { store, kettleFile } = await storeOfTwo(openai);
    // The SDK's own openai is a later major version; the client it is given needs only `responses`.
    const provider = new OpenAIProvider({ openAIClient: openai as unknown as AgentsClient, useResponses: true });
    const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
    const agent = new Agent({
      name: "Helper",
      instructions: "Answer from the user's files.",
      model,
      tools: [fileSearchTool([store.id], { maxNumResults: 1, includeSearchResults: true })],
    });
    const result = await runner.run(agent, question);
    const call = result.newItems.find((item) => item.type === "tool_call_item");
    expect(call?.rawItem).toMatchObject({ type: "hosted_tool_call", name: "file_search_call", status: "completed" });
    expect(call?.rawItem).toMatchObject({
      providerData: { queries: [question], results: [{ file_id: kettleFile.id, filename: "kettle.md" }] },
    });
    expect(typeof result.finalOutput).toBe("string");
    expect(result.finalOutput!.length).toBeGreaterThan(0);
    // A second turn sends the call back as input, as the SDK keeps its history.
    const next = await runner.run(agent, [...result.history, { role: "user", content: "And the bread?" }]);
    expect(next.finalOutput!.length).toBeGreaterThan(0);
  });
});

/**
 * The parameters real OpenAI clients send, each honoured, accepted (where that is faithful), or
 * refused in OpenAI's words; one case per row of docs/api-reference.md's parameter tables that this checks.
 */
import { describe, expect, it } from "vitest";
import { chatCompletionChunkSchema, chatCompletionSchema } from "../../../../src/core/wire/chat-completion.js";
import { errorBodySchema } from "../../../../src/core/wire/error.js";
import { textCompletionSchema } from "../../../../src/core/wire/text-completion.js";
import { DeterministicEngine } from "../../../../src/engines/deterministic/engine.js";
import type { GenerationRequest } from "../../../../src/engines/contract.js";
import { makeApp, sseEvents, tokenizers, type TestApp } from "../../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const messages = [{ role: "user", content: "Hello" }];

async function chat(test: TestApp, extra: Record<string, unknown>) {
  const response = await test.app.handle(
    test.post("/v1/chat/completions", { model, messages, max_tokens: 3, ...extra }),
  );
  const body = (await response.json()) as unknown;
  return { status: response.status, body };
}

async function refusal(test: TestApp, path: string, body: Record<string, unknown>) {
  const response = await test.app.handle(test.post(path, body));
  return { status: response.status, ...errorBodySchema.parse(await response.json()).error };
}

describe("parameters", () => {
  it("accepts what is faithful to accept: store, prompt caching hints, safety_identifier, user, modalities text, prediction", async () => {
    const test = await makeApp();
    for (const extra of [
      { store: true },
      { store: false },
      { prompt_cache_key: "conversation-42" },
      { safety_identifier: "user-hash-1" },
      { user: "someone" },
      { modalities: ["text"] },
      { prediction: { type: "content", content: "Hello there" } },
      // What openai-python 3.22 sends for prompt caching; the engines cache prefixes unasked.
      { prompt_cache_options: { mode: "explicit", ttl: "30m" } },
      { prompt_cache_retention: "24h" },
      { prompt_cache_retention: "in_memory" },
      {
        messages: [
          { role: "user", content: [{ type: "text", text: "Hi", prompt_cache_breakpoint: { mode: "explicit" } }] },
        ],
      },
      { service_tier: "fast" },
      {
        metadata: Object.fromEntries(
          Array.from({ length: 16 }, (_, index) => [`k${index}`.padEnd(64, "k"), "v".repeat(512)]),
        ),
      },
    ]) {
      const { status, body } = await chat(test, extra);
      expect(status, JSON.stringify(extra).slice(0, 80)).toBe(200);
      expect(chatCompletionSchema.parse(body).usage.completion_tokens).toBe(3);
    }
  });

  it("accepts stream_options.include_obfuscation: the padding guards a network the stream never crosses", async () => {
    const test = await makeApp();
    for (const include_obfuscation of [true, false]) {
      const response = await test.app.handle(
        test.post("/v1/chat/completions", {
          model,
          messages,
          max_tokens: 2,
          stream: true,
          stream_options: { include_obfuscation },
        }),
      );
      expect(response.status).toBe(200);
      expect(sseEvents(await response.text()).at(-1)).toBe("[DONE]");
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
    const tooMany = await refusal(test, "/v1/chat/completions", {
      model,
      messages,
      metadata: Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, "v"])),
    });
    expect(tooMany).toMatchObject({ status: 400, param: "metadata", code: "object_above_max_properties" });
    expect(tooMany.message).toBe(
      "Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object with 17 properties instead.",
    );
    const key = "界".repeat(65);
    const longKey = await refusal(test, "/v1/chat/completions", { model, messages, metadata: { [key]: "v" } });
    expect(longKey).toMatchObject({ status: 400, param: `metadata.${key}` });
    expect(longKey.message).toBe(
      `Invalid property name in 'metadata': '${key}' is too long. Expected a string with maximum length 64, but got a string with length 65 instead.`,
    );
    const longValue = await refusal(test, "/v1/chat/completions", {
      model,
      messages,
      metadata: { key: "🧪".repeat(513) },
    });
    expect(longValue).toMatchObject({ status: 400, param: "metadata.key", code: "string_above_max_length" });
    expect(longValue.message).toBe(
      "Invalid 'metadata.key': string too long. Expected a string with maximum length 512, but got a string with length 513 instead.",
    );
    // Characters, as OpenAI counts them: 512 emoji (1,024 UTF-16 units) are within the limit, and
    // a key named `__proto__` is a key like any other.
    const emoji = JSON.parse(`{"__proto__":"${"🧪".repeat(512)}"}`) as Record<string, string>;
    const response = await test.app.handle(
      test.post("/v1/chat/completions", { model, messages, max_tokens: 1, metadata: emoji }),
    );
    expect(response.status).toBe(200);
  });

  it("refuses what these models cannot do, in OpenAI's words: reasoning_effort, audio, moderation, non-text modalities, image and audio inputs", async () => {
    const test = await makeApp();
    expect(await refusal(test, "/v1/chat/completions", { model, messages, reasoning_effort: "low" })).toMatchObject({
      status: 400,
      code: "unsupported_parameter",
      param: "reasoning_effort",
      message: "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
    });
    expect(
      await refusal(test, "/v1/chat/completions", { model, messages, audio: { voice: "alloy", format: "wav" } }),
    ).toMatchObject({ status: 400, param: "audio" });
    // OpenAI's default verbosity is what these models do; another is refused as for its models without the setting.
    expect(await refusal(test, "/v1/chat/completions", { model, messages, verbosity: "low" })).toMatchObject({
      status: 400,
      param: "verbosity",
      code: "unsupported_value",
      message: `Unsupported value: 'low' is not supported with the '${model}' model. Supported values are: 'medium'.`,
    });
    expect(await refusal(test, "/v1/chat/completions", { model, messages, verbosity: "loud" })).toMatchObject({
      status: 400,
      param: "verbosity",
    });
    for (const [path, body] of [
      ["/v1/chat/completions", { model, messages, verbosity: "medium", max_tokens: 4 }],
      ["/v1/responses", { model, input: "Hi", text: { verbosity: "medium" }, max_output_tokens: 16 }],
    ] as const)
      expect((await test.app.handle(test.post(path, body))).status, path).toBe(200);
    expect(await refusal(test, "/v1/responses", { model, input: "Hi", text: { verbosity: "high" } })).toMatchObject({
      status: 400,
      param: "text.verbosity",
      code: "unsupported_value",
    });
    expect(
      await refusal(test, "/v1/chat/completions", { model, messages, moderation: { model: "omni-moderation-latest" } }),
    ).toMatchObject({
      status: 400,
      param: "moderation",
      message: "Unsupported parameter: 'moderation' is not supported with this model.",
    });
    expect(await refusal(test, "/v1/chat/completions", { model, messages, web_search_options: {} })).toMatchObject({
      status: 400,
      param: "web_search_options",
      message: "Web search options not supported with this model.",
    });
    expect(
      (await refusal(test, "/v1/chat/completions", { model, messages, modalities: ["text", "audio"] })).status,
    ).toBe(400);
    const image = await refusal(test, "/v1/chat/completions", {
      model,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?" },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
          ],
        },
      ],
    });
    expect(image).toMatchObject({ status: 400, code: "invalid_value", param: "messages[0].content[1].type" });
    expect(image.message).toBe(
      `Invalid content type. image_url is only supported by models that take images; ${model} takes text only.`,
    );
    const sound = await refusal(test, "/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } }] }],
    });
    expect(sound.message).toContain("input_audio is only supported by models that take audio");
  });

  it("takes an assistant's refusal part back in the history, as the words it said", async () => {
    const test = await makeApp();
    const said = "I cannot help with that.";
    const usage = async (content: unknown) => {
      const history = [...messages, { role: "assistant", content }, { role: "user", content: "Why?" }];
      const response = await test.app.handle(
        test.post("/v1/chat/completions", { model, messages: history, max_tokens: 1 }),
      );
      expect(response.status).toBe(200);
      return ((await response.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    };
    expect(await usage([{ type: "refusal", refusal: said }])).toBe(await usage(said));
  });

  it("takes a reply sent back as openai-python's .parse() returns it: parsed, parsed_arguments and annotations", async () => {
    const test = await makeApp();
    const sentBack = {
      role: "assistant",
      content: null,
      refusal: null,
      parsed: null,
      annotations: [],
      audio: null,
      function_call: null,
      tool_calls: [
        {
          id: "call_1",
          type: "function",
          function: { name: "f", arguments: '{"city":"Oslo"}', parsed_arguments: { city: "Oslo" } },
        },
      ],
    };
    const history = [...messages, sentBack, { role: "tool", tool_call_id: "call_1", content: "3 degrees" }];
    const response = await test.app.handle(
      test.post("/v1/chat/completions", { model, messages: history, max_tokens: 1 }),
    );
    expect(response.status).toBe(200);
    // What a reply cannot be sent back with is still refused by name.
    const odd = { ...sentBack, tool_calls: [{ ...sentBack.tool_calls[0]!, extra: 1 }] };
    expect(
      await refusal(test, "/v1/chat/completions", { model, messages: [...history.slice(0, 1), odd, history[2]] }),
    ).toMatchObject({ code: "unknown_parameter", param: "messages[1].tool_calls[0].extra" });
  });

  it("holds tool turns to OpenAI's rule: each call answered by the tool messages right after it", async () => {
    const test = await makeApp();
    const call = (id: string) => ({ id, type: "function", function: { name: "f", arguments: "{}" } });
    const asked = { role: "assistant", content: null, tool_calls: [call("c1"), call("c2")] };
    const answer = (id: string) => ({ role: "tool", tool_call_id: id, content: "done" });
    const chat = (history: unknown[]) => refusal(test, "/v1/chat/completions", { model, messages: history });
    expect(await chat([...messages, asked, answer("c1"), { role: "user", content: "And?" }])).toMatchObject({
      status: 400,
      code: null,
      param: "messages.[3].role",
      message:
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
        "The following tool_call_ids did not have response messages: c2",
    });
    expect(await chat([...messages, asked])).toMatchObject({
      param: "messages",
      message: expect.stringMatching(/: c1, c2$/),
    });
    expect(await chat([...messages, answer("c1")])).toMatchObject({
      param: "messages.[1].role",
      message:
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    });
    // A tool message answers the assistant turn its run follows, not one before.
    const later = [...messages, asked, answer("c1"), answer("c2"), { role: "assistant", content: "ok" }, answer("c1")];
    expect(await chat(later)).toMatchObject({ param: "messages.[5].role" });
    expect(await chat([...messages, asked, answer("c3")])).toMatchObject({
      param: "messages.[2].tool_call_id",
      message: "Invalid parameter: 'tool_call_id' of 'c3' not found in 'tool_calls' of previous message.",
    });
    // Answered, in any order: served.
    const answered = [...messages, asked, answer("c2"), answer("c1"), { role: "user", content: "And?" }];
    const response = await test.app.handle(
      test.post("/v1/chat/completions", { model, messages: answered, max_tokens: 1 }),
    );
    expect(response.status).toBe(200);
  });

  it("refuses tool fields without tools, as OpenAI does", async () => {
    const test = await makeApp();
    const parallel = await refusal(test, "/v1/chat/completions", { model, messages, parallel_tool_calls: true });
    expect(parallel).toMatchObject({ status: 400, param: "parallel_tool_calls" });
    expect(parallel.message).toBe(
      "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.",
    );
    // Every choice, none and auto too (OpenAI's answer to each, as vLLM's maintainers checked it).
    for (const choice of ["none", "auto", "required", { type: "function", function: { name: "f" } }]) {
      expect(await refusal(test, "/v1/chat/completions", { model, messages, tool_choice: choice })).toMatchObject({
        status: 400,
        param: "tool_choice",
        message: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
      });
    }
    // The deprecated pair, in its own terms.
    expect(await refusal(test, "/v1/chat/completions", { model, messages, function_call: "none" })).toMatchObject({
      status: 400,
      param: "function_call",
      message: "Invalid value for 'function_call': 'function_call' is only allowed when 'functions' are specified.",
    });
    // A null choice is no choice, and the Responses API takes auto and none without tools.
    const unset = await test.app.handle(
      test.post("/v1/chat/completions", { model, messages, tool_choice: null, max_tokens: 1 }),
    );
    expect(unset.status).toBe(200);
    for (const choice of ["auto", "none"]) {
      const response = await test.app.handle(
        test.post("/v1/responses", { model, input: "Hi", tool_choice: choice, max_output_tokens: 16 }),
      );
      expect(response.status).toBe(200);
    }
  });

  it("legacy best_of: must be at least n, as OpenAI says; equal to n it is the same as n", async () => {
    const test = await makeApp();
    expect(await refusal(test, "/v1/completions", { model, prompt: "Hi", n: 2, best_of: 1 })).toMatchObject({
      status: 400,
      param: "best_of",
      message: "best_of must be greater than or equal to n.",
    });
    expect(
      await refusal(test, "/v1/completions", { model, prompt: "Hi", n: 1, best_of: 3, stream: true }),
    ).toMatchObject({ status: 400, param: "best_of" });
    const response = await test.app.handle(
      test.post("/v1/completions", { model, prompt: "Hi", n: 2, best_of: 2, max_tokens: 2 }),
    );
    expect(response.status).toBe(200);
    expect(textCompletionSchema.parse(await response.json()).choices).toHaveLength(2);
  });

  it("legacy best_of above n: best_of candidates per prompt, the n with the highest mean log probability per token returned, all billed", async () => {
    // Candidate k (in generation order) says "c<k>" in two tokens whose log probabilities are -k/10 and -k/5.
    const scores = [3, 1, 4, 1.5, 0.5, 2];
    let generated = 0;
    const engine = new DeterministicEngine({ tokenizers, tokenDelayMs: 0 });
    engine.generate = async function* (request) {
      const k = generated++;
      const entry = (token: string, logprob: number) => ({
        token,
        logprob,
        bytes: [...Buffer.from(token)],
        alternatives: [],
      });
      expect(request.sampling.logprobs).toBe(0);
      yield {
        type: "text-delta",
        text: `c${k}`,
        logprobs: [entry("c", -scores[k]! / 10), entry(String(k), -scores[k]! / 5)],
      };
      yield { type: "finish", reason: "stop", usage: { promptTokens: 1, completionTokens: 2 } };
    };
    const test = await makeApp({ engine });
    const response = await test.app.handle(
      test.post("/v1/completions", { model, prompt: ["A", "B"], n: 2, best_of: 3, max_tokens: 2 }),
    );
    const body = textCompletionSchema.parse(await response.json());
    // Prompt A's candidates score 3, 1, 4 (lower is likelier): c1 then c0; prompt B's 1.5, 0.5, 2: c4 then c3.
    expect(body.choices.map((choice) => [choice.index, choice.text, choice.logprobs])).toEqual([
      [0, "c1", null],
      [1, "c0", null],
      [2, "c4", null],
      [3, "c3", null],
    ]);
    expect(body.usage?.completion_tokens).toBe(12);
    expect(generated).toBe(6);
  });

  it("the deprecated functions and function_call work as tools, answered in their own shape, streamed and not", async () => {
    const test = await makeApp();
    const weather = {
      name: "get_weather",
      description: "The weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
        additionalProperties: false,
      },
    };
    const request = {
      model,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      functions: [weather],
      function_call: { name: "get_weather" },
    };
    const whole = chatCompletionSchema.parse(
      await (await test.app.handle(test.post("/v1/chat/completions", request))).json(),
    );
    const choice = whole.choices[0]!;
    expect(choice.finish_reason).toBe("function_call");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toBeUndefined();
    expect(choice.message.function_call?.name).toBe("get_weather");
    expect(Object.keys(JSON.parse(choice.message.function_call!.arguments) as object)).toEqual(["city"]);

    const streamed = await test.app.handle(test.post("/v1/chat/completions", { ...request, stream: true }));
    const chunks = sseEvents(await streamed.text())
      .slice(0, -1)
      .map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)));
    expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.function_call?.arguments ?? "").join("")).toBe(
      choice.message.function_call!.arguments,
    );
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("function_call");

    // The next turn: the assistant's function_call and the function's answer, in the old roles.
    const followUp = await test.app.handle(
      test.post("/v1/chat/completions", {
        model,
        max_tokens: 5,
        functions: [weather],
        function_call: "none",
        messages: [
          ...request.messages,
          { role: "assistant", content: null, function_call: choice.message.function_call },
          { role: "function", name: "get_weather", content: '{"temperature": 21}' },
        ],
      }),
    );
    expect(followUp.status).toBe(200);
    expect(chatCompletionSchema.parse(await followUp.json()).choices[0]?.finish_reason).toMatch(/stop|length/);
    // The same history, without the deprecated fields (or with tools): taken, as the hosted API takes it.
    const history = [
      ...request.messages,
      { role: "assistant", content: null, function_call: choice.message.function_call },
      { role: "function", name: "get_weather", content: '{"temperature": 21}' },
    ];
    for (const extra of [{}, { tools: [{ type: "function", function: weather }] }]) {
      const later = await test.app.handle(
        test.post("/v1/chat/completions", { model, max_tokens: 5, messages: history, ...extra }),
      );
      expect(later.status).toBe(200);
      expect(chatCompletionSchema.parse(await later.json()).choices[0]?.message.function_call).toBeUndefined();
    }
    const orphan = await refusal(test, "/v1/chat/completions", {
      model,
      functions: [weather],
      messages: [
        { role: "user", content: "Hi" },
        { role: "function", name: "get_weather", content: "{}" },
      ],
    });
    expect(orphan).toMatchObject({ status: 400, param: "messages[1]" });
    expect(
      (await refusal(test, "/v1/chat/completions", { ...request, tools: [{ type: "function", function: weather }] }))
        .param,
    ).toBe("functions");
    // Refusals name what the client sent, not the tools its functions became.
    expect(await refusal(test, "/v1/chat/completions", { ...request, functions: [] })).toMatchObject({
      param: "functions",
      code: "empty_array",
    });
    const badName = await refusal(test, "/v1/chat/completions", { ...request, functions: [{ name: "get weather" }] });
    expect([badName.param, badName.message]).toEqual([
      "functions[0].name",
      "Invalid 'functions[0].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
    ]);
    const unknown = await refusal(test, "/v1/chat/completions", { ...request, function_call: { name: "missing" } });
    expect([unknown.param, unknown.message]).toEqual([
      "function_call.name",
      "Invalid value for 'function_call': no function named 'missing' was specified in 'functions'.",
    ]);
    const badSchema = await refusal(test, "/v1/chat/completions", {
      ...request,
      functions: [
        { ...weather, parameters: { type: "object", properties: { when: { type: "string", format: "x" } } } },
      ],
    });
    expect(badSchema.param).toBe("functions[0].parameters");
  });
});

describe("logprobs, top_logprobs and logit_bias", () => {
  it("chat logprobs: one entry per generated token, the alternatives led by the token itself, the tokens spelling the reply", async () => {
    const test = await makeApp();
    const { status, body } = await chat(test, { logprobs: true, top_logprobs: 3, max_tokens: 6 });
    expect(status).toBe(200);
    const parsed = chatCompletionSchema.parse(body);
    const content = parsed.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(parsed.usage.completion_tokens);
    expect(content.map((entry) => entry.token).join("")).toBe(parsed.choices[0]!.message.content);
    for (const entry of content) {
      expect(entry.logprob).toBeLessThan(0);
      expect(entry.top_logprobs).toHaveLength(3);
      expect(entry.top_logprobs[0]).toEqual({ token: entry.token, logprob: entry.logprob, bytes: entry.bytes });
      expect(
        entry.top_logprobs.reduce((sum, alternative) => sum + Math.exp(alternative.logprob), 0),
      ).toBeLessThanOrEqual(1);
      expect(Buffer.from(entry.bytes!).toString("utf8")).toBe(entry.token);
    }
    // Not asked: null, as OpenAI answers.
    expect(chatCompletionSchema.parse((await chat(test, {})).body).choices[0]!.logprobs).toBeNull();
    expect(
      chatCompletionSchema.parse((await chat(test, { logprobs: true })).body).choices[0]!.logprobs!.content![0]!
        .top_logprobs,
    ).toEqual([]);
  });

  it("chat logprobs streamed: each content chunk carries the entries of the tokens it completes", async () => {
    const test = await makeApp();
    const response = await test.app.handle(
      test.post("/v1/chat/completions", {
        model,
        messages,
        max_tokens: 6,
        logprobs: true,
        top_logprobs: 1,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const chunks = sseEvents(await response.text())
      .slice(0, -1)
      .map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)));
    const withContent = chunks.filter((chunk) => chunk.choices[0]?.delta.content);
    expect(withContent.length).toBeGreaterThan(0);
    for (const chunk of withContent)
      expect(chunk.choices[0]!.logprobs!.content!.map((entry) => entry.token).join("")).toBe(
        chunk.choices[0]!.delta.content,
      );
    const entries = withContent.flatMap((chunk) => chunk.choices[0]!.logprobs!.content!);
    expect(entries).toHaveLength(chunks.at(-1)!.usage!.completion_tokens);
    expect(
      chunks
        .filter((chunk) => !chunk.choices[0]?.delta.content)
        .every((chunk) => (chunk.choices[0]?.logprobs ?? null) === null),
    ).toBe(true);
  });

  it("refuses top_logprobs without logprobs, and above the 5 alternatives the engines compute, in OpenAI's words", async () => {
    const test = await makeApp();
    expect(await refusal(test, "/v1/chat/completions", { model, messages, top_logprobs: 2 })).toMatchObject({
      status: 400,
      param: "top_logprobs",
      code: "invalid_value",
    });
    expect(
      await refusal(test, "/v1/chat/completions", { model, messages, logprobs: true, top_logprobs: 6 }),
    ).toMatchObject({
      status: 400,
      param: "top_logprobs",
      code: "integer_above_max_value",
      message: expect.stringMatching(/^Invalid 'top_logprobs': integer above maximum value. Expected a value <= 5/),
    });
    expect(
      await refusal(test, "/v1/chat/completions", { model, messages, logprobs: true, top_logprobs: 21 }),
    ).toMatchObject({ status: 400, param: "top_logprobs" });
  });

  it("legacy logprobs: the legacy lists, offsets into the text, and no echo with them", async () => {
    const test = await makeApp();
    const response = await test.app.handle(
      test.post("/v1/completions", { model, prompt: "Once upon a time", max_tokens: 5, logprobs: 2 }),
    );
    const parsed = textCompletionSchema.parse(await response.json());
    const choice = parsed.choices[0]!;
    const logprobs = choice.logprobs!;
    expect(logprobs.tokens).toHaveLength(parsed.usage!.completion_tokens);
    expect(logprobs.tokens.join("")).toBe(choice.text);
    expect(logprobs.token_logprobs).toHaveLength(logprobs.tokens.length);
    expect(logprobs.text_offset[0]).toBe(0);
    logprobs.tokens.forEach((token, index) => {
      if (index > 0)
        expect(logprobs.text_offset[index]).toBe(logprobs.text_offset[index - 1]! + logprobs.tokens[index - 1]!.length);
      expect(Object.keys(logprobs.top_logprobs[index]!)).toContain(token);
    });
    expect(await refusal(test, "/v1/completions", { model, prompt: "x", logprobs: 6 })).toMatchObject({
      status: 400,
      param: "logprobs",
    });
    expect(await refusal(test, "/v1/completions", { model, prompt: "x", logprobs: 1, echo: true })).toMatchObject({
      status: 400,
      param: "echo",
      code: "unsupported_parameter",
      message: "Setting 'echo' and 'logprobs' at the same time is not supported for this model.",
    });
    expect(await refusal(test, "/v1/completions", { model, prompt: "x", suffix: " the end." })).toMatchObject({
      status: 400,
      param: "suffix",
      code: "unsupported_parameter",
      message: "Unsupported parameter: 'suffix' is not supported with this model.",
    });
    const plain = textCompletionSchema.parse(
      await (
        await test.app.handle(test.post("/v1/completions", { model, prompt: "x", max_tokens: 2, logprobs: null }))
      ).json(),
    );
    expect(plain.choices[0]!.logprobs).toBeNull();
  });

  it("logit_bias: token ids within the vocabulary, biases within [-100, 100], passed to the engine", async () => {
    const engine = new DeterministicEngine({ tokenizers, tokenDelayMs: 0 });
    const seen: GenerationRequest[] = [];
    const generate = engine.generate.bind(engine);
    engine.generate = (request, signal) => {
      seen.push(request);
      return generate(request, signal);
    };
    const test = await makeApp({ engine });
    expect((await chat(test, { logit_bias: { "128000": -100, "9906": 5.5 } })).status).toBe(200);
    expect(seen[0]?.sampling.logitBias).toEqual({ 128000: -100, 9906: 5.5 });
    expect((await chat(test, { logit_bias: {} })).status).toBe(200);
    expect(await refusal(test, "/v1/chat/completions", { model, messages, logit_bias: { "999999": 1 } })).toMatchObject(
      {
        status: 400,
        param: "logit_bias",
        message: "Invalid key in 'logit_bias': 999999. Maximum value is 128255.",
      },
    );
    expect(await refusal(test, "/v1/chat/completions", { model, messages, logit_bias: { "1": 101 } })).toMatchObject({
      status: 400,
      param: "logit_bias.1",
    });
    expect(await refusal(test, "/v1/completions", { model, prompt: "x", logit_bias: { "-1": 1 } })).toMatchObject({
      status: 400,
    });
  });
});

/**
 * Tool calling and structured output through the official openai SDK in a page, on the
 * deterministic engine, for every catalogue model; and every grammar we generate, parsed by the
 * real xgrammar.
 */
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import { modelFamilies } from "../../src/catalogue/families.js";
import { toolGrammar } from "../../src/endpoints/chat/structured.js";
import { schemaToGrammar } from "../../src/structured/schema-grammar.js";
import type { JsonSchema } from "../../src/structured/schema.js";
import { toolSyntax, type ToolSpec } from "../../src/prompt/templates.js";
import { ToolCallParser } from "../../src/prompt/tool-calls.js";
import { tokenizerFromFiles } from "../../src/prompt/tokenizer.js";
// @ts-expect-error: a plain JavaScript build script
import { tokenizerSources } from "../../scripts/tokenizers.mjs";
import { expect, openHarness, test } from "../support/browser.js";

const ajv = new Ajv({ strict: false });
const weather: ToolSpec = {
  name: "get_weather",
  description: "Current weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { enum: ["celsius", "fahrenheit"] } },
    required: ["city", "unit"],
    additionalProperties: false,
  },
};
const tools = [{ type: "function" as const, function: weather }];
const lights: ToolSpec = {
  name: "set_lights",
  parameters: {
    type: "object",
    properties: { on: { type: "boolean" }, rooms: { type: "array", items: { enum: ["hall", "kitchen"] } } },
  },
};
const models = ["alpha3:8b-instruct-q8_0", "alpha-3-70b-instruct", "beta-2-9b-it", "gamma-7b-instruct-v0.3"];

test("every grammar we generate parses with the real xgrammar", async ({ page }) => {
  await openHarness(page);
  const grammars: Record<string, string> = {
    jsonObject: schemaToGrammar({ type: "object" }),
    recursive: schemaToGrammar({
      $defs: {
        node: { type: "object", properties: { next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } } },
      },
      $ref: "#/$defs/node",
    }),
    escapes: schemaToGrammar({ enum: ['quote " and \\ backslash', "tab\there", "é ünïcode"] }),
  };
  // Every keyword's grammar, and the grammar of every schema pydantic, zod and openai-node write.
  for (const file of ["keywords.json", "pydantic.json", "zod.json"]) {
    const schemas = JSON.parse(readFileSync(new URL(`../fixtures/schemas/${file}`, import.meta.url), "utf8")) as Record<
      string,
      JsonSchema
    >;
    for (const [name, schema] of Object.entries(schemas)) grammars[`${file}: ${name}`] = schemaToGrammar(schema);
  }
  for (const family of modelFamilies) {
    for (const choice of ["auto", "required", { name: "set_lights" }] as const) {
      grammars[`${family}-${typeof choice === "object" ? "named" : choice}`] = toolGrammar(
        family,
        [weather, lights],
        choice,
        true,
      );
    }
    // Tools beside a response_format: a call, or the format's JSON.
    grammars[`${family}-auto-json`] = toolGrammar(
      family,
      [weather, lights],
      "auto",
      true,
      weather.parameters as JsonSchema,
    );
  }
  const results = await page.evaluate(async (all) => {
    const outcome: Record<string, string> = {};
    for (const [name, ebnf] of Object.entries(all))
      outcome[name] = await window.harness.compileGrammar(ebnf).then(
        () => "ok",
        (error: Error) => error.message,
      );
    return outcome;
  }, grammars);
  expect(results).toEqual(Object.fromEntries(Object.keys(grammars).map((name) => [name, "ok"])));
});

/** The Qwen vocabulary's token strings by id, the table web-llm hands xgrammar for this model. */
function qwenVocabulary(): string[] {
  const { tokenizer } = tokenizerSources.qwen2() as {
    tokenizer: { model: { vocab: Record<string, number> }; added_tokens: { id: number; content: string }[] };
  };
  const table: string[] = [];
  for (const [token, id] of Object.entries(tokenizer.model.vocab)) table[id] = token;
  for (const { id, content } of tokenizer.added_tokens) table[id] = content;
  return Array.from(table, (token) => token ?? "");
}

test("our tool-call grammars, compiled by xgrammar for the real Qwen vocabulary, decode along any path through the token masks only to calls our parser reads and the schemas accept", async ({
  page,
}) => {
  await openHarness(page);
  // What random weights do on the real engine, many times over and without the model's minutes
  // a token: any token the mask allows, whatever its length, so the grammar meets the
  // vocabulary's every way of splitting the text. (The real-engine tier decodes one call.)
  const code: ToolSpec = {
    name: "f",
    parameters: {
      type: "object",
      properties: { code: { type: "string", pattern: "^[A-Z][1-5]$" } },
      required: ["code"],
      additionalProperties: false,
    },
  };
  const vocabulary = qwenVocabulary();
  const tokenizer = tokenizerFromFiles(tokenizerSources.qwen2());
  const stops = [151_643, 151_645];
  const seeds = Array.from({ length: 24 }, (_, index) => index + 1);
  // The longest walks seen were 43 tokens for one call and 181 for parallel ones (arrays and
  // calls repeat); a grammar that let a walk run on (a free string) fails at the bound.
  for (const { selected, parallel, maxSteps } of [
    { selected: [code], parallel: false, maxSteps: 100 },
    { selected: [code, lights], parallel: true, maxSteps: 400 },
  ]) {
    const walks = await page.evaluate(
      ({ grammar, vocabulary, stops, seeds, maxSteps }) =>
        window.harness.walkGrammar(grammar, vocabulary, 151_936, stops, seeds, maxSteps),
      { grammar: toolGrammar("qwen2", selected, "required", parallel), vocabulary, stops, seeds, maxSteps },
    );
    for (const ids of walks) {
      const text = tokenizer.decode(ids.slice(0, -1));
      expect(stops, text).toContain(ids.at(-1));
      const parser = new ToolCallParser(toolSyntax.qwen2);
      for (const id of ids.slice(0, -1)) parser.push(tokenizer.decode([id]));
      parser.end();
      const calls = parser.calls;
      expect(calls.length, text).toBeGreaterThanOrEqual(1);
      if (!parallel) expect(calls, text).toHaveLength(1);
      for (const call of calls) {
        const tool = selected.find((candidate) => candidate.name === call.name);
        expect(call.complete, text).toBe(true);
        expect(ajv.validate(tool?.parameters ?? false, JSON.parse(call.arguments)), text).toBe(true);
      }
    }
    // Different paths: the same walk every time would check one tokenization only.
    expect(new Set(walks.map((ids) => ids.join())).size).toBeGreaterThan(seeds.length / 2);
  }
});

test("tool calls for every catalogue model through the SDK: created, streamed, and assembled by the stream helper", async ({
  page,
}) => {
  await openHarness(page);
  const results = await page.evaluate(
    async ({ ids, toolList }) => {
      const client = window.harness.client();
      const out = [];
      for (const model of ids) {
        const messages = [{ role: "user" as const, content: "Weather in Oslo, please." }];
        const created = await client.chat.completions.create({
          model,
          messages,
          tools: toolList,
          tool_choice: "required",
        });
        const stream = await client.chat.completions.create({
          model,
          messages,
          tools: toolList,
          tool_choice: "required",
          stream: true,
        });
        const streamed: { id?: string; name?: string; arguments: string }[] = [];
        for await (const chunk of stream) {
          for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
            streamed[call.index] ??= { arguments: "" };
            if (call.id) Object.assign(streamed[call.index]!, { id: call.id, name: call.function?.name });
            streamed[call.index]!.arguments += call.function?.arguments ?? "";
          }
        }
        const helper = client.chat.completions.stream({
          model,
          messages,
          tools: toolList,
          tool_choice: { type: "function", function: { name: "get_weather" } },
        });
        const done: string[] = [];
        helper.on("tool_calls.function.arguments.done", (event) => done.push(event.arguments));
        const final = await helper.finalChatCompletion();
        out.push({ model, created, streamed, final, done });
      }
      return out;
    },
    { ids: models, toolList: tools },
  );
  for (const { model, created, streamed, final, done } of results) {
    const choice = created.choices[0]!;
    expect({ model, finish: choice.finish_reason, content: choice.message.content }).toEqual({
      model,
      finish: "tool_calls",
      content: null,
    });
    const call = choice.message.tool_calls![0]! as {
      id: string;
      type: string;
      function: { name: string; arguments: string };
    };
    expect(call).toMatchObject({
      id: expect.stringMatching(/^call_/),
      type: "function",
      function: { name: "get_weather" },
    });
    expect(ajv.validate(weather.parameters, JSON.parse(call.function.arguments))).toBe(true);
    expect(streamed).toHaveLength(1);
    expect(streamed[0]).toMatchObject({ id: expect.stringMatching(/^call_/), name: "get_weather" });
    expect(JSON.parse(streamed[0]!.arguments)).toEqual(JSON.parse(call.function.arguments));
    const assembled = final.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } };
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(ajv.validate(weather.parameters, JSON.parse(assembled.function.arguments))).toBe(true);
    expect(done).toEqual([assembled.function.arguments]);
  }
});

test("a full two-turn tool loop with the SDK's runTools, and structured output that validates", async ({ page }) => {
  await openHarness(page);
  const result = await page.evaluate(async (parameters) => {
    const client = window.harness.client();
    const calls: unknown[] = [];
    const runner = client.chat.completions.runTools({
      model: "gamma-7b-instruct-v0.3",
      messages: [{ role: "user", content: "Weather in Oslo, please." }],
      tools: [
        {
          type: "function" as const,
          function: {
            name: "get_weather",
            description: "Current weather in a city",
            parameters,
            parse: (text: string) => JSON.parse(text) as Record<string, unknown>,
            function: (args: Record<string, unknown>) => {
              calls.push(args);
              return { temperature: 3, sky: "overcast" };
            },
          },
        },
      ],
    });
    const content = await runner.finalContent();
    const schema = {
      type: "object",
      properties: {
        city: { type: "string" },
        temperature: { type: "number" },
        tags: { type: "array", items: { enum: ["cold", "wet"] } },
      },
      required: ["city", "temperature", "tags"],
      additionalProperties: false,
    };
    const structured = await client.chat.completions.create({
      model: "beta-2-9b-it",
      messages: [{ role: "user", content: "Describe Oslo's weather." }],
      response_format: { type: "json_schema", json_schema: { name: "report", schema, strict: true } },
    });
    return {
      calls,
      content,
      roles: runner.messages.map((message) => message.role),
      structured: structured.choices[0]!.message.content,
      schema,
    };
  }, weather.parameters);
  expect(result.calls).toHaveLength(1);
  expect(ajv.validate(weather.parameters, result.calls[0])).toBe(true);
  expect(result.roles).toEqual(["user", "assistant", "tool", "assistant"]);
  expect(typeof result.content).toBe("string");
  expect(result.content!.length).toBeGreaterThan(0);
  expect(ajv.validate(result.schema, JSON.parse(result.structured!))).toBe(true);
});

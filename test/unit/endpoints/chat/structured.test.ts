import Ajv from "ajv";
import { describe, expect, it } from "vitest";
import { modelFamilies, type ModelFamily } from "../../../../src/catalogue/families.js";
import type { EngineMessage } from "../../../../src/prompt/messages.js";
import { toolGrammar } from "../../../../src/endpoints/chat/structured.js";
import { ToolCallParser, type ToolEvent } from "../../../../src/prompt/tool-calls.js";
import { checkSchema } from "../../../../src/structured/check.js";
import { sampleSchema } from "../../../../src/structured/sample.js";
import { validate } from "../../../../src/structured/validate.js";
import { UnsupportedSchemaError, type JsonSchema } from "../../../../src/structured/schema.js";
import { schemaToGrammar } from "../../../../src/structured/schema-grammar.js";
import { renderChat, toolSyntax, type ToolSpec } from "../../../../src/prompt/templates.js";
import {
  chatCompletionChunkSchema,
  chatCompletionSchema,
  type ChatCompletionChunk,
} from "../../../../src/core/wire/chat-completion.js";
import { accepts, parseGrammar } from "../../../support/ebnf.js";
import { makeApp, sseEvents } from "../../../support/unit-app.js";

const ajv = new Ajv({ strict: false });

function seeded(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 16_807) % 2_147_483_647) / 2_147_483_647;
}

const weather: ToolSpec = {
  name: "get_weather",
  description: "Current weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { enum: ["celsius", "fahrenheit"] } },
    required: ["city"],
  },
};
const lights: ToolSpec = {
  name: "set_lights",
  parameters: { type: "object", properties: { on: { type: "boolean" }, level: { type: "integer" } }, required: ["on"] },
};

/** Every feature we claim, each in a schema of its own. */
const claimed: Record<string, JsonSchema> = {
  string: { type: "string" },
  number: { type: "number" },
  integer: { type: "integer" },
  boolean: { type: "boolean" },
  null: { type: "null" },
  typeList: { type: ["string", "null"] },
  object: {
    type: "object",
    properties: { name: { type: "string" }, age: { type: "integer" } },
    required: ["name"],
    additionalProperties: false,
  },
  emptyClosedObject: { type: "object", additionalProperties: false },
  anyObject: { type: "object" },
  array: { type: "array", items: { type: "number" } },
  anyArray: { type: "array" },
  enum: { enum: ["red", 2, true, null] },
  const: { const: { fixed: [1, "two"] } },
  anyOf: {
    anyOf: [{ type: "integer" }, { type: "object", properties: { kind: { const: "other" } }, required: ["kind"] }],
  },
  references: {
    $defs: {
      node: {
        type: "object",
        properties: { value: { type: "integer" }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } },
        required: ["value", "next"],
      },
    },
    $ref: "#/$defs/node",
  },
  definitions: {
    definitions: { tag: { type: "string", description: "a label" } },
    type: "array",
    items: { $ref: "#/definitions/tag" },
    title: "tags",
  },
  any: {},
};

describe("JSON Schema support", () => {
  it("translates every claimed feature to a grammar that accepts the schema's instances and nothing else we try", () => {
    for (const [feature, schema] of Object.entries(claimed)) {
      const grammar = schemaToGrammar(schema);
      parseGrammar(grammar);
      const validate = ajv.compile(schema as object);
      const random = seeded(feature.length * 7919);
      for (let attempt = 0; attempt < 15; attempt++) {
        const instance = sampleSchema(schema, random);
        expect({ feature, instance, valid: validate(instance) }).toEqual({ feature, instance, valid: true });
        expect({
          feature,
          text: JSON.stringify(instance),
          accepted: accepts(grammar, JSON.stringify(instance)),
        }).toMatchObject({ accepted: true });
      }
    }
    const rejects = (schema: JsonSchema, text: string) =>
      expect({ text, accepted: accepts(schemaToGrammar(schema), text) }).toEqual({ text, accepted: false });
    rejects(claimed.enum!, '"blue"');
    rejects(claimed.integer!, "1.5");
    rejects(claimed.string!, '"line\nbreak"');
    rejects(claimed.object!, '{"age":3}');
    rejects(claimed.object!, '{"name": "spaced"}');
    rejects(claimed.emptyClosedObject!, '{"x":1}');
    rejects(claimed.boolean!, "True");
    rejects(claimed.const!, '{"fixed":[1,"three"]}');
    rejects(claimed.typeList!, "3");
    expect(accepts(schemaToGrammar(claimed.string!), '"esc\\"aped \\u00e9"')).toBe(true);
    expect(accepts(schemaToGrammar(claimed.number!), "-12.5e+3")).toBe(true);
  });

  it("treats `__proto__` and `constructor` as ordinary property names", () => {
    // Parsed, as a request's schema is: a literal `__proto__` key would set the prototype instead.
    const schema = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"integer"}},' +
        '"required":["__proto__","constructor"],"additionalProperties":false}',
    ) as JsonSchema;
    const grammar = schemaToGrammar(schema);
    const random = seeded(17);
    for (let attempt = 0; attempt < 5; attempt++) {
      const text = JSON.stringify(sampleSchema(schema, random));
      const instance = JSON.parse(text) as object;
      // Our own checker: Ajv's generated code reads `__proto__` through the prototype.
      expect({
        text,
        keys: Object.keys(instance),
        violation: validate(schema, instance),
        accepted: accepts(grammar, text),
      }).toEqual({ text, keys: ["__proto__", "constructor"], violation: null, accepted: true });
    }
  });

  it("reads a oneOf as anyOf only where no value matches two branches", () => {
    const tagged = (name: string, value: unknown) => ({
      type: "object",
      properties: { [name]: { const: value } },
      required: [name],
    });
    const told: JsonSchema[][] = [
      [{ type: "string" }, { type: "integer" }, { type: "null" }],
      [{ enum: ["a", "b"] }, { enum: ["c"] }, { const: 1 }],
      [{ type: "string" }, { const: 1 }],
      [tagged("kind", "cat"), tagged("kind", "dog"), { type: "string" }],
      [{ type: "object", properties: { kind: { enum: ["a", "b"] } }, required: ["kind"] }, tagged("kind", "c")],
      // No one property tells all three apart, but each pair has one.
      [
        { type: "object", properties: { x: { const: 1 }, y: { const: 1 } }, required: ["x", "y"] },
        { type: "object", properties: { x: { const: 2 }, z: { const: 1 } }, required: ["x", "z"] },
        { type: "object", properties: { y: { const: 2 }, z: { const: 2 } }, required: ["y", "z"] },
      ],
    ];
    for (const branches of told) expect(() => checkSchema({ oneOf: branches }), JSON.stringify(branches)).not.toThrow();
    const overlapping: [JsonSchema[], string][] = [
      [[{ enum: ["a", "b"] }, { const: "c" }, { enum: ["d", "b"] }], "0 and 2"],
      [[{ type: "string" }, { type: "integer" }, { const: "a" }], "0 and 2"],
      [[{ type: "integer" }, { type: "number" }], "0 and 1"],
      [[tagged("kind", "cat"), tagged("kind", "dog"), tagged("kind", "cat")], "0 and 2"],
      [[tagged("kind", "cat"), { type: "object" }], "0 and 1"],
      [[{ type: "object" }, { enum: [{}] }], "0 and 1"],
    ];
    for (const [branches, pair] of overlapping)
      expect(() => checkSchema({ oneOf: branches }), JSON.stringify(branches)).toThrow(
        `'oneOf' branches ${pair} can match the same value`,
      );
    const many = Array.from({ length: 65 }, (_, index) => tagged(index % 2 ? "x" : "y", index));
    expect(() => checkSchema({ oneOf: many })).toThrow(
      "'oneOf' has 65 object branches and no required property whose fixed values differ in each",
    );
    expect(() => checkSchema({ oneOf: many.slice(0, 64) })).toThrow("'oneOf' branches 0 and 1 can match");
  });

  it("refuses what it cannot honour, naming the keyword and where it is", () => {
    const cases: [JsonSchema, RegExp, string][] = [
      [{ oneOf: [{ type: "string" }, { type: "string" }] }, /'oneOf' branches 0 and 1 can match/, "/oneOf"],
      [{ allOf: [] }, /'allOf'/, "/allOf"],
      [{ not: {} }, /'not'/, "/not"],
      [{ type: "string", pattern: "^(?=a)" }, /lookahead/, "/pattern"],
      [{ type: "string", format: "color" }, /format/, "/format"],
      [{ type: "number", maximum: "3" }, /'maximum'/, "/maximum"],
      [{ type: "integer", multipleOf: 0 }, /'multipleOf'/, "/multipleOf"],
      [{ type: "array", minItems: 1.5 }, /'minItems'/, "/minItems"],
      [
        { type: "object", properties: { a: { type: "string", maxLength: -4 } } },
        /'maxLength'/,
        "/properties/a/maxLength",
      ],
      [{ type: "object", additionalProperties: { type: "text" } }, /unknown type/, "/additionalProperties/type"],
      [{ type: "object", patternProperties: {} }, /'patternProperties'/, "/patternProperties"],
      [{ type: "object", properties: {}, required: ["ghost"] }, /"ghost" is not declared/, "/required"],
      [{ $ref: "#/$defs/missing" }, /does not point/, "/$ref"],
      [{ type: "text" }, /unknown type/, "/type"],
      [false, /admits no value/, ""],
    ];
    for (const [schema, message, pointer] of cases) {
      try {
        checkSchema(schema);
        throw new Error(`accepted ${JSON.stringify(schema)}`);
      } catch (error) {
        expect(error).toBeInstanceOf(UnsupportedSchemaError);
        expect((error as Error).message).toMatch(message);
        expect((error as UnsupportedSchemaError).pointer).toBe(pointer);
      }
    }
  });
});

/** Llama, Mistral and Qwen tool prompts are checked against their official templates in template-goldens.test.ts. */
describe("tool prompts where no official template defines them", () => {
  const history: EngineMessage[] = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Oslo?" },
    {
      role: "assistant",
      content: "",
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
    },
    { role: "tool", content: '{"temp":3}', toolCallId: "call_1" },
  ];
  const definition = JSON.stringify({ type: "function", function: weather }, null, 4);

  it("Gemma 2: definitions folded into the first user turn, calls in a tool_call block, in Python's JSON spacing", () => {
    expect(renderChat("gemma2", history, [weather])).toBe(
      "<bos><start_of_turn>user\nBe brief.\n\nYou have access to the following functions. To call one or more of them, reply with only a ```tool_call block holding " +
        '{"name": function name, "arguments": an object of its arguments}, or a list of such objects.\n\n' +
        `${definition}\n\nWeather in Oslo?<end_of_turn>\n` +
        '<start_of_turn>model\n```tool_call\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```<end_of_turn>\n' +
        '<start_of_turn>user\n```tool_result\n{"call_id": "call_1", "content": "{\\"temp\\":3}"}\n```<end_of_turn>\n<start_of_turn>model\n',
    );
  });

  it("Llama: parallel calls (Llama 3.1 allows one per turn) as a JSON list", () => {
    const calls: EngineMessage = {
      role: "assistant",
      content: "",
      toolCalls: [
        { id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { id: "call_2", name: "get_weather", arguments: '{"city":"Rome"}' },
      ],
    };
    expect(renderChat("llama3", [history[1]!, calls], [weather])).toContain(
      '<|start_header_id|>assistant<|end_header_id|>\n\n[{"name": "get_weather", "parameters": {"city": "Oslo"}}, {"name": "get_weather", "parameters": {"city": "Rome"}}]<|eot_id|>',
    );
  });
});

describe("tool grammars", () => {
  for (const family of modelFamilies) {
    it(`${family}: required, named and auto choices constrain calls to valid arguments`, () => {
      const syntax = toolSyntax[family];
      const one = syntax.write([{ name: "get_weather", arguments: { city: "Oslo", unit: "celsius" } }]);
      const two = syntax.write([
        { name: "get_weather", arguments: { city: "Oslo", unit: "fahrenheit" } },
        { name: "set_lights", arguments: { on: true, level: 3 } },
      ]);
      const required = toolGrammar(family, [weather, lights], "required", true);
      expect(accepts(required, one)).toBe(true);
      expect(accepts(required, two)).toBe(true);
      expect(accepts(required, "It is sunny.")).toBe(false);
      expect(
        accepts(required, syntax.write([{ name: "get_weather", arguments: { city: "Oslo", unit: "kelvin" } }])),
      ).toBe(false);
      expect(accepts(required, syntax.write([{ name: "launch", arguments: {} }]))).toBe(false);
      expect(accepts(toolGrammar(family, [weather, lights], "required", false), two)).toBe(false);
      const named = toolGrammar(family, [weather, lights], { name: "set_lights" }, true);
      expect(accepts(named, syntax.write([{ name: "set_lights", arguments: { on: false, level: 0 } }]))).toBe(true);
      expect(accepts(named, one)).toBe(false);
      // The official templates show calls in Python's spacing; compact JSON is allowed too.
      expect(one).toContain('{"name": "get_weather", ');
      expect(accepts(required, one.replace(/([,:]) /g, "$1"))).toBe(true);
      expect(accepts(required, two.replace(/([,:]) /g, "$1"))).toBe(true);
      expect(accepts(required, one.replace(/([,:]) /g, "$1  "))).toBe(false);
      const auto = toolGrammar(family, [weather, lights], "auto", true);
      expect(accepts(auto, one)).toBe(true);
      expect(accepts(auto, "It is sunny in Oslo.")).toBe(true);
      // With a response_format: a call, or the format's JSON, and no other text.
      const answer = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
      const formatted = toolGrammar(family, [weather, lights], "auto", true, answer);
      expect(accepts(formatted, one)).toBe(true);
      expect(accepts(formatted, '{"city":"Oslo"}')).toBe(true);
      expect(accepts(formatted, '{"town":"Oslo"}')).toBe(false);
      expect(accepts(formatted, "It is sunny in Oslo.")).toBe(false);
    });
  }

  it("Llama's calls are JSON: beside a JSON reply, only a call's own opening says it is one", () => {
    const syntax = toolSyntax.llama3;
    const openers = syntax.openersBeside!([weather, lights]);
    const read = (text: string) => {
      const parser = new ToolCallParser({ ...syntax, openers });
      const events = [...text].flatMap((character) => parser.push(character));
      return { mode: (events.push(...parser.end()), parser.mode), calls: parser.calls.map((call) => call.name) };
    };
    const call = syntax.write([{ name: "get_weather", arguments: { city: "Oslo" } }]);
    expect(read(call)).toEqual({ mode: "calls", calls: ["get_weather"] });
    expect(read(call.replace(/([,:]) /g, "$1"))).toEqual({ mode: "calls", calls: ["get_weather"] });
    const two = syntax.write([
      { name: "get_weather", arguments: { city: "Oslo" } },
      { name: "set_lights", arguments: { on: true } },
    ]);
    expect(read(two)).toEqual({ mode: "calls", calls: ["get_weather", "set_lights"] });
    // JSON replies, even one with a "name" first, or a list, are text.
    for (const reply of ['{"city": "Oslo"}', '{"name": "Oslo", "country": "NO"}', '[{"name": "x"}]', '"Oslo"'])
      expect(read(reply)).toEqual({ mode: "text", calls: [] });
  });
});

function feed(family: ModelFamily, text: string, pieces: number[]): { events: ToolEvent[]; parser: ToolCallParser } {
  const parser = new ToolCallParser(toolSyntax[family]);
  const events: ToolEvent[] = [];
  let position = 0;
  for (const size of pieces) {
    events.push(...parser.push(text.slice(position, position + size)));
    position += size;
  }
  events.push(...parser.push(text.slice(position)), ...parser.end());
  return { events, parser };
}

function assemble(events: ToolEvent[]) {
  const calls: { name: string; arguments: string }[] = [];
  let text = "";
  for (const event of events) {
    if (event.type === "text") text += event.text;
    else if (event.type === "call") calls[event.index] = { name: event.name, arguments: "" };
    else calls[event.index]!.arguments += event.fragment;
  }
  return { text, calls };
}

describe("tool-call parsing", () => {
  for (const family of modelFamilies) {
    it(`${family}: parallel calls, with arguments split across any chunking, and a 'name' inside arguments`, () => {
      const calls = [
        {
          name: "get_weather",
          arguments: { city: 'Rio "de" Janeiro', name: "not a call", nested: { list: [1, { name: "x" }] } },
        },
        { name: "set_lights", arguments: { on: true } },
      ];
      const text = toolSyntax[family].write(calls);
      for (const pieces of [[text.length], Array(text.length).fill(1), [3, 7, 1, 20, 2]]) {
        const { events, parser } = feed(family, text, pieces);
        expect(parser.mode).toBe("calls");
        const assembled = assemble(events);
        expect(assembled.text).toBe("");
        expect(assembled.calls.map((call) => [call.name, JSON.parse(call.arguments)])).toEqual(
          calls.map((call) => [call.name, call.arguments]),
        );
        expect(parser.calls.every((call) => call.complete)).toBe(true);
      }
    });
  }

  it("passes text through untouched, including text that only starts like a call", () => {
    const { events, parser } = feed("qwen2", "<tool the world it is sunny", [1, 2, 3]);
    expect(parser.mode).toBe("text");
    expect(assemble(events).text).toBe("<tool the world it is sunny");
    expect(assemble(feed("llama3", "  Plain words.", [1]).events).text).toBe("  Plain words.");
    const undecided = new ToolCallParser(toolSyntax.mistral);
    expect(undecided.push(" [TOOL")).toEqual([]);
    expect(undecided.mode).toBe("undecided");
    expect(undecided.end()).toEqual([{ type: "text", text: " [TOOL" }]);
  });

  it("reads a long hostile reply, a few characters at a time, in time linear in its length", () => {
    // Model output is untrusted: 200,000 characters after each family's opener (or none), in
    // 3-character pieces. Reading the whole reply again at every piece would be quadratic;
    // each piece is read once.
    const size = 200_000;
    const bodies = {
      brackets: "{".repeat(size),
      escapes: '"\\'.repeat(size / 2),
      digits: "1".repeat(size),
      blanks: " ".repeat(size),
      "calls with no end": '{"name": "f", "arguments": {"a": 1}}, '.repeat(size / 40),
      "a name never closed": `{"name": "${"n".repeat(size)}`,
      "a key never followed by a colon": `{"name": "f", ${'"parameters" '.repeat(size / 13)}`,
    };
    for (const family of modelFamilies) {
      const opener = toolSyntax[family].write([{ name: "f", arguments: { a: 1 } }]).slice(0, 20);
      for (const [shape, body] of Object.entries(bodies)) {
        for (const start of [opener, ""]) {
          const text = start + body;
          const started = performance.now();
          feed(family, text, Array(Math.ceil(text.length / 3)).fill(3));
          expect(performance.now() - started, `${family} ${shape} ${start ? "after the opener" : ""}`).toBeLessThan(
            500,
          );
        }
      }
    }
  });

  it("reports a call cut short as incomplete", () => {
    const parser = new ToolCallParser(toolSyntax.llama3);
    parser.push('{"name":"get_weather","parameters":{"city":"Os');
    expect(parser.calls).toEqual([{ name: "get_weather", arguments: '{"city":"Os', complete: false }]);
  });
});

/**
 * A stream's deltas put together as the SDKs do: the content (null until a delta carries text),
 * and each call by its index, named by its first delta only.
 */
function assembled(deltas: readonly ChatCompletionChunk["choices"][number][]) {
  let content: string | null = null;
  const calls: { name: string; arguments: string }[] = [];
  for (const { delta } of deltas) {
    if (typeof delta.content === "string") content = (content ?? "") + delta.content;
    for (const call of delta.tool_calls ?? []) {
      if (call.id) calls[call.index] = { name: call.function!.name!, arguments: "" };
      else {
        expect(call.function?.name).toBeUndefined();
        calls[call.index]!.arguments += call.function!.arguments!;
      }
    }
  }
  return { content, calls };
}

describe("over HTTP, on the deterministic engine", () => {
  const tools = [weather, lights].map((tool) => ({ type: "function", function: tool }));
  const messages = [{ role: "user", content: "What is the weather in Oslo?" }];

  it("answers a required tool call: content null, schema-valid arguments, finish_reason tool_calls", async () => {
    for (const model of ["alpha3:8b-instruct-q8_0", "beta-2-9b-it", "gamma-7b-instruct-v0.3"]) {
      const { app, post } = await makeApp();
      const response = await app.handle(
        post("/v1/chat/completions", { model, messages, tools, tool_choice: "required", parallel_tool_calls: false }),
      );
      const body = chatCompletionSchema.parse(await response.json());
      const choice = body.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.content).toBeNull();
      expect(choice.message.tool_calls).toHaveLength(1);
      const call = choice.message.tool_calls![0]!;
      expect(call.id).toMatch(/^call_/);
      const tool = [weather, lights].find((candidate) => candidate.name === call.function.name)!;
      expect(ajv.validate(tool.parameters, JSON.parse(call.function.arguments))).toBe(true);
    }
  });

  it("a reply that must be a call is not cut by a stop sequence; a text reply is", async () => {
    const { app, post } = await makeApp();
    // Every call's JSON holds `"` and `name`: a stop sequence that would cut each one.
    const stop = ['"', "name"];
    for (const model of ["alpha3:8b-instruct-q8_0", "beta-2-9b-it", "gamma-7b-instruct-v0.3"]) {
      for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
        const response = await app.handle(post("/v1/chat/completions", { model, messages, tools, tool_choice, stop }));
        const choice = chatCompletionSchema.parse(await response.json()).choices[0]!;
        expect({ model, tool_choice, finish: choice.finish_reason }).toEqual({
          model,
          tool_choice,
          finish: "tool_calls",
        });
        expect(choice.message.tool_calls?.length).toBeGreaterThan(0);
      }
    }
    const plain = { model: "alpha3:8b-instruct-q8_0", messages, max_tokens: 40 };
    const whole = chatCompletionSchema.parse(await (await app.handle(post("/v1/chat/completions", plain))).json());
    const text = whole.choices[0]!.message.content!;
    const cut = text.split(" ")[2]!;
    const stopped = await app.handle(
      post("/v1/chat/completions", { ...plain, tools, tool_choice: "none", stop: [cut] }),
    );
    const choice = chatCompletionSchema.parse(await stopped.json()).choices[0]!;
    expect([choice.message.content, choice.finish_reason]).toEqual([text.slice(0, text.indexOf(cut)), "stop"]);
  });

  it("calls the named function, two in parallel when required, and answers in text after a tool result", async () => {
    const { app, post } = await makeApp();
    const named = chatCompletionSchema.parse(
      await (
        await app.handle(
          post("/v1/chat/completions", {
            model: "gamma-7b-instruct-v0.3",
            messages,
            tools,
            tool_choice: { type: "function", function: { name: "set_lights" } },
          }),
        )
      ).json(),
    );
    expect(named.choices[0]!.message.tool_calls!.map((call) => call.function.name)).toEqual(["set_lights"]);
    const parallel = chatCompletionSchema.parse(
      await (
        await app.handle(
          post("/v1/chat/completions", { model: "gamma-7b-instruct-v0.3", messages, tools, tool_choice: "required" }),
        )
      ).json(),
    );
    expect(parallel.choices[0]!.message.tool_calls).toHaveLength(2);
    const call = parallel.choices[0]!.message.tool_calls![0]!;
    const followUp = chatCompletionSchema.parse(
      await (
        await app.handle(
          post("/v1/chat/completions", {
            model: "gamma-7b-instruct-v0.3",
            messages: [
              ...messages,
              { role: "assistant", content: null, tool_calls: [call] },
              { role: "tool", tool_call_id: call.id, content: '{"temp":3}' },
            ],
            tools,
          }),
        )
      ).json(),
    );
    expect(followUp.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: expect.any(String) } });
    expect(followUp.choices[0]!.message.tool_calls).toBeUndefined();
  });

  it("calls only the tools an allowed_tools choice lists, in its mode, and refuses one it names that is not given", async () => {
    const { app, post } = await makeApp();
    const allowedOnly = (mode: string, names: string[]) => ({
      type: "allowed_tools",
      allowed_tools: { mode, tools: names.map((name) => ({ type: "function", function: { name } })) },
    });
    for (const model of ["alpha3:8b-instruct-q8_0", "beta-2-9b-it", "gamma-7b-instruct-v0.3"]) {
      for (let attempt = 0; attempt < 4; attempt++) {
        const body = {
          model,
          messages: [{ role: "user", content: `Turn on the lights, ${attempt}` }],
          tools,
          tool_choice: allowedOnly("required", ["set_lights"]),
        };
        const response = await app.handle(post("/v1/chat/completions", body));
        const choice = chatCompletionSchema.parse(await response.json()).choices[0]!;
        expect(choice.finish_reason).toBe("tool_calls");
        expect(new Set(choice.message.tool_calls!.map((call) => call.function.name))).toEqual(new Set(["set_lights"]));
      }
    }
    const unknown = await app.handle(
      post("/v1/chat/completions", {
        model: "beta-2-9b-it",
        messages,
        tools,
        tool_choice: allowedOnly("auto", ["nope"]),
      }),
    );
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: { param: string } }).error.param).toBe(
      "tool_choice.allowed_tools.tools[0]",
    );
  });

  it("tools and a response_format together, as OpenAI's agents send them: a call, or the format's JSON after a tool result", async () => {
    const { app, post } = await makeApp();
    const report = {
      type: "object",
      properties: { city: { type: "string" }, summary: { type: "string" } },
      required: ["city", "summary"],
      additionalProperties: false,
    };
    const response_format = { type: "json_schema", json_schema: { name: "report", schema: report, strict: true } };
    for (const model of ["alpha3:8b-instruct-q8_0", "beta-2-9b-it", "gamma-7b-instruct-v0.3"]) {
      const ask = async (history: unknown[], extra: Record<string, unknown> = {}) => {
        const body = { model, messages: history, tools, response_format, ...extra };
        const response = await app.handle(post("/v1/chat/completions", body));
        expect({ model, status: response.status }).toEqual({ model, status: 200 });
        return chatCompletionSchema.parse(await response.json()).choices[0]!;
      };
      const first = await ask(messages);
      expect({ model, finish: first.finish_reason }).toEqual({ model, finish: "tool_calls" });
      const call = first.message.tool_calls![0]!;
      const history = [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: '{"temp":3}' },
      ];
      const answer = await ask(history);
      expect({ model, finish: answer.finish_reason, calls: answer.message.tool_calls }).toEqual({
        model,
        finish: "stop",
        calls: undefined,
      });
      expect(ajv.validate(report, JSON.parse(answer.message.content!))).toBe(true);
      // Streamed, the JSON arrives as content; json_object asks for any object.
      const streamed = await app.handle(
        post("/v1/chat/completions", { model, messages: history, tools, response_format, stream: true }),
      );
      const content = sseEvents(await streamed.text())
        .filter((event) => event !== "[DONE]")
        .map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)).choices[0]?.delta.content ?? "")
        .join("");
      expect(content).toBe(answer.message.content);
      const object = await ask(history, { response_format: { type: "json_object" } });
      expect(typeof JSON.parse(object.message.content!)).toBe("object");
    }
  });

  it("streams tool calls the OpenAI way: index, id, type and name first with empty arguments, then fragments", async () => {
    const { app, post } = await makeApp();
    const response = await app.handle(
      post("/v1/chat/completions", {
        model: "alpha3:8b-instruct-q8_0",
        messages,
        tools,
        tool_choice: "required",
        stream: true,
      }),
    );
    const chunks = sseEvents(await response.text())
      .filter((event) => event !== "[DONE]")
      .map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)));
    const deltas = chunks.map((chunk) => chunk.choices[0]!);
    expect(deltas[0]!.delta).toMatchObject({
      role: "assistant",
      content: null,
      tool_calls: [
        {
          index: 0,
          id: expect.stringMatching(/^call_/),
          type: "function",
          function: { name: expect.any(String), arguments: "" },
        },
      ],
    });
    const { calls } = assembled(deltas);
    expect(deltas.filter((choice) => (choice.delta.tool_calls ?? []).some((call) => !call.id)).length).toBeGreaterThan(
      1,
    );
    expect(deltas.at(-1)!.finish_reason).toBe("tool_calls");
    expect(deltas.slice(0, -1).every((choice) => choice.finish_reason === null)).toBe(true);
    for (const call of calls) {
      const tool = [weather, lights].find((candidate) => candidate.name === call.name)!;
      expect(ajv.validate(tool.parameters, JSON.parse(call.arguments))).toBe(true);
    }
  });

  it("a call cut short is a call, streamed and whole alike: before its name is read, no text and no calls", async () => {
    /** The whole reply and the streamed one, each as content, calls and finish_reason. */
    const both = async ({ app, post }: Awaited<ReturnType<typeof makeApp>>, body: Record<string, unknown>) => {
      const whole = chatCompletionSchema.parse(await (await app.handle(post("/v1/chat/completions", body))).json())
        .choices[0]!;
      const chunks = sseEvents(await (await app.handle(post("/v1/chat/completions", { ...body, stream: true }))).text())
        .filter((event) => event !== "[DONE]")
        .map((event) => chatCompletionChunkSchema.parse(JSON.parse(event)).choices[0]!);
      const calls = (whole.message.tool_calls ?? []).map(({ function: { name, arguments: text } }) => ({
        name,
        arguments: text,
      }));
      return {
        whole: { content: whole.message.content, calls, finish: whole.finish_reason },
        streamed: { ...assembled(chunks), finish: chunks.at(-1)!.finish_reason },
      };
    };
    for (const model of ["alpha3:8b-instruct-q8_0", "beta-2-9b-it", "gamma-7b-instruct-v0.3"]) {
      // A key of its own per model: 24 requests each, within one key's 60 a minute.
      const app = await makeApp();
      let nameless = 0;
      // Every cut from the opening to past the name.
      for (let maxTokens = 1; maxTokens <= 12; maxTokens++) {
        const request = { model, messages, tools, tool_choice: "required", parallel_tool_calls: false };
        const { whole, streamed } = await both(app, { ...request, max_tokens: maxTokens });
        expect(streamed, `${model}, ${maxTokens} tokens`).toEqual(whole);
        if (whole.finish === "length" && whole.calls.length === 0 && whole.content === null) nameless++;
      }
      // The syntax's opening was written, the name not yet: the model's markup is no reply text.
      expect(nameless, model).toBeGreaterThan(0);
    }
  });

  it("enforces json_schema, adds the JSON instruction, and refuses unsupported schemas and malformed tools with 400", async () => {
    const { app, post } = await makeApp();
    const schema = claimed.object as Record<string, unknown>;
    const structured = chatCompletionSchema.parse(
      await (
        await app.handle(
          post("/v1/chat/completions", {
            model: "beta-2-9b-it",
            messages,
            response_format: { type: "json_schema", json_schema: { name: "person", schema } },
          }),
        )
      ).json(),
    );
    expect(ajv.validate(schema, JSON.parse(structured.choices[0]!.message.content!))).toBe(true);
    const mode = chatCompletionSchema.parse(
      await (
        await app.handle(
          post("/v1/chat/completions", { model: "beta-2-9b-it", messages, response_format: { type: "json_object" } }),
        )
      ).json(),
    );
    expect(typeof JSON.parse(mode.choices[0]!.message.content!)).toBe("object");
    const error = async (body: unknown) => {
      const response = await app.handle(post("/v1/chat/completions", body));
      return { status: response.status, ...((await response.json()) as { error: object }).error };
    };
    expect(
      await error({
        model: "beta-2-9b-it",
        messages,
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "string", pattern: "(a)\\1" } },
        },
      }),
    ).toMatchObject({
      status: 400,
      code: "invalid_schema",
      param: "response_format.json_schema.schema",
      message: expect.stringContaining("at /pattern: 'pattern' uses the backreference '\\1'"),
    });
    expect(
      await error({
        model: "beta-2-9b-it",
        messages,
        tools: [
          {
            type: "function",
            function: { name: "f", parameters: { type: "object", properties: { a: { oneOf: [] } } } },
          },
        ],
      }),
    ).toMatchObject({
      status: 400,
      param: "tools[0].function.parameters",
    });
    expect(await error({ model: "beta-2-9b-it", messages, tools: [...tools, tools[0]] })).toMatchObject({
      status: 400,
      param: "tools[2].function.name",
    });
    expect(await error({ model: "beta-2-9b-it", messages, tools: [{ type: "function" }] })).toMatchObject({
      status: 400,
      param: "tools[0].function",
    });
  });
});

describe("strict: true, held to OpenAI's strict-mode rules and refused in its words", () => {
  const closed = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    type: "object",
    properties,
    required: Object.keys(properties),
    additionalProperties: false,
    ...extra,
  });
  const organization = closed(
    { name: { type: "string" }, roles: { type: "array", items: { type: "string" } } },
    { required: ["name"] },
  );
  const everyKey = "'required' is required to be supplied and to be an array including every key in properties.";
  const broken: [string, unknown, string][] = [
    [
      "open object",
      { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
      "In context=(), 'additionalProperties' is required to be supplied and to be false.",
    ],
    [
      "optional property, nested",
      closed({ organizations: { type: "array", items: organization } }),
      `In context=('properties', 'organizations', 'items'), ${everyKey} Missing 'roles'.`,
    ],
    [
      "extra required key",
      closed({ a: { type: "string" } }, { required: ["a", "b"] }),
      `In context=(), ${everyKey} Extra required key 'b' supplied.`,
    ],
    [
      "declared properties beside a value schema, in $defs",
      closed(
        { a: { $ref: "#/$defs/Counts" } },
        {
          $defs: {
            Counts: {
              type: "object",
              properties: { total: { type: "integer" } },
              required: ["total"],
              additionalProperties: { type: "integer" },
            },
          },
        },
      ),
      "In context=('$defs', 'Counts'), 'additionalProperties' is required to be supplied and to be false.",
    ],
    [
      "a map whose values break the rules",
      closed({ scores: { type: "object", additionalProperties: { type: "object", properties: {} } } }),
      "In context=('properties', 'scores', 'additionalProperties'), 'additionalProperties' is required to be supplied and to be false.",
    ],
    [
      "an object in an anyOf branch, named with a quote",
      closed({ "it's": { anyOf: [{ type: "null" }, { type: "object", properties: {}, additionalProperties: true }] } }),
      `In context=('properties', "it's", 'anyOf', '1'), 'additionalProperties' is required to be supplied and to be false.`,
    ],
    [
      "no properties",
      { type: "object", additionalProperties: false },
      "In context=(), object schema missing properties.",
    ],
    [
      "a property of any value",
      closed({ note: { description: "Anything." } }),
      "In context=('properties', 'note'), schema must have a 'type' key.",
    ],
    [
      "an array at the root",
      { type: "array", items: { type: "string" } },
      `schema must be a JSON Schema of 'type: "object"', got 'type: "array"'.`,
    ],
    [
      "a reference at the root",
      { $ref: "#/$defs/A", $defs: { A: closed({}) } },
      `schema must be a JSON Schema of 'type: "object"', got 'type: "None"'.`,
    ],
  ];
  const fillIn = [{ role: "user", content: "Fill it in." }];
  const cityOnly = closed({ city: { type: "string" } });

  it("a json_schema response format: chat and the Responses API refuse each broken schema; without strict it is taken", async () => {
    const { app, post } = await makeApp();
    const send = async (path: string, body: Record<string, unknown>) => {
      const response = await app.handle(post(path, { model: "alpha3:8b-instruct-q8_0", ...body }));
      return { status: response.status, ...((await response.json()) as { error?: { code?: string } }).error };
    };
    for (const [name, schema, sentence] of broken) {
      const format = (strict: boolean | undefined) => ({
        type: "json_schema",
        json_schema: { name: "report", schema, strict },
      });
      expect({
        name,
        ...(await send("/v1/chat/completions", { messages: fillIn, response_format: format(true) })),
      }).toEqual({
        name,
        status: 400,
        type: "invalid_request_error",
        code: "invalid_json_schema",
        param: "response_format.json_schema.schema",
        message: `Invalid schema for response_format 'report': ${sentence}`,
      });
      const text = { format: { type: "json_schema", name: "report", schema, strict: true } };
      expect({ name, ...(await send("/v1/responses", { input: "Fill it in.", text })) }).toMatchObject({
        name,
        status: 400,
        code: "invalid_json_schema",
        param: "text.format.schema",
        message: `Invalid schema for response_format 'report': ${sentence}`,
      });
      for (const strict of [false, undefined]) {
        const taken = await send("/v1/chat/completions", { messages: fillIn, response_format: format(strict) });
        // Required but not allowed, 'b' is a property no value has: a 400 in our words, strict or not.
        const status = name === "extra required key" ? 400 : 200;
        expect({ name, strict, status: taken.status, code: taken.code }).toEqual({
          name,
          strict,
          status,
          code: status === 400 ? "invalid_schema" : undefined,
        });
      }
    }
    const kept = await send("/v1/chat/completions", { messages: fillIn, response_format: format(cityOnly) });
    expect(kept.status).toBe(200);
    function format(schema: unknown) {
      return { type: "json_schema", json_schema: { name: "weather", schema, strict: true } };
    }
  });

  it("a map (pydantic's dict[str, int]) is taken beyond OpenAI's strict mode, enforced, and named in a header", async () => {
    const { app, post } = await makeApp();
    const schema = closed(
      { name: { type: "string" }, scores: { $ref: "#/$defs/Scores" } },
      { $defs: { Scores: { type: "object", additionalProperties: { type: "integer" } } } },
    );
    const response = await app.handle(
      post("/v1/chat/completions", {
        model: "alpha3:8b-instruct-q8_0",
        messages: fillIn,
        response_format: { type: "json_schema", json_schema: { name: "report", schema, strict: true } },
      }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("x-inference-beyond-strict")).toBe("response_format 'report' ('$defs', 'Scores')");
    const body = (await response.json()) as { choices: { message: { content: string } }[] };
    const reply = JSON.parse(body.choices[0]!.message.content) as { name: string; scores: Record<string, unknown> };
    expect(Object.keys(reply.scores).length).toBeGreaterThan(0);
    expect(Object.values(reply.scores).every(Number.isInteger)).toBe(true);
    // Held to OpenAI's rules alone, the header is absent.
    const plain = await app.handle(
      post("/v1/chat/completions", {
        model: "alpha3:8b-instruct-q8_0",
        messages: fillIn,
        response_format: { type: "json_schema", json_schema: { name: "weather", schema: cityOnly, strict: true } },
      }),
    );
    expect([plain.status, plain.headers.get("x-inference-beyond-strict")]).toEqual([200, null]);
  });

  it("strict functions: each one given is checked, in order, even one an allowed_tools choice leaves out", async () => {
    const { app, post } = await makeApp();
    const tool = (name: string, parameters: unknown, strict: boolean) => ({
      type: "function",
      function: { name, parameters, strict },
    });
    const [, schema, sentence] = broken[1]!;
    const body = {
      model: "gamma-7b-instruct-v0.3",
      messages: fillIn,
      tools: [tool("weather", cityOnly, true), tool("lenient", schema, false), tool("orgs", schema, true)],
      tool_choice: {
        type: "allowed_tools",
        allowed_tools: { mode: "required", tools: [{ type: "function", function: { name: "weather" } }] },
      },
    };
    const refused = await app.handle(post("/v1/chat/completions", body));
    expect({ status: refused.status, ...((await refused.json()) as { error: object }).error }).toEqual({
      status: 400,
      type: "invalid_request_error",
      code: "invalid_function_parameters",
      param: "tools[2].function.parameters",
      message: `Invalid schema for function 'orgs': ${sentence}`,
    });
    const taken = await app.handle(post("/v1/chat/completions", { ...body, tools: body.tools.slice(0, 2) }));
    expect(taken.status).toBe(200);
    const responses = await app.handle(
      post("/v1/responses", {
        model: "gamma-7b-instruct-v0.3",
        input: "Fill it in.",
        tools: [{ type: "function", name: "orgs", parameters: schema, strict: true }],
      }),
    );
    expect({ status: responses.status, ...((await responses.json()) as { error: object }).error }).toMatchObject({
      status: 400,
      code: "invalid_function_parameters",
      param: "tools[0].parameters",
      message: `Invalid schema for function 'orgs': ${sentence}`,
    });
  });
});

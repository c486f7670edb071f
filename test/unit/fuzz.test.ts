/**
 * Bad input is a 4xx, always, and fast: a seeded corpus of malformed requests (path escapes,
 * deep nesting, prototype names, giant bodies and prompts, unicode edge cases, wrong types and
 * values), each answered with OpenAI's error object and a request id within a time bound. Then
 * the app still serves, and nothing refused was charged.
 */
import { describe, expect, it } from "vitest";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { seededRandom } from "../../src/engines/deterministic/engine.js";
import { maxBodyBytes } from "../../src/http/validate.js";
import { errorBodySchema } from "../../src/core/wire/error.js";
import { checkLedgerInvariant, makeApp, ScriptedEngine, tokenizers, type TestApp } from "../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";

function nested(depth: number, leaf: unknown, wrap: (inner: unknown) => unknown): unknown {
  let value = leaf;
  for (let level = 0; level < depth; level++) value = wrap(value);
  return value;
}

const deepSchema = (depth: number) =>
  nested(depth, { type: "string" }, (inner) => ({ type: "object", properties: { a: inner }, required: ["a"] }));
const weirdNames = [
  "constructor",
  "__proto__",
  "toString",
  "hasOwnProperty",
  "%",
  "%zz",
  "~2",
  "",
  "\u0000",
  "\ud800",
  "👩‍👩‍👧",
  "a/b",
];
const weirdStrings = ["\ud800", "\udfff", "\u0000", "\u202e", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u0301", "\uffff", "a".repeat(300)];

/** Values each parameter refuses. */
const outOfRange: Record<string, unknown[]> = {
  temperature: [-1, 2.5, "1", 1e9],
  top_p: [-0.1, 1.5, "0.5"],
  presence_penalty: [-3, 2.5, "0"],
  n: [0, -1, 1.5, "2"],
  max_tokens: [0, -1, 1.5, "3", 1e9],
  stop: [5, [1, 2], ["a", "b", "c", "d", "e"]],
};

type Case = { name: string; request: (app: TestApp) => Request };

/** One malformed request of a class chosen by `random`. */
function malformed(random: () => number, index: number): Case {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const schemaWith = (schema: unknown) => ({
    model,
    messages: [{ role: "user", content: "Hi" }],
    response_format: { type: "json_schema", json_schema: { name: "s", schema } },
  });
  const toolWith = (parameters: unknown) => ({
    model,
    messages: [{ role: "user", content: "Hi" }],
    tools: [{ type: "function", function: { name: "f", parameters } }],
  });
  const classes: (() => Case)[] = [
    () => ({
      name: "path escape",
      request: (app) => app.get(`/v1/models/${pick(["%", "%zz", "%E0%A4%A", "a%", "%%", "%ud800"])}`),
    }),
    () => ({
      name: "deep schema",
      request: (app) => app.post("/v1/chat/completions", schemaWith(deepSchema(33 + Math.floor(random() * 1000)))),
    }),
    () => ({
      name: "deep tool parameters",
      request: (app) => app.post("/v1/chat/completions", toolWith(deepSchema(33 + Math.floor(random() * 1000)))),
    }),
    () => ({
      name: "prototype $ref",
      request: (app) =>
        app.post(
          "/v1/chat/completions",
          schemaWith({
            $defs: { a: { type: "string" } },
            type: "object",
            properties: { x: { $ref: `#/$defs/${pick(weirdNames)}` } },
          }),
        ),
    }),
    () => ({
      name: "prototype required",
      request: (app) =>
        app.post("/v1/chat/completions", toolWith({ type: "object", properties: {}, required: [pick(weirdNames)] })),
    }),
    () => ({
      name: "prototype keyword",
      request: (app) =>
        app.post(
          "/v1/chat/completions",
          `{"model":"${model}","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"__proto__":{"type":"string"},"type":"object"}}}}`,
        ),
    }),
    () => ({
      name: "malformed JSON",
      request: (app) =>
        app.post(
          "/v1/chat/completions",
          pick([
            "{",
            "[]",
            "null",
            '"x"',
            '{"model":',
            "{'a':1}",
            "\u0000",
            '{"a":1}}',
            nested(2000, "", (inner) => `[${String(inner)}]`) as string,
          ]),
        ),
    }),
    () => ({
      name: "deeply nested value",
      request: (app) => {
        const depth = 10_000 + Math.floor(random() * 200_000);
        const value = pick([
          `${"[".repeat(depth)}${"]".repeat(depth)}`,
          `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`,
        ]);
        const field = pick([
          `"stop":${value}`,
          `"prediction":{"type":"content","content":${value}}`,
          `"messages":[{"role":"user","content":${value}}]`,
        ]);
        const messages = field.startsWith('"messages"') ? "" : `"messages":[{"role":"user","content":"Hi"}],`;
        return app.post("/v1/chat/completions", `{"model":"${model}",${messages}${field}}`);
      },
    }),
    () => ({
      name: "deeply nested annotation",
      request: (app) => {
        const depth = 10_000 + Math.floor(random() * 200_000);
        const value = `${"[".repeat(depth)}${"]".repeat(depth)}`;
        const keyword = pick(["examples", "default", "const", "description", "x-note"]);
        const schema = `{"type":"object","properties":{"v":{"type":"array","${keyword}":${value}}}}`;
        return app.post(
          "/v1/chat/completions",
          pick([
            `{"model":"${model}","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${schema}}}]}`,
            `{"model":"${model}","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${schema}}}}`,
          ]),
        );
      },
    }),
    () => ({
      name: "giant body",
      request: (app) => app.post("/v1/completions", { model, prompt: "a".repeat(maxBodyBytes + 1) }),
    }),
    () => ({
      name: "giant prompt",
      request: (app) =>
        app.post("/v1/completions", {
          model,
          prompt: pick(["word ", "a", "🙂", "\u00e9 "]).repeat(300_000 + Math.floor(random() * 100_000)),
        }),
    }),
    () => ({
      name: "giant messages",
      request: (app) =>
        app.post("/v1/chat/completions", {
          model,
          messages: [{ role: "user", content: "lorem ipsum ".repeat(150_000) }],
        }),
    }),
    () => ({
      name: "wrong type",
      request: (app) =>
        app.post("/v1/chat/completions", {
          model,
          messages: pick([
            null,
            1,
            "Hi",
            [{}],
            [{ role: pick(["user", "bot", 3]) }],
            [{ role: "user", content: { text: 1 } }],
          ]),
        }),
    }),
    () => {
      const [parameter, values] = pick(Object.entries(outOfRange));
      return {
        name: "out of range",
        request: (app) =>
          app.post("/v1/chat/completions", {
            model,
            messages: [{ role: "user", content: pick(weirdStrings) }],
            [parameter]: pick(values),
          }),
      };
    },
    () => ({
      name: "unknown parameter",
      request: (app) =>
        app.post("/v1/chat/completions", {
          model,
          messages: [{ role: "user", content: "Hi" }],
          [pick(weirdNames.filter(Boolean))]: 1,
        }),
    }),
    () => ({
      name: "unknown model",
      request: (app) =>
        app.post("/v1/chat/completions", { model: pick(weirdStrings), messages: [{ role: "user", content: "Hi" }] }),
    }),
    () => ({
      name: "unknown url",
      request: (app) => app.get(`/v1/${pick(["engines", "models/x/y", "chat", "%2e%2e/admin", "fine_tuning/jobs"])}`),
    }),
  ];
  const made = classes[index % classes.length]!();
  return made;
}

describe("malformed requests", () => {
  it("a seeded corpus of 1,050: each a 4xx with the error object and a request id, within a time bound; the app still serves; nothing is charged", async () => {
    const test = await makeApp({ rpm: 1_000_000, tpm: 1_000_000_000 });
    // The first request loads the model's tokenizer (about a second on a slow machine). It is
    // made before the corpus so the bound below is on answering bad input, not on a cold start.
    const warm = await test.app.handle(
      test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hello" }], max_tokens: 1 }),
    );
    expect(warm.status).toBe(200);
    const random = seededRandom(20261123);
    const slowest = { name: "", ms: 0 };
    const classes = new Map<string, number>();
    for (let index = 0; index < 1_050; index++) {
      const { name, request } = malformed(random, index);
      // Built before the clock starts: the bound is on the app's answer, not on the test making a giant body.
      const built = request(test);
      const started = performance.now();
      const response = await test.app.handle(built);
      const elapsed = performance.now() - started;
      const body = (await response.json()) as unknown;
      const context = `${name} #${index}: ${response.status} ${JSON.stringify(body).slice(0, 300)}`;
      expect(response.status, context).toBeGreaterThanOrEqual(400);
      expect(response.status, context).toBeLessThan(500);
      expect(errorBodySchema.safeParse(body).success, context).toBe(true);
      expect(response.headers.get("x-request-id"), context).toMatch(/^req_/);
      if (elapsed > slowest.ms) Object.assign(slowest, { name: context.slice(0, 80), ms: elapsed });
      classes.set(name, (classes.get(name) ?? 0) + 1);
    }
    // Generous for a noisy 2-core machine; a whole-prompt tokenization of the giant prompts takes seconds,
    // where counting in pieces refuses them in milliseconds.
    expect(slowest.ms, `slowest: ${slowest.name}`).toBeLessThan(1_500);
    expect(classes.size).toBe(17);

    const fine = await test.app.handle(
      test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hello" }], max_tokens: 3 }),
    );
    expect(fine.status).toBe(200);
    expect(((await fine.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
    const charges = (await test.database.getAll("ledger")).filter((entry) => entry.kind === "charge");
    // The warm-up's and this one's: none for the corpus.
    expect(charges).toHaveLength(2);
    await checkLedgerInvariant(test.database);
  }, 300_000);

  it("names what is wrong: a path escape, a deep schema, a prototype name, a body too large, a prompt too long", async () => {
    const test = await makeApp();
    const error = async (request: Request) => {
      const response = await test.app.handle(request);
      return { status: response.status, ...errorBodySchema.parse(await response.json()).error };
    };
    expect(await error(test.get("/v1/models/%"))).toMatchObject({ status: 400, code: "invalid_value" });
    const deep = await error(
      test.post("/v1/chat/completions", {
        model,
        messages: [{ role: "user", content: "Hi" }],
        response_format: { type: "json_schema", json_schema: { name: "s", schema: deepSchema(100) } },
      }),
    );
    expect(deep).toMatchObject({ status: 400, code: "invalid_schema" });
    expect(deep.message).toContain("nests deeper than 32 levels");
    // Deeper than any schema we take, anywhere in the body (an annotation too): refused as it is read.
    const deeper = await error(
      test.post("/v1/chat/completions", {
        model,
        messages: [{ role: "user", content: "Hi" }],
        tools: [
          { type: "function", function: { name: "f", parameters: { type: "object", examples: deepSchema(200) } } },
        ],
      }),
    );
    expect(deeper).toMatchObject({ status: 400, code: "invalid_json" });
    expect(deeper.message).toContain("nest deeper than 256 levels");
    const required = await error(
      test.post("/v1/chat/completions", {
        model,
        messages: [{ role: "user", content: "Hi" }],
        tools: [
          {
            type: "function",
            function: { name: "f", parameters: { type: "object", properties: {}, required: ["constructor"] } },
          },
        ],
      }),
    );
    expect(required).toMatchObject({ status: 400, code: "invalid_schema" });
    const proto = await error(
      test.post(
        "/v1/chat/completions",
        `{"model":"${model}","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","__proto__":{}}}}]}`,
      ),
    );
    expect(proto.message).toContain("'__proto__' is not supported");
    const reference = await error(
      test.post("/v1/chat/completions", {
        model,
        messages: [{ role: "user", content: "Hi" }],
        response_format: {
          type: "json_schema",
          json_schema: { name: "s", schema: { $defs: {}, $ref: "#/$defs/constructor" } },
        },
      }),
    );
    expect(reference).toMatchObject({ status: 400, code: "invalid_schema" });
    const large = await error(test.post("/v1/completions", { model, prompt: "a".repeat(maxBodyBytes) }));
    expect(large).toMatchObject({ status: 413, code: "request_too_large", type: "invalid_request_error" });
    const giant = test.post("/v1/completions", { model, prompt: "word ".repeat(1_500_000) });
    const started = performance.now();
    const long = await error(giant);
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(long).toMatchObject({ status: 400, code: "context_length_exceeded", param: "prompt" });
    expect(long.message).toMatch(
      /maximum context length is 8192 tokens\. However, your prompt resulted in at least \d+ tokens/,
    );
  }, 60_000);
});

/**
 * Adversarial shapes in every text field, on every family: each answered (a 2xx or a 4xx, never
 * a 5xx) within `answerBound`, and meanwhile another tab's requests keep being answered within
 * the same bound. The worker is one thread: a request that blocked it would hold them all.
 */
/**
 * Another tab: a request every few milliseconds, each timed from sending to its answer, until
 * `slowest()` stops it and gives the longest wait. The worker is one thread: a request that
 * blocked it would hold these too.
 */
/**
 * Requests from elsewhere while a test runs, timed: another tab's model list, or (`chat`)
 * another account's two-token chat, which needs the engine.
 */
function anotherTab(test: TestApp, chat?: { key: string }) {
  let probing = true;
  let slowest = 0;
  const request = () =>
    chat
      ? new Request(test.get("/v1/chat/completions").url, {
          method: "POST",
          headers: { authorization: `Bearer ${chat.key}`, "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }),
        })
      : test.get("/v1/models");
  const probe = (async () => {
    while (probing) {
      const started = performance.now();
      const response = await test.app.handle(request());
      if (!response.ok) throw new Error(`the other ${chat ? "account" : "tab"} got ${response.status}`);
      slowest = Math.max(slowest, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return {
    async slowest(): Promise<number> {
      probing = false;
      await probe;
      return slowest;
    },
  };
}

/**
 * Schemas whose size explodes once expanded: quantifiers that multiply, groups nested deep,
 * `$ref`s that fan out or chain. A short request must not hold the worker: each is refused by
 * name or answered, within the bound, as a response_format and as a tool's parameters.
 */
describe("adversarial schemas: expansion is bounded", () => {
  const answerBound = 2_000;
  const fan = (levels: number, required: boolean) => ({
    $defs: Object.fromEntries(
      Array.from({ length: levels + 1 }, (_, level) => [
        `d${level}`,
        level === levels
          ? { type: "string" }
          : {
              type: "object",
              properties: { a: { $ref: `#/$defs/d${level + 1}` }, b: { $ref: `#/$defs/d${level + 1}` } },
              ...(required ? { required: ["a", "b"] } : {}),
            },
      ]),
    ),
    type: "object",
    properties: { v: { $ref: "#/$defs/d0" } },
    required: ["v"],
  });
  const chain = (links: number) => ({
    $defs: Object.fromEntries(
      Array.from({ length: links + 1 }, (_, link) => [
        `d${link}`,
        link === links ? { type: "string" } : { $ref: `#/$defs/d${link + 1}` },
      ]),
    ),
    type: "object",
    properties: { v: { $ref: "#/$defs/d0" } },
    required: ["v"],
  });
  const withPattern = (pattern: string) => ({
    type: "object",
    properties: { v: { type: "string", pattern } },
    required: ["v"],
  });
  const oneOf = (branches: unknown[]) => ({
    type: "object",
    properties: { v: { oneOf: branches } },
    required: ["v"],
  });
  const tagged = (tag: number) => ({
    type: "object",
    properties: { kind: { const: tag } },
    required: ["kind"],
  });
  // Two enums that share only their last value (compared pair by pair: 225 million comparisons).
  const listed = (prefix: string) => [...Array.from({ length: 15_000 }, (_, index) => `${prefix}${index}`), "both"];
  // Branches told apart by one property, but for the last two (compared pair by pair: 4.5 million pairs).
  const tags = Array.from({ length: 3_000 }, (_, index) => tagged(index === 2_999 ? 2_998 : index));
  /**
   * Each schema, and what answers it: a refusal naming the limit, or a reply. Every instance of
   * the required fan-out is 2^40 strings long, so its reply is cut at max_tokens; the optional
   * one has a short instance, which is written whole.
   */
  const cases: Record<string, { schema: unknown; refused?: RegExp; finish?: "length" | "stop" | "either" }> = {
    "quantifiers that multiply": { schema: withPattern("^((((a{100}){100}){100}){100})$"), refused: /spell out/ },
    // Ambiguous as written: llama.cpp's matcher kept a parse per way to split the a's, and froze.
    "nested quantified optionals": {
      schema: withPattern("^(a?){8}((((((((a?){2}){2}){2}){2}){2}){2}){2}){2}a{100}$"),
      finish: "either",
    },
    "optionals under stars": { schema: withPattern("^((a?b?)*c?)*d$"), finish: "either" },
    "optionals in alternations, unanchored": { schema: withPattern("((a|a?)(a?|a)){16}b"), finish: "either" },
    "a pattern whose deterministic automaton explodes": {
      schema: withPattern("^(a|b)*a(a|b){15}$"),
      refused: /more than 4000 states once made deterministic/,
    },
    "stars in stars": { schema: withPattern(`^${"(".repeat(12)}a*${")*".repeat(12)}$`), refused: /spell out/ },
    "groups nested deep": {
      schema: withPattern(`${"(".repeat(10_000)}a${")".repeat(10_000)}`),
      refused: /nested deeper/,
    },
    "a $ref chain": { schema: chain(500), refused: /chains run through more than 64 definitions/ },
    "a oneOf of two long enums that share a value": {
      schema: oneOf([
        { type: "string", enum: listed("a") },
        { type: "string", enum: listed("b") },
      ]),
      refused: /'oneOf' branches 0 and 1 can match the same value/,
    },
    "a oneOf of 3,000 object branches, two with one tag": {
      schema: oneOf(tags),
      refused: /'oneOf' has 3000 object branches and no required property whose fixed values differ in each/,
    },
    "$refs fanning out, required": { schema: fan(40, true), finish: "length" },
    "$refs fanning out, optional": { schema: fan(40, false), finish: "stop" },
    // 65,536 copies of an 8,300-character list: past the longest string JavaScript can hold.
    "a listed const repeated by the arrays around it": {
      schema: {
        type: "object",
        properties: {
          v: {
            type: "array",
            minItems: 256,
            maxItems: 256,
            items: { type: "array", minItems: 256, maxItems: 256, items: { const: ["x".repeat(8_300)] } },
          },
        },
        required: ["v"],
      },
      finish: "length",
    },
  };

  it(`each is refused by name or answered within ${answerBound} ms, and another account is served meanwhile`, async () => {
    const test = await makeApp({ rpm: 1_000_000, tpm: 1_000_000_000, creditUsd: 1_000 });
    const other = await test.admin.createAccount({ name: "other", creditUsd: 10 });
    const otherTab = anotherTab(test, await test.admin.createKey({ accountId: other.id, rpm: 1_000_000 }));
    for (const [name, { schema, refused, finish }] of Object.entries(cases)) {
      const bodies = {
        response_format: { response_format: { type: "json_schema", json_schema: { name: "s", schema } } },
        tool: {
          tools: [{ type: "function", function: { name: "f", parameters: schema } }],
          tool_choice: "required",
        },
      };
      for (const [where, extra] of Object.entries(bodies)) {
        const label = `${name} as ${where}`;
        const started = performance.now();
        const response = await test.app.handle(
          test.post("/v1/chat/completions", {
            model,
            messages: [{ role: "user", content: "Hi" }],
            max_tokens: 64,
            ...extra,
          }),
        );
        const body = await response.json();
        expect(performance.now() - started, label).toBeLessThan(answerBound);
        if (refused) {
          expect(response.status, label).toBe(400);
          expect(body.error.code, label).toBe("invalid_schema");
          expect(body.error.message, label).toMatch(refused);
        } else {
          expect(response.status, label).toBe(200);
          const choice = body.choices[0];
          if (finish === "length") {
            expect(choice.finish_reason, label).toBe("length");
            expect(body.usage.completion_tokens, label).toBe(64);
          } else if (finish === "stop")
            expect(choice.finish_reason, label).toBe(where === "tool" ? "tool_calls" : "stop");
        }
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    }
    expect(await otherTab.slowest()).toBeLessThan(answerBound);
  }, 120_000);
});

describe("adversarial strict schemas: OpenAI's rules are checked in time linear in the schema", () => {
  const answerBound = 2_000;
  const names = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => `p${from + index}`);
  const closed = (properties: Record<string, unknown>, required: string[]) => ({
    type: "object",
    properties,
    required,
    additionalProperties: false,
  });
  const strings = (keys: string[]) => Object.fromEntries(keys.map((key) => [key, { type: "string" }]));
  const wide = names(0, 150_000);
  const branch = (open: boolean) => ({ type: "object", properties: {}, additionalProperties: open });
  const cases: Record<string, { schema: unknown; refused: RegExp }> = {
    "150,000 properties, the last not required": {
      schema: closed(strings(wide), wide.slice(0, -1)),
      refused: /In context=\(\), 'required' .* Missing 'p149999'\.$/,
    },
    "300,000 required names, half of them undeclared": {
      schema: closed(strings(wide), [...wide, ...names(150_000, 300_000)]),
      refused: /Extra required key 'p150000' supplied\.$/,
    },
    "100,000 branches, the last one open": {
      schema: closed({ v: { anyOf: Array.from({ length: 100_000 }, (_, index) => branch(index === 99_999)) } }, ["v"]),
      refused: /In context=\('properties', 'v', 'anyOf', '99999'\), 'additionalProperties'/,
    },
  };

  it(`each is refused in OpenAI's words within ${answerBound} ms, and another tab is served meanwhile`, async () => {
    const test = await makeApp({ rpm: 1_000_000, tpm: 1_000_000_000, creditUsd: 1_000 });
    const otherTab = anotherTab(test);
    for (const [name, { schema, refused }] of Object.entries(cases)) {
      const started = performance.now();
      const response = await test.app.handle(
        test.post("/v1/chat/completions", {
          model,
          messages: [{ role: "user", content: "Hi" }],
          response_format: { type: "json_schema", json_schema: { name: "s", schema, strict: true } },
        }),
      );
      const body = await response.json();
      expect(performance.now() - started, name).toBeLessThan(answerBound);
      expect([response.status, body.error.code], name).toEqual([400, "invalid_json_schema"]);
      expect(body.error.message, name).toMatch(refused);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(await otherTab.slowest()).toBeLessThan(answerBound);
  }, 60_000);
});

/**
 * Replies a model may write under a recursive schema, which a grammar lets nest without end: the
 * finished value's check must neither retry a part once per path through the branches (two
 * branches, 22 levels: 4 million tries, half a minute) nor recurse past the stack. Each is an error naming what the
 * reply breaks, within the bound, as a JSON reply and as a tool call's arguments.
 */
describe("adversarial replies: a structured reply is checked in linear time", () => {
  const answerBound = 2_000;
  // Every level may be either list; the leaf breaks `multipleOf`, which the grammar cannot see.
  const recursive = {
    $defs: {
      node: {
        anyOf: [
          { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 1 },
          { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 },
          { type: "number", multipleOf: 0.37 },
        ],
      },
    },
    type: "object",
    properties: { v: { $ref: "#/$defs/node" } },
    required: ["v"],
  };
  const deep = (levels: number, leaf: string) => `{"v":${"[".repeat(levels)}${leaf}${"]".repeat(levels)}}`;
  const cases: Record<string, { reply: string; says: string }> = {
    "every branch broken 22 levels down": { reply: deep(22, "0.5"), says: "matches none of the allowed schemas" },
    "lists nested 100,000 deep": { reply: deep(100_000, "0.74"), says: "nests deeper than 256 levels" },
  };
  let reply = "";
  const engine = new ScriptedEngine(async function* () {
    yield { type: "text-delta", text: reply };
    yield { type: "finish", reason: "stop", usage: { promptTokens: 20, completionTokens: 20 } };
  });
  const bodies = {
    "a JSON reply": {
      response_format: { type: "json_schema", json_schema: { name: "s", schema: recursive } },
      wrap: (text: string) => text,
    },
    "a tool call": {
      tools: [{ type: "function", function: { name: "f", parameters: recursive } }],
      tool_choice: "required",
      wrap: (text: string) => `{"name": "f", "parameters": ${text}}`,
    },
  };

  it(`each is an error naming the break within ${answerBound} ms, and another tab is served meanwhile`, async () => {
    const test = await makeApp({ engine });
    // The family's tokenizer loads on the first request: not part of the bound.
    await test.app.handle(test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hi" }] }));
    const otherTab = anotherTab(test);
    for (const [name, { reply: text, says }] of Object.entries(cases))
      for (const [where, { wrap, ...extra }] of Object.entries(bodies)) {
        reply = wrap(text);
        const started = performance.now();
        const response = await test.app.handle(
          test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hi" }], ...extra }),
        );
        const error = (await response.json()).error;
        expect(performance.now() - started, `${name} in ${where}`).toBeLessThan(answerBound);
        expect([response.status, error.code], `${name} in ${where}`).toEqual([500, "invalid_model_output"]);
        expect(error.message, `${name} in ${where}`).toContain(says);
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    expect(await otherTab.slowest()).toBeLessThan(answerBound);
  }, 60_000);
});

/**
 * Bodies near the 8 MiB limit that are one long list or dictionary of wrong items. zod alone
 * keeps an issue for every item, in time and memory that grow with the list; validation stops at
 * the first wrong item.
 */
describe("adversarial input: lists of wrong items", () => {
  const answerBound = 1_500;
  const ones = `${"1,".repeat(4_000_000)}1`;
  const entries = (count: number, value: string) =>
    Array.from({ length: count }, (_, index) => `"${index}":${value}`).join(",");
  const user = '{"role":"user","content":"Hi"}';
  const bodies: Record<string, [path: string, body: string, param: string]> = {
    messages: ["/v1/chat/completions", `{"model":"${model}","messages":[${ones}]}`, "messages[0]"],
    "content parts": [
      "/v1/chat/completions",
      `{"model":"${model}","messages":[{"role":"user","content":[${ones}]}]}`,
      "messages[0].content[0]",
    ],
    "tool calls": [
      "/v1/chat/completions",
      `{"model":"${model}","messages":[{"role":"assistant","tool_calls":[${ones}]}]}`,
      "messages[0].tool_calls[0]",
    ],
    "logit_bias values": [
      "/v1/chat/completions",
      `{"model":"${model}","messages":[${user}],"logit_bias":{${entries(600_000, '"x"')}}}`,
      "logit_bias",
    ],
    "metadata pairs": [
      "/v1/chat/completions",
      `{"model":"${model}","messages":[${user}],"metadata":{${entries(600_000, "1")}}}`,
      "metadata",
    ],
    "legacy prompts": ["/v1/completions", `{"model":"${model}","prompt":["a",${ones}]}`, "prompt"],
  };

  it(`each is a 400 naming the first wrong item within ${answerBound} ms, and another tab is served meanwhile`, async () => {
    const test = await makeApp();
    const otherTab = anotherTab(test);
    for (const [name, [path, body, param]] of Object.entries(bodies)) {
      expect(body.length, name).toBeLessThan(8 * 2 ** 20);
      const started = performance.now();
      const response = await test.app.handle(test.post(path, body));
      const error = (await response.json()).error;
      expect({ name, status: response.status, param: error.param }).toEqual({ name, status: 400, param });
      expect(performance.now() - started, name).toBeLessThan(answerBound);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(await otherTab.slowest()).toBeLessThan(answerBound);
  }, 120_000);
});

describe("adversarial input: linear time on every path", () => {
  const answerBound = 2_000;
  const size = 200_000;
  const shapes: Record<string, string> = {
    spaces: " ".repeat(size),
    letters: "a".repeat(size),
    newlines: "\n".repeat(size),
    alternation: "ab".repeat(size / 2),
    nested: "[".repeat(size / 2) + "]".repeat(size / 2),
    quotes: '{"a":'.repeat(size / 5),
    controls: "<|eot_id|><|im_start|>[INST]<end_of_turn>".repeat(size / 40),
    combining: "e\u0301".repeat(size / 2),
    emoji: "😀".repeat(size / 2),
    "trailing spaces": `a${" ".repeat(size)}`,
    "spaces then text": `${" ".repeat(size)}b`,
  };
  /** Up to the body limit (8 MiB): one field holds it all. */
  const giants: Record<string, string> = {
    "giant spaces": " ".repeat(8_000_000),
    "giant letters": "a".repeat(8_000_000),
    "giant newlines": "\n".repeat(4_000_000),
  };
  const tool = (description: string) => [
    {
      type: "function",
      function: { name: "f", description, parameters: { type: "object", properties: { q: { type: "string" } } } },
    },
  ];
  const fields: Record<string, (model: string, text: string) => [string, unknown]> = {
    "user content": (model, text) => [
      "/v1/chat/completions",
      { model, messages: [{ role: "user", content: text }], max_tokens: 1 },
    ],
    "system content": (model, text) => [
      "/v1/chat/completions",
      {
        model,
        messages: [
          { role: "system", content: text },
          { role: "user", content: "Hi" },
        ],
        max_tokens: 1,
      },
    ],
    "assistant content": (model, text) => [
      "/v1/chat/completions",
      {
        model,
        messages: [
          { role: "user", content: "Hi" },
          { role: "assistant", content: text },
          { role: "user", content: "Go on" },
        ],
        max_tokens: 1,
      },
    ],
    "user name": (model, text) => [
      "/v1/chat/completions",
      { model, messages: [{ role: "user", content: "Hi", name: text }], max_tokens: 1 },
    ],
    "tool description": (model, text) => [
      "/v1/chat/completions",
      { model, messages: [{ role: "user", content: "Hi" }], tools: tool(text), max_tokens: 1 },
    ],
    "tool-call arguments": (model, text) => [
      "/v1/chat/completions",
      {
        model,
        messages: [
          { role: "user", content: "Hi" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "f", arguments: JSON.stringify({ q: text }) } },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: "ok" },
        ],
        tools: tool("Looks up."),
        max_tokens: 1,
      },
    ],
    "tool result": (model, text) => [
      "/v1/chat/completions",
      {
        model,
        messages: [
          { role: "user", content: "Hi" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }],
          },
          { role: "tool", tool_call_id: "call_1", content: text },
        ],
        max_tokens: 1,
      },
    ],
    "stop sequence": (model, text) => [
      "/v1/chat/completions",
      { model, messages: [{ role: "user", content: "Hi" }], stop: [text.slice(0, 5_000)], max_tokens: 1 },
    ],
    "legacy prompt": (model, text) => ["/v1/completions", { model, prompt: text, max_tokens: 1 }],
    "responses input": (model, text) => ["/v1/responses", { model, input: text, max_output_tokens: 16 }],
    "responses instructions": (model, text) => [
      "/v1/responses",
      { model, instructions: text, input: "Hi", max_output_tokens: 16 },
    ],
    "responses call output": (model, text) => [
      "/v1/responses",
      {
        model,
        input: [
          { role: "user", content: "Hi" },
          { type: "function_call", call_id: "call_1", name: "f", arguments: "{}" },
          { type: "function_call_output", call_id: "call_1", output: text },
        ],
        max_output_tokens: 16,
      },
    ],
  };
  const families = {
    llama3: "alpha3:8b-instruct-q8_0",
    gemma2: "beta-2-9b-it",
    mistral: "gamma-7b-instruct-v0.3",
    qwen2: "qwen-test",
  };

  it(`text for an upstream is defused of control tokens in linear time: 8 MB of each near miss within ${answerBound} ms`, async () => {
    // Whole control tokens, and prefixes that match far before they fail.
    const nearMisses = ["<|eot_id|>", "<|", "<|reserved_special_token_1", "<start_of_turn", "[control_1"];
    for (const family of Object.keys(families) as (keyof typeof families)[]) {
      const tokenizer = await tokenizers.forFamily(family);
      for (const nearMiss of nearMisses) {
        const text = nearMiss.repeat(Math.ceil(8_000_000 / nearMiss.length));
        const started = performance.now();
        tokenizer.defuse(text);
        const elapsed = performance.now() - started;
        expect(elapsed, `${family} · ${nearMiss}`).toBeLessThan(answerBound);
      }
    }
  });

  it(`every shape in every field on every family is answered within ${answerBound} ms, and another tab is served meanwhile`, async () => {
    const test = await makeApp({
      rpm: 1_000_000,
      tpm: 1_000_000_000,
      creditUsd: 1_000,
      // A Qwen 2 model (no seed model is one): the seed Llama's entry under Qwen's template and tokenizer.
      models: [{ ...Catalogue.create().get("alpha3:8b-instruct-q8_0")!, id: "qwen-test", family: "qwen2" }],
    });
    for (const model of Object.values(families)) {
      const warm = await test.app.handle(
        test.post("/v1/chat/completions", {
          model,
          messages: [{ role: "user", content: `Hello ${"b".repeat(300)}` }],
          max_tokens: 1,
        }),
      );
      expect(warm.status).toBe(200);
    }
    const otherTab = anotherTab(test);
    const slowest = { name: "", ms: 0 };
    const cases = (family: string) =>
      Object.entries(shapes)
        .flatMap(([shape, text]) => Object.keys(fields).map((field) => [shape, text, field] as const))
        .concat(
          Object.entries(giants).flatMap(([shape, text]) =>
            ["user content", "legacy prompt", "responses input"].map((field) => [shape, text, field] as const),
          ),
        )
        .map(([shape, text, field]) => ({ shape, text, field, family }));
    for (const [family, model] of Object.entries(families)) {
      for (const { shape, text, field } of cases(family)) {
        {
          const build = fields[field]!;
          const [path, body] = build(model, text);
          const request = test.post(path, body);
          const started = performance.now();
          const response = await test.app.handle(request);
          await response.text();
          const elapsed = performance.now() - started;
          const name = `${family} · ${shape} · ${field}: ${response.status}`;
          expect(response.status, name).toBeLessThan(500);
          if (elapsed > slowest.ms) Object.assign(slowest, { name, ms: elapsed });
          // Let the other tab in between, as the browser's event loop would.
          await new Promise((resolve) => setTimeout(resolve, 0));
        }
      }
    }
    // Many short turns: the prompt is cut at each earlier reply for web-llm's cache.
    for (const [family, model] of Object.entries(families)) {
      for (const count of [1_500, 20_000]) {
        const messages = Array.from({ length: count }, (_, index) => ({
          role: index % 2 ? "assistant" : "user",
          content: `turn ${index}`,
        }));
        const started = performance.now();
        const response = await test.app.handle(test.post("/v1/chat/completions", { model, messages, max_tokens: 1 }));
        await response.text();
        const elapsed = performance.now() - started;
        const name = `${family} · ${count} turns: ${response.status}`;
        expect(response.status, name).toBeLessThan(500);
        if (elapsed > slowest.ms) Object.assign(slowest, { name, ms: elapsed });
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    }
    // Responses API items: many calls merged into one turn, and many references, each a database read.
    const call = (index: number) => ({ type: "function_call", call_id: `call_${index}`, name: "f", arguments: "{}" });
    const output = (index: number) => ({ type: "function_call_output", call_id: `call_${index}`, output: "ok" });
    const reference = (index: number) => ({ type: "item_reference", id: `msg_${index}` });
    const itemCases: Record<string, unknown[]> = {
      "20,000 calls and their outputs": [
        ...Array.from({ length: 20_000 }, (_, index) => call(index)),
        ...Array.from({ length: 20_000 }, (_, index) => output(index)),
      ],
      "4,000 references": Array.from({ length: 4_000 }, (_, index) => reference(index)),
      "100,000 references": Array.from({ length: 100_000 }, (_, index) => reference(index)),
    };
    // `truncation: "auto"` searches, from the end, where a conversation may start: each try counts a prompt.
    const turns = (count: number, text: (index: number) => string) =>
      Array.from({ length: count }, (_, index) => ({ role: index % 2 ? "assistant" : "user", content: text(index) }));
    const truncatedCases: Record<string, unknown[]> = {
      "20,000 turns, truncated": turns(20_000, (index) => `turn ${index}`),
      "a 4 MB first turn, truncated": turns(3, (index) => (index ? "Hi" : "a ".repeat(2_000_000))),
      "20,000 calls and their outputs, truncated": itemCases["20,000 calls and their outputs"]!,
    };
    for (const [shape, input] of [...Object.entries(itemCases), ...Object.entries(truncatedCases)]) {
      const truncation = shape.endsWith("truncated") ? "auto" : "disabled";
      const started = performance.now();
      const response = await test.app.handle(
        test.post("/v1/responses", { model: families.llama3, input, max_output_tokens: 16, truncation, store: false }),
      );
      await response.text();
      const elapsed = performance.now() - started;
      const name = `responses · ${shape}: ${response.status}`;
      // Truncated, a conversation whose last turn fits is answered; one that never fits is refused.
      expect(response.status, name).toBe(shape.includes("calls") || truncation === "disabled" ? 400 : 200);
      if (elapsed > slowest.ms) Object.assign(slowest, { name, ms: elapsed });
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    const slowestProbe = await otherTab.slowest();
    expect(slowest.ms, `slowest: ${slowest.name}`).toBeLessThan(answerBound);
    expect(slowestProbe).toBeLessThan(answerBound);
    console.log(
      `slowest: ${slowest.name} in ${slowest.ms.toFixed(0)} ms; the other tab waited at most ${slowestProbe.toFixed(0)} ms`,
    );
    await checkLedgerInvariant(test.database);
  }, 600_000);
});

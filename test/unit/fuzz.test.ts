/**
 * Bad input is a 4xx, always, and fast: a seeded corpus of malformed requests (path escapes,
 * deep nesting, prototype names, giant bodies and prompts, unicode edge cases, wrong types and
 * values), each answered with OpenAI's error object and a request id within a time bound. Then
 * the app still serves, and nothing refused was charged.
 */
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/engine/deterministic.js";
import { maxBodyBytes } from "../../src/http/validate.js";
import { errorBodySchema } from "../../src/wire/schemas.js";
import { checkLedgerInvariant, makeApp, type TestApp } from "./support.js";

const model = "alpha3:8b-instruct-q8_0";

function nested(depth: number, leaf: unknown, wrap: (inner: unknown) => unknown): unknown {
  let value = leaf;
  for (let level = 0; level < depth; level++) value = wrap(value);
  return value;
}

const deepSchema = (depth: number) => nested(depth, { type: "string" }, (inner) => ({ type: "object", properties: { a: inner }, required: ["a"] }));
const weirdNames = ["constructor", "__proto__", "toString", "hasOwnProperty", "%", "%zz", "~2", "", "\u0000", "\ud800", "👩‍👩‍👧", "a/b"];
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
  const pick = <T,>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const schemaWith = (schema: unknown) => ({ model, messages: [{ role: "user", content: "Hi" }], response_format: { type: "json_schema", json_schema: { name: "s", schema } } });
  const toolWith = (parameters: unknown) => ({ model, messages: [{ role: "user", content: "Hi" }], tools: [{ type: "function", function: { name: "f", parameters } }] });
  const classes: (() => Case)[] = [
    () => ({ name: "path escape", request: (app) => app.get(`/v1/models/${pick(["%", "%zz", "%E0%A4%A", "a%", "%%", "%ud800"])}`) }),
    () => ({ name: "deep schema", request: (app) => app.post("/v1/chat/completions", schemaWith(deepSchema(33 + Math.floor(random() * 1000)))) }),
    () => ({ name: "deep tool parameters", request: (app) => app.post("/v1/chat/completions", toolWith(deepSchema(33 + Math.floor(random() * 1000)))) }),
    () => ({
      name: "prototype $ref",
      request: (app) => app.post("/v1/chat/completions", schemaWith({ $defs: { a: { type: "string" } }, type: "object", properties: { x: { $ref: `#/$defs/${pick(weirdNames)}` } } })),
    }),
    () => ({ name: "prototype required", request: (app) => app.post("/v1/chat/completions", toolWith({ type: "object", properties: {}, required: [pick(weirdNames)] })) }),
    () => ({ name: "prototype keyword", request: (app) => app.post("/v1/chat/completions", `{"model":"${model}","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"__proto__":{"type":"string"},"type":"object"}}}}`) }),
    () => ({ name: "malformed JSON", request: (app) => app.post("/v1/chat/completions", pick(["{", "[]", "null", "\"x\"", "{\"model\":", "{'a':1}", "\u0000", "{\"a\":1}}", nested(2000, "", (inner) => `[${String(inner)}]`) as string])) }),
    () => ({ name: "giant body", request: (app) => app.post("/v1/completions", { model, prompt: "a".repeat(maxBodyBytes + 1) }) }),
    () => ({ name: "giant prompt", request: (app) => app.post("/v1/completions", { model, prompt: pick(["word ", "a", "🙂", "\u00e9 "]).repeat(300_000 + Math.floor(random() * 100_000)) }) }),
    () => ({ name: "giant messages", request: (app) => app.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "lorem ipsum ".repeat(150_000) }] }) }),
    () => ({ name: "wrong type", request: (app) => app.post("/v1/chat/completions", { model, messages: pick([null, 1, "Hi", [{}], [{ role: pick(["user", "bot", 3]) }], [{ role: "user", content: { text: 1 } }]]) }) }),
    () => {
      const [parameter, values] = pick(Object.entries(outOfRange));
      return { name: "out of range", request: (app) => app.post("/v1/chat/completions", { model, messages: [{ role: "user", content: pick(weirdStrings) }], [parameter]: pick(values) }) };
    },
    () => ({ name: "unknown parameter", request: (app) => app.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hi" }], [pick(weirdNames.filter(Boolean))]: 1 }) }),
    () => ({ name: "unknown model", request: (app) => app.post("/v1/chat/completions", { model: pick(weirdStrings), messages: [{ role: "user", content: "Hi" }] }) }),
    () => ({ name: "unknown url", request: (app) => app.get(`/v1/${pick(["engines", "models/x/y", "chat", "%2e%2e/admin", "files"])}`) }),
  ];
  const made = classes[index % classes.length]!();
  return made;
}

describe("malformed requests", () => {
  it("a seeded corpus of 1,050: each a 4xx with the error object and a request id, within a time bound; the app still serves; nothing is charged", async () => {
    const test = await makeApp({ rpm: 1_000_000, tpm: 1_000_000_000 });
    // The first request loads the model's tokenizer (about a second on a slow machine). It is
    // made before the corpus so the bound below is on answering bad input, not on a cold start.
    const warm = await test.app.handle(test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hello" }], max_tokens: 1 }));
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
    expect(classes.size).toBe(15);

    const fine = await test.app.handle(test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hello" }], max_tokens: 3 }));
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
    const deep = await error(test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hi" }], response_format: { type: "json_schema", json_schema: { name: "s", schema: deepSchema(1000) } } }));
    expect(deep).toMatchObject({ status: 400, code: "invalid_schema" });
    expect(deep.message).toContain("nests deeper than 32 levels");
    const required = await error(test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hi" }], tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {}, required: ["constructor"] } } }] }));
    expect(required).toMatchObject({ status: 400, code: "invalid_schema" });
    const proto = await error(test.post("/v1/chat/completions", `{"model":"${model}","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","__proto__":{}}}}]}`));
    expect(proto.message).toContain("'__proto__' is not supported");
    const reference = await error(test.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hi" }], response_format: { type: "json_schema", json_schema: { name: "s", schema: { $defs: {}, $ref: "#/$defs/constructor" } } } }));
    expect(reference).toMatchObject({ status: 400, code: "invalid_schema" });
    const large = await error(test.post("/v1/completions", { model, prompt: "a".repeat(maxBodyBytes) }));
    expect(large).toMatchObject({ status: 413, code: "request_too_large", type: "invalid_request_error" });
    const giant = test.post("/v1/completions", { model, prompt: "word ".repeat(1_500_000) });
    const started = performance.now();
    const long = await error(giant);
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(long).toMatchObject({ status: 400, code: "context_length_exceeded", param: "prompt" });
    expect(long.message).toMatch(/maximum context length is 8192 tokens\. However, your prompt resulted in at least \d+ tokens/);
  }, 60_000);
});

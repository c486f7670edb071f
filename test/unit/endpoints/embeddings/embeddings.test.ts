/**
 * `POST /v1/embeddings` on the deterministic engine and through upstreams: every input form, both
 * encodings, `dimensions`, OpenAI's refusals, and the bill.
 */
import { setTimeout as delay } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { embeddingListSchema, floatsOfBase64 } from "../../../../src/core/wire/embeddings.js";
import { errorBodySchema } from "../../../../src/core/wire/error.js";
import { modelInfoSchema } from "../../../../src/core/wire/models.js";
import { EngineError, notLoaded } from "../../../../src/core/errors/engine.js";
import { DeterministicEngine } from "../../../../src/engines/deterministic/engine.js";
import { checkLedgerInvariant, makeApp, makePolicy, tokenizers, type TestApp } from "../../../support/unit-app.js";

const gguf = {
  modelId: "embed-test-q8_0",
  file: "https://models.example/embed-test-q8_0.gguf",
  quantization: "Q8_0",
  sizeMB: 30,
  kvCache: { layers: 6, kvHeads: 12, headDim: 32 },
};
/** Llama 3's tokenizer (a BOS before text), Matryoshka sizes, 3 nano-USD per input token. */
const nested = {
  id: "nested-embed",
  kind: "embedding" as const,
  family: "llama3" as const,
  contextWindow: 512,
  dimensions: 256,
  matryoshkaDimensions: [64, 128],
  price: { inputNanoUsdPerToken: 3, outputNanoUsdPerToken: 0 },
  gguf: [gguf],
};
const plain = { ...nested, id: "plain-embed", matryoshkaDimensions: undefined, dimensions: 384 };
const remote = {
  ...plain,
  id: "remote-embed",
  routing: "remote" as const,
  gguf: [],
  upstreams: [
    { name: "first", baseUrl: "https://first.example/v1", model: "up-embed" },
    { name: "second", baseUrl: "https://second.example/v1", model: "up-embed" },
  ],
};
const models = [nested, plain, remote];

async function embed(test: TestApp, body: Record<string, unknown>, path = "/v1/embeddings") {
  const response = await test.app.handle(test.post(path, body));
  const json: unknown = await response.json();
  return { response, json };
}

async function refusal(test: TestApp, body: Record<string, unknown>, path = "/v1/embeddings") {
  const { response, json } = await embed(test, body, path);
  return { status: response.status, ...errorBodySchema.parse(json).error };
}

const cosine = (a: number[], b: number[]) => a.reduce((sum, value, index) => sum + value * b[index]!, 0);
const length = (vector: number[]) => Math.sqrt(cosine(vector, vector));

async function llamaTokens(text: string): Promise<number> {
  return 1 + (await tokenizers.forFamily("llama3")).encodeText(text).length;
}

describe("POST /v1/embeddings", () => {
  it("takes OpenAI's four input forms and answers one unit vector per input, in order, with the tokens embedded", async () => {
    const test = await makeApp({ models });
    const texts = ["the tide comes in", "ships at sea", "weather and navigation"];
    const forms: [unknown, number][] = [
      [texts[0], await llamaTokens(texts[0]!)],
      [texts, (await Promise.all(texts.map(llamaTokens))).reduce((a, b) => a + b)],
      [[1, 2, 3, 4], 4],
      [
        [
          [5, 6],
          [7, 8, 9],
        ],
        5,
      ],
    ];
    for (const [input, tokens] of forms) {
      const { response, json } = await embed(test, { model: "plain-embed", input });
      expect(response.status).toBe(200);
      const list = embeddingListSchema.parse(json);
      const count =
        typeof input === "string" || typeof (input as unknown[])[0] === "number" ? 1 : (input as unknown[]).length;
      expect(list.data.map((item) => item.index)).toEqual([...Array(count).keys()]);
      expect(list).toMatchObject({
        object: "list",
        model: "plain-embed",
        usage: { prompt_tokens: tokens, total_tokens: tokens },
      });
      for (const item of list.data) {
        expect((item.embedding as number[]).length).toBe(384);
        expect(length(item.embedding as number[])).toBeCloseTo(1, 5);
      }
    }
    // Also without /v1.
    expect((await embed(test, { model: "plain-embed", input: "x" }, "/embeddings")).response.status).toBe(200);
  });

  it("writes base64 as little-endian float32, the same vectors as floats", async () => {
    const test = await makeApp({ models });
    const input = ["a local model", "on this device"];
    const floats = embeddingListSchema.parse((await embed(test, { model: "plain-embed", input })).json);
    const base64 = embeddingListSchema.parse(
      (await embed(test, { model: "plain-embed", input, encoding_format: "base64" })).json,
    );
    base64.data.forEach((item, index) => {
      expect(typeof item.embedding).toBe("string");
      expect(Array.from(floatsOfBase64(item.embedding as string))).toEqual(floats.data[index]!.embedding);
    });
  });

  it("gives the same text the same vector, and texts that share words nearer vectors than texts that share none", async () => {
    const test = await makeApp({ models });
    const input = [
      "the harbour master checks the tide tables",
      "the harbour master checks the tide tables",
      "tide tables for the harbour",
      "quantum chromodynamics lecture notes",
    ];
    const list = embeddingListSchema.parse((await embed(test, { model: "plain-embed", input, user: "u-1" })).json);
    const [a, same, near, far] = list.data.map((item) => item.embedding as number[]);
    expect(same).toEqual(a);
    expect(cosine(a!, near!)).toBeGreaterThan(cosine(a!, far!) + 0.2);
  });

  it("cuts a Matryoshka model's vectors to `dimensions` and normalises them again; refuses other sizes and other models", async () => {
    const test = await makeApp({ models });
    const input = "search_query: tides";
    const whole = embeddingListSchema.parse((await embed(test, { model: "nested-embed", input })).json).data[0]!;
    const cut = embeddingListSchema.parse((await embed(test, { model: "nested-embed", input, dimensions: 64 })).json)
      .data[0]!.embedding as number[];
    const prefix = (whole.embedding as number[]).slice(0, 64);
    expect(cut.length).toBe(64);
    expect(length(cut)).toBeCloseTo(1, 5);
    cut.forEach((value, index) => expect(value).toBeCloseTo(prefix[index]! / length(prefix), 6));
    expect(await refusal(test, { model: "nested-embed", input, dimensions: 100 })).toMatchObject({
      status: 400,
      param: "dimensions",
      message: expect.stringContaining("64, 128"),
    });
    expect(await refusal(test, { model: "plain-embed", input, dimensions: 64 })).toMatchObject({
      status: 400,
      param: "dimensions",
      message: "This model does not support specifying dimensions.",
    });
  });

  it("refuses, in OpenAI's words, empty inputs, too many, one past the window, too many tokens in all and unknown token ids", async () => {
    const test = await makeApp({ models });
    const model = "plain-embed";
    for (const input of ["", [""], [[]], []])
      expect(await refusal(test, { model, input })).toMatchObject({ status: 400, type: "invalid_request_error" });
    expect(await refusal(test, { model, input: "" })).toMatchObject({
      message: expect.stringContaining("'$.input' is invalid"),
    });
    expect(await refusal(test, { model, input: Array(2049).fill("x") })).toMatchObject({
      status: 400,
      message: expect.stringContaining("maximum length 2048"),
    });
    expect(await refusal(test, { model, input: ["short", "word ".repeat(600)] })).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      param: "input[1]",
    });
    const wide = await makeApp({ models: [{ ...plain, contextWindow: 8_192 }] });
    expect(await refusal(wide, { model, input: Array(40).fill(Array(8_000).fill(7)) })).toMatchObject({
      status: 400,
      code: "max_tokens_per_request",
      message: expect.stringMatching(/^Requested more than 30\d{4} tokens, max 300000 tokens per request$/),
    });
    expect(await refusal(test, { model, input: [1, 2, 999_999] })).toMatchObject({
      status: 400,
      param: "input",
      message: expect.stringContaining("Invalid token in 'input': 999999"),
    });
    expect(await refusal(test, { model, input: "x", encoding_format: "int8" })).toMatchObject({ status: 400 });
    expect(await refusal(test, { model, input: "x", bogus: 1 })).toMatchObject({ status: 400 });
    // Nothing of it was billed.
    expect((await test.admin.ledger()).filter((entry) => entry.kind === "charge")).toEqual([]);
  });

  it("refuses a chat model asked to embed, and an embedding model asked to generate on every generation endpoint", async () => {
    const test = await makeApp({ models });
    expect(await refusal(test, { model: "alpha3:8b-instruct-q8_0", input: "x" })).toMatchObject({
      status: 400,
      param: "model",
      message: "You are not allowed to generate embeddings from this model",
    });
    const asked: [string, Record<string, unknown>][] = [
      ["/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }] }],
      ["/v1/completions", { prompt: "Hi" }],
      ["/v1/responses", { input: "Hi" }],
    ];
    for (const [path, body] of asked)
      expect(await refusal(test, { model: "plain-embed", ...body }, path)).toMatchObject({
        status: 400,
        param: "model",
        message: expect.stringContaining("This is not a chat model"),
      });
  });

  it("answers without waiting for the settlement to commit, and the next read of the ledger sees the charge", async () => {
    const test = await makeApp({ models });
    // Once the tokenizer is loaded, a query takes milliseconds.
    await embed(test, { model: "plain-embed", input: "a first query" });
    // The settlement's transaction is opened at once and held: only the reply may go ahead of it.
    const settle = test.accounts.settle.bind(test.accounts);
    let commit!: () => void;
    const held = new Promise<void>((resolve) => (commit = resolve));
    test.accounts.settle = (...args) => {
      const settled = settle(...args);
      return held.then(() => settled);
    };
    const answered = embed(test, { model: "plain-embed", input: "one query" });
    const first = await Promise.race([answered, held.then(() => null), delay(2_000).then(() => "held")]);
    expect(first, "the reply waited for the settlement").not.toBe("held");
    commit();
    const tokens = embeddingListSchema.parse((await answered).json).usage.prompt_tokens;
    const charges = (await test.admin.ledger()).filter((entry) => entry.kind === "charge");
    expect(charges).toHaveLength(2);
    expect(charges).toContainEqual(
      expect.objectContaining({ model: "plain-embed", promptTokens: tokens, status: "completed" }),
    );
    await checkLedgerInvariant(test.database);
  });

  it("bills each request once: its input tokens at the input price, with the rate-limit headers; 403 past the balance", async () => {
    const test = await makeApp({ models });
    const input = ["one small text", "and another"];
    const { response, json } = await embed(test, { model: "plain-embed", input });
    const tokens = embeddingListSchema.parse(json).usage.prompt_tokens;
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("60");
    expect(Number(response.headers.get("x-ratelimit-remaining-tokens"))).toBe(150_000 - tokens);
    const charges = (await test.admin.ledger()).filter((entry) => entry.kind === "charge");
    expect(charges).toMatchObject([
      {
        model: "plain-embed",
        promptTokens: tokens,
        completionTokens: 0,
        amountNanoUsd: tokens * 3,
        status: "completed",
      },
    ]);
    await checkLedgerInvariant(test.database);
    const poor = await makeApp({ models, creditUsd: 0 });
    expect(await refusal(poor, { model: "plain-embed", input })).toMatchObject({ status: 403 });
    const info = modelInfoSchema.parse(
      await (await test.app.handle(test.get("/v1/model/info?model=nested-embed"))).json(),
    );
    expect(info).toMatchObject({
      kind: "embedding",
      dimensions: 256,
      matryoshka_dimensions: [64, 128],
      engine: "deterministic",
    });
    const list = (await (await test.app.handle(test.get("/v1/models"))).json()) as { data: { id: string }[] };
    expect(list.data.map((model) => model.id)).toContain("nested-embed");
  });
});

describe("POST /v1/embeddings on an engine with a vocabulary of its own", () => {
  it("is admitted for the most the text can be, billed the engine's count, and an input too long for it is the client's 400", async () => {
    class OwnVocabulary extends DeterministicEngine {
      override async embed(request: Parameters<DeterministicEngine["embed"]>[0], signal: AbortSignal) {
        if (request.inputs.some((input) => input.kind === "text" && input.text.length > 100))
          throw new EngineError("context_length", "Input 0 is 900 tokens in this model's own vocabulary.");
        return { ...(await super.embed(request, signal)), promptTokens: 30 };
      }
    }
    const engine = new OwnVocabulary({ tokenizers, tokenDelayMs: 0 });
    Object.defineProperty(engine, "name", { value: "llamacpp" });
    const test = await makeApp({ models, engine });
    // Admitted for 12 + 2 and 21 + 2 bytes: the family tokenizer's count (about 10) would have capped the engine's 30.
    const { json } = await embed(test, { model: "plain-embed", input: ["tide tables!", "ships at sea and more"] });
    expect(embeddingListSchema.parse(json).usage.prompt_tokens).toBe(30);
    expect(await refusal(test, { model: "plain-embed", input: "word ".repeat(40) })).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      param: "input",
    });
    const charges = (await test.admin.ledger()).filter((entry) => entry.kind === "charge");
    expect(charges.map((entry) => [entry.status, entry.amountNanoUsd, entry.chargeCapped ?? false])).toEqual([
      ["failed", 0, false],
      ["completed", 30 * 3, false],
    ]);
    await checkLedgerInvariant(test.database);
  });
});

describe("POST /v1/embeddings counting only where the count is used", () => {
  /** An engine with a vocabulary of its own: 7 tokens an input, whatever its text. */
  class OwnCount extends DeterministicEngine {
    override async embed(request: Parameters<DeterministicEngine["embed"]>[0]) {
      const vectors = request.inputs.map(() => new Float32Array(384).fill(1));
      return { vectors, promptTokens: 7 * request.inputs.length };
    }
  }

  it("tokenizes no text for an engine that counts its own, and still checks token ids and bills its count", async () => {
    const engine = new OwnCount({ tokenizers, tokenDelayMs: 0 });
    Object.defineProperty(engine, "name", { value: "llamacpp" });
    const test = await makeApp({ models, engine });
    const counted = vi.spyOn(tokenizers, "forFamily");
    try {
      // Past the window in the family's tokens (600 words), not in the engine's: the engine's to judge.
      const { json } = await embed(test, { model: "plain-embed", input: ["tide tables", "word ".repeat(600)] });
      expect(embeddingListSchema.parse(json).usage.prompt_tokens).toBe(14);
      expect(counted).not.toHaveBeenCalled();
      expect(await refusal(test, { model: "plain-embed", input: [1, 2, 999_999] })).toMatchObject({
        status: 400,
        message: expect.stringContaining("Invalid token in 'input': 999999"),
      });
      expect(counted).toHaveBeenCalledTimes(1);
    } finally {
      counted.mockRestore();
    }
    await checkLedgerInvariant(test.database);
  });

  it("admits each input for at most the window, so one too long is the engine's 400, not a 429 for tokens never embedded", async () => {
    class Refusing extends OwnCount {
      override async embed(request: Parameters<DeterministicEngine["embed"]>[0]) {
        if (request.inputs.some((input) => input.kind === "text" && input.text.length > 1_000))
          throw new EngineError("context_length", "Input 0 is past this model's window in its own vocabulary.");
        return super.embed(request);
      }
    }
    const engine = new Refusing({ tokenizers, tokenDelayMs: 0 });
    Object.defineProperty(engine, "name", { value: "llamacpp" });
    // 100,000 bytes of text: over the key's 10,000 tokens per minute, were it admitted whole.
    const test = await makeApp({ models, engine, tpm: 10_000 });
    expect(await refusal(test, { model: "plain-embed", input: "word ".repeat(20_000) })).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      param: "input",
    });
    const { json } = await embed(test, { model: "plain-embed", input: ["tide tables", "ships"] });
    expect(embeddingListSchema.parse(json).usage.prompt_tokens).toBe(14);
    await checkLedgerInvariant(test.database);
  });

  it("counts text with the family's tokenizer where that count is billed", async () => {
    const test = await makeApp({ models });
    const counted = vi.spyOn(tokenizers, "forFamily");
    try {
      const { json } = await embed(test, { model: "plain-embed", input: "tide tables" });
      expect(embeddingListSchema.parse(json).usage.prompt_tokens).toBe(await llamaTokens("tide tables"));
      expect(counted).toHaveBeenCalled();
    } finally {
      counted.mockRestore();
    }
  });
});

describe("POST /v1/embeddings while its admission is decided", () => {
  /** The deterministic engine, recording each call, and waiting on `gate` where one is set. */
  class Recording extends DeterministicEngine {
    readonly calls: { onlyIfLoaded: boolean; inputs: number }[] = [];
    loaded = true;
    gate: Promise<void> | undefined;
    override async embed(request: Parameters<DeterministicEngine["embed"]>[0], signal: AbortSignal) {
      this.calls.push({ onlyIfLoaded: request.onlyIfLoaded === true, inputs: request.inputs.length });
      if (request.onlyIfLoaded && !this.loaded) throw notLoaded(this.name, request.model.id);
      this.loaded = true;
      await this.gate;
      return super.embed(request, signal);
    }
  }

  /** Holds every admission until the returned function is called. */
  function holdAdmissions(test: TestApp): () => void {
    const admit = test.accounts.admit.bind(test.accounts);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    test.accounts.admit = async (...args) => {
      await held;
      return admit(...args);
    };
    return release;
  }

  it("starts a query on the loaded model before its admission commits, and a batch only once admitted", async () => {
    const engine = new Recording({ tokenizers, tokenDelayMs: 0 });
    const test = await makeApp({ models, engine });
    await embed(test, { model: "plain-embed", input: "warm the tokenizer" });
    engine.calls.length = 0;
    const admitAll = holdAdmissions(test);
    const query = embed(test, { model: "plain-embed", input: "one short query" });
    const batch = embed(test, {
      model: "plain-embed",
      input: Array.from({ length: 8 }, () => "a longer text ".repeat(4)),
    });
    await expect.poll(() => engine.calls.length, { timeout: 2_000 }).toBe(1);
    expect(engine.calls).toEqual([{ onlyIfLoaded: true, inputs: 1 }]);
    admitAll();
    const [answered, batched] = await Promise.all([query, batch]);
    expect([answered.response.status, batched.response.status]).toEqual([200, 200]);
    expect(engine.calls).toEqual([
      { onlyIfLoaded: true, inputs: 1 },
      { onlyIfLoaded: false, inputs: 8 },
    ]);
    const charges = (await test.admin.ledger()).filter((entry) => entry.kind === "charge");
    expect(charges.map((entry) => entry.status)).toEqual(["completed", "completed", "completed"]);
    await checkLedgerInvariant(test.database);
  });

  it("runs a query once admitted where the engine does not hold its model, and answers nothing of one refused", async () => {
    const engine = new Recording({ tokenizers, tokenDelayMs: 0 });
    engine.loaded = false;
    const test = await makeApp({ models, engine });
    const { response } = await embed(test, { model: "plain-embed", input: "load me first" });
    expect(response.status).toBe(200);
    expect(engine.calls).toEqual([
      { onlyIfLoaded: true, inputs: 1 },
      { onlyIfLoaded: false, inputs: 1 },
    ]);

    const poor = await makeApp({ models, engine, creditUsd: 0 });
    engine.calls.length = 0;
    expect(await refusal(poor, { model: "plain-embed", input: "a query" })).toMatchObject({ status: 403 });
    expect(engine.calls).toEqual([{ onlyIfLoaded: true, inputs: 1 }]);
    expect((await poor.admin.ledger()).filter((entry) => entry.kind === "charge")).toEqual([]);
    await checkLedgerInvariant(poor.database);
  });

  it("takes a refused query out of the engine's queue before it runs", async () => {
    const engine = new Recording({ tokenizers, tokenDelayMs: 0 });
    const policy = await makePolicy();
    const test = await makeApp({ models, engine, policy });
    const account = await test.admin.createAccount({ name: "poor", creditUsd: 0 });
    const poorKey = (await test.admin.createKey({ accountId: account.id })).key;
    let open!: () => void;
    engine.gate = new Promise((resolve) => (open = resolve));
    const running = embed(test, { model: "plain-embed", input: "holds the engine" });
    await expect.poll(() => engine.calls.length, { timeout: 2_000 }).toBe(1);
    const refused = await test.app.handle(
      test.post(
        "/v1/embeddings",
        { model: "plain-embed", input: "a query" },
        { headers: { authorization: `Bearer ${poorKey}` } },
      ),
    );
    expect(refused.status).toBe(403);
    open();
    expect((await running).response.status).toBe(200);
    await delay(20);
    expect(engine.calls).toHaveLength(1);
  });
});

describe("POST /v1/embeddings through upstreams", () => {
  /** An upstream that answers `vectors` (unnormalised) with `usage`, after the first upstream's 503. */
  function network(answer: (body: Record<string, unknown>) => unknown) {
    const calls: { url: string; body: Record<string, unknown> }[] = [];
    const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input);
      const body = JSON.parse(String(init?.body)) as Record<string, unknown>;
      calls.push({ url, body });
      if (url.startsWith("https://first.example")) return new Response("overloaded", { status: 503 });
      return new Response(JSON.stringify(answer(body)), { headers: { "content-type": "application/json" } });
    }) as typeof globalThis.fetch;
    return { fetch, calls };
  }

  it("fails over, asks for floats whole, normalises and encodes here, and bills the upstream's count", async () => {
    const net = network((body) => ({
      object: "list",
      data: (body.input as string[]).map((_, index) => ({
        object: "embedding",
        index,
        embedding: Array(384).fill(index + 1),
      })),
      usage: { prompt_tokens: body.user === "over" ? 11 : 3, total_tokens: 0 },
    }));
    const test = await makeApp({ models, fetch: net.fetch });
    const { response, json } = await embed(test, {
      model: "remote-embed",
      input: ["a", "b"],
      encoding_format: "base64",
    });
    expect(response.status).toBe(200);
    const list = embeddingListSchema.parse(json);
    const first = Array.from(floatsOfBase64(list.data[0]!.embedding as string));
    expect(first.length).toBe(384);
    expect(first[0]).toBeCloseTo(1 / Math.sqrt(384), 6);
    expect(list.usage.prompt_tokens).toBe(3);
    expect(net.calls.map((call) => call.url)).toEqual([
      "https://first.example/v1/embeddings",
      "https://second.example/v1/embeddings",
    ]);
    expect(net.calls[1]!.body).toMatchObject({ model: "up-embed", encoding_format: "float", input: ["a", "b"] });
    const [charge] = (await test.admin.ledger()).filter((entry) => entry.kind === "charge");
    expect(charge).toMatchObject({ upstream: "second", promptTokens: 3, amountNanoUsd: 9 });
    // A count past what was admitted (2 × (BOS + 1) tokens) is recorded, and charged the admission.
    await embed(test, { model: "remote-embed", input: ["a", "b"], user: "over" });
    const [capped] = (await test.admin.ledger()).filter((entry) => entry.kind === "charge" && entry.upstream);
    expect(capped).toMatchObject({ promptTokens: 11, amountNanoUsd: 12, chargeCapped: true });
    await checkLedgerInvariant(test.database);
  });

  it("refuses an upstream's vectors of the wrong size or number as its fault (503), charging nothing", async () => {
    for (const data of [[{ embedding: Array(10).fill(1) }], []]) {
      const test = await makeApp({ models, fetch: network(() => ({ data })).fetch });
      const error = await refusal(test, { model: "remote-embed", input: "a" });
      expect(error).toMatchObject({ status: 503, code: "upstream_invalid_response" });
      const [charge] = (await test.admin.ledger()).filter((entry) => entry.kind === "charge");
      expect(charge).toMatchObject({ amountNanoUsd: 0, status: "failed" });
      await checkLedgerInvariant(test.database);
    }
  });
});

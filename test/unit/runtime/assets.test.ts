import { readFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EngineError } from "../../../src/core/errors/engine.js";
import { errorResponse } from "../../../src/http/json-response.js";
import { engineErrorToApi, toApiError } from "../../../src/core/errors/api.js";
import { fetchTokenizerSource, Tokenizers, tokenizerFromFiles } from "../../../src/prompt/tokenizer.js";
// @ts-expect-error: a plain JavaScript build script
import { tokenizerSources, writeCompactTokenizer } from "../../../scripts/tokenizers.mjs";

const compactDirectory = mkdtempSync(join(tmpdir(), "tokenizers-"));

/** A fetcher that serves `files` (path → body) and answers 404 with an HTML page otherwise, as a dev server's fallback does. */
function server(files: Record<string, Uint8Array | string>, options: { html200?: boolean } = {}): typeof fetch {
  return async (input) => {
    const path = new URL(String(input)).pathname;
    const body = files[path];
    if (body !== undefined) return new Response(body as BodyInit, { headers: { "content-type": "application/gzip" } });
    return new Response("<!doctype html><p>app</p>", {
      status: options.html200 ? 200 : 404,
      headers: { "content-type": "text/html" },
    });
  };
}

describe("tokenizer assets", () => {
  it("the compact gzipped file is the same tokenizer, for every family", async () => {
    for (const name of Object.keys(tokenizerSources)) {
      const plain = tokenizerSources[name]();
      const file = writeCompactTokenizer(name, compactDirectory);
      const source = fetchTokenizerSource(
        "https://app.example/tokenizers/",
        server({ [`/tokenizers/${name}.json.gz`]: readFileSync(file) }),
      );
      const loaded = await source(name);
      expect(loaded.config).toEqual(plain.config);
      expect(loaded.tokenizer).toEqual(plain.tokenizer);
      const text = "Hello, world! Grüße 🌍 — [INST] <|im_start|> 12345";
      expect(tokenizerFromFiles(loaded).encode(text)).toEqual(tokenizerFromFiles(plain).encode(text));
    }
  }, 120_000);

  it("a missing tokenizer is a permanent 503 that names the URL and the fix", async () => {
    for (const options of [{}, { html200: true }]) {
      const tokenizers = new Tokenizers(fetchTokenizerSource("https://app.example/tokenizers/", server({}, options)));
      const error = await tokenizers.forFamily("llama3").catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(EngineError);
      const response = errorResponse(toApiError(error, "req_1"));
      expect(response.status).toBe(503);
      expect(response.headers.get("x-should-retry")).toBe("false");
      expect(response.headers.get("retry-after")).toBeNull();
      const body = (await response.json()) as { error: { message: string; code: string } };
      expect(body.error.code).toBe("asset_unavailable");
      expect(body.error.message).toContain("https://app.example/tokenizers/llama3.json.gz");
      expect(body.error.message).toMatch(/webgpu-inference\/vite.*copy-assets.*artifacts\.tokenizerBaseUrl/);
    }
  });

  it("a network failure is transient (Retry-After), a file that is not a tokenizer permanent", async () => {
    const offline = new Tokenizers(
      fetchTokenizerSource("https://app.example/t/", async () => Promise.reject(new TypeError("Failed to fetch"))),
    );
    const transient = errorResponse(
      toApiError(await offline.forFamily("qwen2").catch((caught: unknown) => caught), "req_2"),
    );
    expect([transient.status, transient.headers.get("retry-after"), transient.headers.get("x-should-retry")]).toEqual([
      503,
      "10",
      null,
    ]);
    const garbage = new Tokenizers(
      fetchTokenizerSource("https://app.example/t/", server({ "/t/qwen2.json.gz": '{"not":"a tokenizer"}' })),
    );
    const corrupt = errorResponse(
      toApiError(await garbage.forFamily("qwen2").catch((caught: unknown) => caught), "req_3"),
    );
    expect([corrupt.status, corrupt.headers.get("x-should-retry")]).toEqual([503, "false"]);
    expect(((await corrupt.json()) as { error: { message: string } }).error.message).toContain(
      "https://app.example/t/qwen2.json.gz could not be read",
    );
  });
});

describe("engine and asset failures", () => {
  it("each maps to its status, code and retry advice", () => {
    const cases: [EngineError, number, string, Record<string, string | null>][] = [
      [new EngineError("busy", "full"), 503, "engine_busy", { "retry-after": "1", "x-should-retry": null }],
      [
        new EngineError("device", "no f16"),
        503,
        "model_not_runnable",
        { "retry-after": null, "x-should-retry": "false" },
      ],
      [
        new EngineError("load_failed", "404"),
        503,
        "model_load_failed",
        { "retry-after": null, "x-should-retry": "false" },
      ],
      [
        new EngineError("load_failed", "offline", { retryAfterSeconds: 10 }),
        503,
        "model_load_failed",
        { "retry-after": "10", "x-should-retry": null },
      ],
      [new EngineError("asset", "404"), 503, "asset_unavailable", { "retry-after": null, "x-should-retry": "false" }],
      [
        new EngineError("asset", "offline", { retryAfterSeconds: 10 }),
        503,
        "asset_unavailable",
        { "retry-after": "10", "x-should-retry": null },
      ],
      [
        new EngineError("unsupported", "no"),
        400,
        "unsupported_request",
        { "retry-after": null, "x-should-retry": null },
      ],
      [
        new EngineError("context_length", "long"),
        400,
        "context_length_exceeded",
        { "retry-after": null, "x-should-retry": null },
      ],
    ];
    for (const [error, status, code, headers] of cases) {
      const response = errorResponse(engineErrorToApi(error));
      expect([response.status, engineErrorToApi(error).code]).toEqual([status, code]);
      for (const [name, value] of Object.entries(headers))
        expect(response.headers.get(name), `${code} ${name}`).toBe(value);
    }
  });
});

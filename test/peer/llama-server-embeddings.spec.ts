/**
 * A remote embedding model against a real peer: llama-server `--embeddings`, serving a
 * random-weight Llama GGUF that mean-pools (scripts/test-gguf.mjs: `embed-llama-mean`, the Llama 3
 * vocabulary, so our count of a text is the server's). The page's openai client asks `/v1`; the
 * vectors must be the server's own, and the bill its count.
 */
import { resolve } from "node:path";
import type { Page } from "@playwright/test";
// @ts-expect-error: a plain JavaScript build script
import { buildTestGguf } from "../../scripts/test-gguf.mjs";
import { expect, openHarness, test } from "../support/browser.js";
import { startLlamaServer, type LlamaServer } from "../support/llama-server.js";

let server: LlamaServer | undefined;

test.beforeAll(async () => {
  test.setTimeout(20 * 60_000);
  const model = buildTestGguf(resolve(import.meta.dirname, "../../.cache/test-gguf"), "embed-llama-mean") as string;
  server = await startLlamaServer(model, ["--embeddings", "-c", "512", "-np", "2"]);
});
test.afterAll(() => server?.stop());

async function open(page: Page) {
  await openHarness(page, {
    engine: "deterministic",
    models: [
      {
        id: "peer-embed",
        kind: "embedding",
        family: "llama3",
        contextWindow: 512,
        dimensions: 128,
        price: { inputNanoUsdPerToken: 3, outputNanoUsdPerToken: 0 },
        routing: "remote",
        upstreams: [{ name: "llama-server", baseUrl: `${server!.origin}/v1`, model: "test" }],
      },
    ],
  });
}

const input = ["The harbour master checks the tide tables.", "Ships at sea", "a"];

test("the server's own vectors, in order, as floats and as base64; its count billed exactly", async ({ page }) => {
  const direct = (await (
    await fetch(`${server!.origin}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input, model: "test" }),
    })
  ).json()) as { data: { index: number; embedding: number[] }[]; usage: { prompt_tokens: number } };
  await open(page);
  const result = await page.evaluate(async (texts) => {
    const client = window.harness.client();
    const floats = await client.embeddings.create({ model: "peer-embed", input: texts, encoding_format: "float" });
    const base64 = await client.embeddings.create({ model: "peer-embed", input: texts });
    const ledger = await window.harness.handle!.admin.ledger({ accountId: window.harness.accountId });
    return { floats, base64, ledger: ledger.filter((entry) => entry.kind === "charge") };
  }, input);
  const expected = direct.data.sort((a, b) => a.index - b.index).map((item) => item.embedding);
  for (const reply of [result.floats, result.base64]) {
    expect(reply.usage.prompt_tokens).toBe(direct.usage.prompt_tokens);
    reply.data.forEach((item, index) =>
      item.embedding.forEach((value, at) => expect(value).toBeCloseTo(expected[index]![at]!, 6)),
    );
  }
  expect(result.ledger).toHaveLength(2);
  for (const entry of result.ledger) {
    expect(entry).toMatchObject({
      status: "completed",
      upstream: "llama-server",
      promptTokens: direct.usage.prompt_tokens,
      completionTokens: 0,
      amountNanoUsd: direct.usage.prompt_tokens * 3,
    });
    expect(entry.chargeCapped).toBeUndefined();
    expect(entry.usageEstimated).toBeUndefined();
  }
});

test("token-id inputs reach the server as ids, and a chat model's name is refused before it is asked", async ({
  page,
}) => {
  await open(page);
  const result = await page.evaluate(async () => {
    const client = window.harness.client();
    const ids = await client.embeddings.create({
      model: "peer-embed",
      input: [[128000, 9906, 1070]],
      encoding_format: "float",
    });
    const refused = await client.embeddings
      .create({ model: "alpha3:8b-instruct-q8_0", input: "x" })
      .catch((error: { status: number }) => error.status);
    return { ids, refused };
  });
  expect(result.ids.usage.prompt_tokens).toBe(3);
  expect(result.ids.data[0]!.embedding).toHaveLength(128);
  expect(result.refused).toBe(400);
});

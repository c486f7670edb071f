/**
 * llama.cpp's Memory64 build: a random-weight GGUF past 4 GB (Llama 3 8B's shapes in Q4_0, in
 * three shards: scripts/test-gguf.mjs), more than a wasm32 build addresses, loads in the
 * Memory64 build, answers, and is billed; on one thread and on every core. The test server makes
 * the file in memory (test/support/browser-setup.ts), so the browser's copy is the only one on disk.
 */
import type { Page } from "@playwright/test";
import { modelInfoSchema } from "../../src/core/wire/models.js";
import { expect, launchProfile, origin, test } from "../support/browser.js";

const model = "llama3-8b-shape";

function catalogue() {
  return [
    {
      id: model,
      family: "llama3" as const,
      contextWindow: 512,
      price: { inputNanoUsdPerToken: 3, outputNanoUsdPerToken: 7 },
      gguf: [
        {
          modelId: "llama3-8b-shape-q4_0",
          file: `${origin()}/test-gguf-big/llama3-8b-shape-q4_0-00001-of-00003.gguf`,
          quantization: "Q4_0",
          sizeMB: 4_320,
          kvCache: { layers: 32, kvHeads: 8, headDim: 128 },
        },
      ],
    },
  ];
}

async function start(page: Page, isolated: boolean): Promise<void> {
  page.on("console", (message) => {
    if (message.type() === "error") console.log(`[page] ${message.text()}`);
  });
  await page.goto(`${origin()}/index.html${isolated ? "?isolated" : ""}`);
  await expect(page.locator("#status")).toHaveText("ready");
  await page.evaluate((models) => window.harness.start({ engine: "auto", models }, {}, true), catalogue());
}

async function info(page: Page) {
  return modelInfoSchema.parse(
    await page.evaluate(async (id) => (await window.harness.fetch(`/model/info?model=${id}`)).json(), model),
  );
}

for (const isolated of [false, true])
  test(`a GGUF past 4 GB runs on llama.cpp's Memory64 build, ${isolated ? "on every core" : "on one thread"}: it loads, answers, and is billed`, async () => {
    test.setTimeout(8 * 60_000);
    const profile = await launchProfile();
    try {
      const page = profile.context.pages()[0] ?? (await profile.context.newPage());
      await start(page, isolated);
      expect(await info(page)).toMatchObject({
        engine: "llamacpp",
        runnable: { ok: true },
        build: { format: "gguf", model_id: "llama3-8b-shape-q4_0" },
      });
      const answer = await page.evaluate(async (id) => {
        const client = window.harness.client(undefined, 7 * 60_000);
        const completion = await client.chat.completions.create({
          model: id,
          messages: [{ role: "user", content: "Hello" }],
          max_tokens: 2,
          temperature: 0,
        });
        const ledger = await window.harness.handle!.admin.ledger({ accountId: window.harness.accountId });
        return { completion, charges: ledger.filter((entry) => entry.kind === "charge") };
      }, model);
      const { usage } = answer.completion;
      expect(usage!.completion_tokens).toBeGreaterThan(0);
      expect(answer.charges).toHaveLength(1);
      expect(answer.charges[0]).toMatchObject({
        model,
        promptTokens: usage!.prompt_tokens,
        completionTokens: usage!.completion_tokens,
        amountNanoUsd: usage!.prompt_tokens * 3 + usage!.completion_tokens * 7,
      });
      const threads = await page.evaluate(() => (crossOriginIsolated ? navigator.hardwareConcurrency : 1));
      expect(await info(page)).toMatchObject({ loaded: true, threads: threads > 2 ? threads - 1 : threads });
    } finally {
      await profile.dispose();
    }
  });

/**
 * The fallback for browsers without WebGPU in service workers: a page hosts the engine and the
 * worker forwards to it. Forced here with `engineHost: 'page'`, on the deterministic engine.
 */
import { expect, openHarness, test } from "../support/browser.js";

const options = { engine: "deterministic" as const, engineHost: "page" as const, pageEngine: {}, tokenDelayMs: 20 };
const model = "gamma-7b-instruct-v0.3";

test("a page-hosted engine serves chat, streams and aborts; a restarted worker finds its host again", async ({
  context,
  page,
}) => {
  await openHarness(page, options);
  const info = await page.evaluate(async (id) => (await window.harness.fetch(`/model/info?model=${id}`)).json(), model);
  expect(info).toMatchObject({ engine: "deterministic (page-hosted)", runnable: { ok: true } });

  const result = await page.evaluate(async (id) => {
    const client = window.harness.client();
    const whole = await client.chat.completions.create({
      model: id,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 6,
    });
    let streamed = "";
    const stream = await client.chat.completions.create({
      model: id,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 6,
      stream: true,
    });
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";
    const controller = new AbortController();
    const long = await client.chat.completions.create(
      { model: id, messages: [{ role: "user", content: "Hi" }], stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    try {
      for await (const chunk of long) {
        void chunk;
        if (++chunks === 2) controller.abort();
      }
    } catch {
      // The SDK raises on abort.
    }
    return { whole, streamed, chunks };
  }, model);
  expect(result.whole.usage?.completion_tokens).toBe(6);
  expect(result.streamed).toBe(result.whole.choices[0]?.message.content);
  expect(result.chunks).toBe(2);

  // The browser stops idle workers; the restarted one has forgotten its host and asks again.
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  await cdp.send("ServiceWorker.stopAllWorkers");
  const again = await page.evaluate(
    async (id) =>
      (
        await window.harness
          .client()
          .chat.completions.create({ model: id, messages: [{ role: "user", content: "Hi" }], max_tokens: 6 })
      ).choices[0]?.message.content,
    model,
  );
  expect(again).toBe(result.whole.choices[0]?.message.content);
});

test("without an open host page, the worker says why it cannot serve", async ({ context, page }) => {
  await openHarness(page, options);
  const other = await context.newPage();
  await openHarness(other, { ...options, pageEngine: undefined });
  await page.close();
  const error = await other.evaluate(async (id) => {
    try {
      await window.harness.client().chat.completions.create({ model: id, messages: [{ role: "user", content: "Hi" }] });
      return null;
    } catch (caught) {
      const apiError = caught as { status: number; code: string; message: string };
      return { status: apiError.status, code: apiError.code, message: apiError.message };
    }
  }, model);
  expect(error).toMatchObject({ status: 503, code: "model_not_runnable" });
  expect(error?.message).toContain("No open page hosts the deterministic engine");
});

test("a call to the host page announced last, closed since, goes to another open host", async ({ context, page }) => {
  await openHarness(page, options);
  const last = await context.newPage();
  await openHarness(last, options);
  const client = await context.newPage();
  await openHarness(client, { ...options, pageEngine: undefined });
  const query = async () => {
    const started = performance.now();
    const embedded = await window.harness
      .client()
      .embeddings.create({ model: "snowflake-arctic-embed-s", input: "a query", encoding_format: "float" });
    return { length: embedded.data[0]!.embedding.length, ms: performance.now() - started };
  };
  // The first fetches the model's tokenizer.
  await client.evaluate(query);
  await last.close();
  const answer = await client.evaluate(query);
  expect(answer.length).toBe(384);
  // Found closed by the call's first look, or by the check each second that follows it.
  expect(answer.ms).toBeLessThan(3_000);
});

test("a host page closed mid-generation fails that stream within seconds, and the engine serves the next request", async ({
  context,
  page,
}) => {
  await openHarness(page, options);
  const other = await context.newPage();
  await openHarness(other, { ...options, pageEngine: undefined });
  // 2,000 tokens at 20 ms each: 40 s, unless the stream ends when its host goes.
  const streaming = other.evaluate(async (id) => {
    const started = performance.now();
    let chunks = 0;
    try {
      const stream = await window.harness.client().chat.completions.create({
        model: id,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 2_000,
        stream: true,
      });
      for await (const chunk of stream) {
        void chunk;
        if (++chunks === 2) (window as unknown as { secondChunk: number }).secondChunk = performance.now();
      }
      return { chunks, error: null, afterClose: 0 };
    } catch (caught) {
      const closedAt = (window as unknown as { closedAt?: number }).closedAt ?? started;
      return { chunks, error: (caught as Error).message, afterClose: performance.now() - closedAt };
    }
  }, model);
  await other.waitForFunction(() => "secondChunk" in window, null, { timeout: 10_000 });
  await other.evaluate(() => ((window as unknown as { closedAt: number }).closedAt = performance.now()));
  await page.close();
  // Without the worker's check the stream would run on for 40 s, then hang: bounded here by name.
  const stillOpen = { chunks: 0, error: "the stream was still open 10 s after its host closed", afterClose: 10_000 };
  const result = await Promise.race([
    streaming,
    new Promise<typeof stillOpen>((resolve) => setTimeout(() => resolve(stillOpen), 10_000)),
  ]);
  expect(result.error).toContain("was closed or reloaded before it finished");
  expect(result.chunks).toBeGreaterThanOrEqual(2);
  // The worker checks its host every second.
  expect(result.afterClose).toBeLessThan(5_000);

  // The engine was let go: a new host page serves the next request at once.
  const host = await context.newPage();
  await openHarness(host, options);
  const reply = await other.evaluate(async (id) => {
    const completion = await window.harness
      .client()
      .chat.completions.create({ model: id, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 });
    return completion.usage?.completion_tokens;
  }, model);
  expect(reply).toBe(3);
});

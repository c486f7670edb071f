/**
 * Broken setups a new user meets, each answered with its cause and its fix: the worker script or
 * the tokenizers not served, a model's files missing, and a second tab asking for other options.
 */
import type { Page } from "@playwright/test";
import { expect, openHarness, origin, test } from "../support/browser.js";

interface Answer {
  status: number;
  retryAfter: string | null;
  shouldRetry: string | null;
  error: { message: string; code: string; type: string };
}

/** One chat completion by plain fetch, with the retry headers it carried. */
function chat(page: Page, model: string): Promise<Answer> {
  return page.evaluate(async (id) => {
    const response = await window.harness.fetch("/chat/completions", {
      method: "POST",
      body: JSON.stringify({ model: id, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
    });
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      shouldRetry: response.headers.get("x-should-retry"),
      error: ((await response.json()) as { error: Answer["error"] }).error,
    };
  }, model);
}

async function serverRequests(): Promise<Record<string, number>> {
  return (await (await fetch(`${origin()}/__server/requests`)).json()) as Record<string, number>;
}

test("a worker script that is not served: startInference names its URL, the plugin and the copy command", async ({
  page,
}) => {
  await page.goto(`${origin()}/index.html`);
  await expect(page.locator("#status")).toHaveText("ready");
  const message = await page.evaluate(() =>
    window.harness.start({ serviceWorkerUrl: "/not-served-sw.js", engine: "deterministic" }).then(
      () => "started",
      (error: Error) => error.message,
    ),
  );
  expect(message).toContain(`the service worker ${origin()}/not-served-sw.js could not be registered`);
  expect(message).toContain("webgpu-inference/vite");
  expect(message).toContain("npx webgpu-inference copy-assets");
});

test("missing tokenizers: a 503 that names the URL and the fix, and tells clients not to retry", async ({ page }) => {
  const tokenizerBaseUrl = `${origin()}/no-tokenizers/`;
  await openHarness(page, { engine: "deterministic", artifacts: { tokenizerBaseUrl } });
  const before = await serverRequests();
  const answer = await chat(page, "alpha3:8b-instruct-q8_0");
  expect(answer).toMatchObject({
    status: 503,
    shouldRetry: "false",
    retryAfter: null,
    error: { code: "asset_unavailable", type: "service_unavailable" },
  });
  expect(answer.error.message).toContain(`${tokenizerBaseUrl}llama3.json.gz: HTTP 404`);
  expect(answer.error.message).toContain("artifacts.tokenizerBaseUrl");
  expect(answer.error.message).toContain("webgpu-inference/vite");

  // The openai SDK honours x-should-retry: one request reaches the server, however many retries it may make.
  const sdk = await page.evaluate(async () => {
    const client = new window.harness.OpenAI({
      baseURL: window.harness.baseURL,
      apiKey: window.harness.key,
      dangerouslyAllowBrowser: true,
      maxRetries: 3,
    });
    return client.chat.completions
      .create({ model: "alpha3:8b-instruct-q8_0", messages: [{ role: "user", content: "Hi" }] })
      .then(
        () => null,
        (error: { status?: number; message: string }) => ({ status: error.status, message: error.message }),
      );
  });
  expect(sdk?.status).toBe(503);
  const after = await serverRequests();
  expect((after["/no-tokenizers/llama3.json.gz"] ?? 0) - (before["/no-tokenizers/llama3.json.gz"] ?? 0)).toBe(2);
});

test("missing model files: a 503 that names the file's URL and artifacts.modelBaseUrl, fetched once however the client retries", async ({
  page,
}) => {
  const modelBaseUrl = `${origin()}/no-models/`;
  await openHarness(page, { engine: "webllm", memoryBudgetMB: 65_536, artifacts: { modelBaseUrl } });
  const config = "/no-models/Llama-3-8B-Instruct-q4f32_1-MLC/resolve/main/mlc-chat-config.json";
  const before = await serverRequests();
  const answer = await chat(page, "alpha3:8b-instruct-q8_0");
  expect(answer).toMatchObject({
    status: 503,
    shouldRetry: "false",
    retryAfter: null,
    error: { code: "model_load_failed" },
  });
  expect(answer.error.message).toContain(`${origin()}${config}: HTTP 404`);
  expect(answer.error.message).toContain("artifacts.modelBaseUrl");
  const once = ((await serverRequests())[config] ?? 0) - (before[config] ?? 0);
  expect(once).toBeGreaterThan(0);

  const sdk = await page.evaluate(async () => {
    const client = new window.harness.OpenAI({
      baseURL: window.harness.baseURL,
      apiKey: window.harness.key,
      dangerouslyAllowBrowser: true,
      maxRetries: 3,
    });
    return client.chat.completions
      .create({ model: "alpha3:8b-instruct-q8_0", messages: [{ role: "user", content: "Hi" }] })
      .then(
        () => null,
        (error: { status?: number }) => error.status,
      );
  });
  expect(sdk).toBe(503);
  const total = ((await serverRequests())[config] ?? 0) - (before[config] ?? 0);
  expect(total).toBe(2 * once);
});

test("a second tab with other options is refused, naming them, and the open tab keeps its engine", async ({
  context,
  page,
}) => {
  await openHarness(page, { engine: "deterministic" });
  const second = await context.newPage();
  await second.goto(`${origin()}/index.html`);
  await expect(second.locator("#status")).toHaveText("ready");
  const message = await second.evaluate(() =>
    window.harness.start({ engine: "webllm", maxQueued: 4 }).then(
      () => "started",
      (error: Error) => error.message,
    ),
  );
  expect(message).toContain('engine: "deterministic" → "webllm"');
  expect(message).toContain("maxQueued: 32 → 4");
  expect(message).toContain("1 other open tab(s)");
  // The same options join it.
  expect(
    await second.evaluate(() => window.harness.start({ engine: "deterministic" }, null).then(() => "started")),
  ).toBe("started");
  const answer = await page.evaluate(
    async () =>
      (
        await window.harness.client().chat.completions.create({
          model: "alpha3:8b-instruct-q8_0",
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 3,
        })
      ).usage?.completion_tokens,
  );
  expect(answer).toBe(3);
  const info = await page.evaluate(async () =>
    (await window.harness.fetch("/model/info?model=alpha3:8b-instruct-q8_0")).json(),
  );
  expect(info.engine).toBe("deterministic");
});

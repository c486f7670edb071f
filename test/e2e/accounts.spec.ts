/**
 * The hosted contract in a real browser: keys, balances, the ledger and rate limits, kept in
 * IndexedDB and enforced by the one service worker for every tab.
 */
import type { Page } from "@playwright/test";
import { expect, openHarness, test } from "../support/browser.js";

const model = "gamma-7b-instruct-v0.3";
const messages = [{ role: "user" as const, content: "Count for me." }];

async function ledgerOf(page: Page) {
  return page.evaluate(async () => ({
    account: await window.harness.handle!.admin.getAccount(window.harness.accountId),
    entries: await window.harness.handle!.admin.ledger({ accountId: window.harness.accountId }),
  }));
}

test("401 for a bad or revoked key and 403 at zero balance, through the openai SDK", async ({ page }) => {
  await openHarness(page, { engine: "deterministic" }, { creditUsd: 0 });
  const result = await page.evaluate(
    async ({ id, history }) => {
      const attempt = async (apiKey: string) => {
        try {
          await window.harness.client(apiKey).chat.completions.create({ model: id, messages: history, max_tokens: 4 });
          return null;
        } catch (error) {
          const apiError = error as { status: number; type: string; code: string; message: string };
          return { status: apiError.status, type: apiError.type, code: apiError.code, message: apiError.message };
        }
      };
      const broke = await attempt(window.harness.key);
      const wrong = await attempt("sk-this-is-not-a-key-of-ours-at-all-0000000");
      const admin = window.harness.handle!.admin;
      const funded = await admin.createAccount({ name: "funded", creditUsd: 1 });
      const revoked = await admin.createKey({ accountId: funded.id });
      const before = await attempt(revoked.key);
      await admin.revokeKey(revoked.id);
      const after = await attempt(revoked.key);
      return { broke, wrong, before, after };
    },
    { id: model, history: messages },
  );
  expect(result.broke).toMatchObject({ status: 403, type: "insufficient_quota", code: "insufficient_quota" });
  expect(result.broke?.message).toContain("insufficient balance");
  expect(result.wrong).toMatchObject({ status: 401, type: "invalid_request_error", code: "invalid_api_key" });
  expect(result.before).toBeNull();
  expect(result.after).toMatchObject({ status: 401, code: "invalid_api_key" });
});

test("the worker keeps keys in memory, yet a key re-limited or revoked in another tab is refused on its very next request", async ({
  context,
  page,
}) => {
  const { keyId } = await openHarness(page, { engine: "deterministic" });
  const other = await context.newPage();
  await openHarness(other, { engine: "deterministic" }, null);
  const status = async () => page.evaluate(async () => (await window.harness.fetch("/models")).status);
  // Read once, then answered from the worker's memory.
  expect([await status(), await status()]).toEqual([200, 200]);
  await other.evaluate((id) => window.harness.handle!.admin.setLimits(id, { rpm: 1 }).then(() => undefined), keyId);
  expect(await status()).toBe(429);
  await other.evaluate((id) => window.harness.handle!.admin.setLimits(id, { rpm: 1_000 }).then(() => undefined), keyId);
  expect(await status()).toBe(200);
  await other.evaluate((id) => window.harness.handle!.admin.revokeKey(id).then(() => undefined), keyId);
  expect(await status()).toBe(401);
});

test("rate-limit headers on success and on error, read by fetch and surfaced by the SDK", async ({ page }) => {
  await openHarness(page, { engine: "deterministic" }, { rpm: 4, tpm: 5_000 });
  const result = await page.evaluate(
    async ({ id, history }) => {
      const names = [
        "limit-requests",
        "remaining-requests",
        "reset-requests",
        "limit-tokens",
        "remaining-tokens",
        "reset-tokens",
      ];
      const pick = (headers: Headers) =>
        Object.fromEntries(names.map((name) => [name, headers.get(`x-ratelimit-${name}`)]));
      const models = await window.harness.fetch("/models");
      const { response } = await window.harness
        .client()
        .chat.completions.create({ model: id, messages: history, max_tokens: 4 })
        .withResponse();
      const invalid = await window.harness.fetch("/chat/completions", {
        method: "POST",
        body: JSON.stringify({ model: id }),
      });
      const last = await window.harness.client().models.list().withResponse();
      let sdkError: Record<string, string | null> = {};
      try {
        await window.harness.client().models.list();
      } catch (error) {
        sdkError = {
          status: String((error as { status: number }).status),
          ...pick((error as { headers: Headers }).headers),
          retryAfter: (error as { headers: Headers }).headers.get("retry-after"),
        };
      }
      return {
        models: pick(models.headers),
        chat: pick(response.headers),
        invalid: { status: invalid.status, ...pick(invalid.headers) },
        last: pick(last.response.headers),
        sdkError,
      };
    },
    { id: model, history: messages },
  );
  expect(result.models).toMatchObject({
    "limit-requests": "4",
    "remaining-requests": "3",
    "limit-tokens": "5000",
    "remaining-tokens": "5000",
  });
  // When the window starts again, as an ISO 8601 UTC timestamp: within the coming minute.
  const reset = Date.parse(result.models["reset-requests"] ?? "");
  expect(result.models["reset-requests"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(reset - Date.now()).toBeGreaterThan(0);
  expect(reset - Date.now()).toBeLessThanOrEqual(60_000);
  expect(result.chat["remaining-requests"]).toBe("2");
  // Prompt + max_tokens were admitted, then corrected to the real count.
  expect(Number(result.chat["remaining-tokens"])).toBeLessThan(5000);
  // A refused request (here, invalid) counts as any other does.
  expect(result.invalid).toMatchObject({ status: 400, "remaining-requests": "1" });
  expect(result.last["remaining-requests"]).toBe("0");
  expect(result.sdkError).toMatchObject({ status: "429", "remaining-requests": "0", "limit-requests": "4" });
  expect(Number(result.sdkError.retryAfter)).toBeGreaterThan(0);
});

test("200 concurrent requests from 4 tabs against an account that can pay for exactly 37: 37 succeed, the rest get 403, the ledger matches", async ({
  context,
  page,
}) => {
  const options = { engine: "deterministic" as const, tokenDelayMs: 0, maxQueued: 256 };
  await openHarness(page, options, { creditUsd: 1, rpm: 1_000 });
  // One probe, on another account, gives the exact cost of one request: every reply here is cut at max_tokens.
  const probe = await page.evaluate(
    async ({ id, history }) =>
      (await window.harness.client().chat.completions.create({ model: id, messages: history, max_tokens: 4 })).usage!,
    { id: model, history: messages },
  );
  expect(probe.completion_tokens).toBe(4);
  const cost = probe.prompt_tokens * 1 + 4 * 2;
  const affordable = 37;
  const shared = await page.evaluate(async (credit) => {
    const admin = window.harness.handle!.admin;
    const account = await admin.createAccount({ name: "shared", creditUsd: credit / 1e9 });
    const key = await admin.createKey({ accountId: account.id, rpm: 1_000 });
    return { accountId: account.id, key: key.key, balance: account.balanceNanoUsd };
  }, affordable * cost);
  expect(shared.balance).toBe(affordable * cost);

  const tabs = [page, ...(await Promise.all([1, 2, 3].map(() => context.newPage())))];
  for (const tab of tabs.slice(1)) await openHarness(tab, options, null);
  const outcomes = (
    await Promise.all(
      tabs.map((tab) =>
        tab.evaluate(
          async ({ id, history, key }) =>
            Promise.all(
              Array.from({ length: 50 }, async () => {
                try {
                  await window.harness
                    .client(key)
                    .chat.completions.create({ model: id, messages: history, max_tokens: 4 });
                  return 200;
                } catch (error) {
                  return (error as { status: number }).status;
                }
              }),
            ),
          { id: model, history: messages, key: shared.key },
        ),
      ),
    )
  ).flat();
  expect(outcomes).toHaveLength(200);
  expect(outcomes.filter((status) => status === 200)).toHaveLength(affordable);
  expect(outcomes.filter((status) => status === 403)).toHaveLength(200 - affordable);

  const books = await page.evaluate(async (accountId) => {
    const admin = window.harness.handle!.admin;
    return { account: await admin.getAccount(accountId), entries: await admin.ledger({ accountId }) };
  }, shared.accountId);
  const charges = books.entries.filter((entry) => entry.kind === "charge");
  expect(charges).toHaveLength(affordable);
  expect(charges.every((entry) => entry.status === "completed" && entry.amountNanoUsd === cost)).toBe(true);
  expect(books.account).toMatchObject({ balanceNanoUsd: 0, reservedNanoUsd: 0 });
});

test("RPM is enforced across tabs: exactly the limit passes in a window", async ({ context, page }) => {
  const { key } = await openHarness(page, { engine: "deterministic" }, { rpm: 10 });
  const tabs = [page, ...(await Promise.all([1, 2, 3].map(() => context.newPage())))];
  for (const tab of tabs.slice(1)) await openHarness(tab, { engine: "deterministic" }, null);
  const statuses = (
    await Promise.all(
      tabs.map((tab) =>
        tab.evaluate(
          (secret) =>
            Promise.all(
              Array.from({ length: 6 }, () =>
                window.harness
                  .fetch("/models", { headers: { authorization: `Bearer ${secret}` } })
                  .then((response) => response.status),
              ),
            ),
          key,
        ),
      ),
    )
  ).flat();
  expect(statuses.filter((status) => status === 200)).toHaveLength(10);
  expect(statuses.filter((status) => status === 429)).toHaveLength(14);
});

test("a tab closed mid-stream is charged for the tokens streamed, as aborted", async ({ context, page }) => {
  const options = { engine: "deterministic" as const, tokenDelayMs: 150 };
  const { key } = await openHarness(page, options);
  const streamer = await context.newPage();
  await openHarness(streamer, options, null);
  await streamer.evaluate(
    ({ id, secret }) => {
      const seen = { chunks: 0 };
      (window as unknown as { seen: typeof seen }).seen = seen;
      void (async () => {
        const stream = await window.harness.client(secret).chat.completions.create({
          model: id,
          messages: [{ role: "user", content: "A long story, please." }],
          max_tokens: 200,
          stream: true,
        });
        for await (const chunk of stream) if (chunk.choices[0]?.delta.content) seen.chunks++;
      })();
    },
    { id: model, secret: key },
  );
  await streamer.waitForFunction(() => (window as unknown as { seen: { chunks: number } }).seen.chunks >= 4);
  const observed = await streamer.evaluate(() => (window as unknown as { seen: { chunks: number } }).seen.chunks);
  await streamer.close();
  await expect
    .poll(async () => (await ledgerOf(page)).entries.filter((entry) => entry.kind === "charge").length, {
      timeout: 10_000,
    })
    .toBe(1);
  const { account, entries } = await ledgerOf(page);
  const charge = entries.find((entry) => entry.kind === "charge")!;
  expect(charge.status).toBe("aborted");
  // The worker may have sent a token or two the page had not read when it closed.
  expect(charge.completionTokens).toBeGreaterThanOrEqual(observed);
  expect(charge.completionTokens).toBeLessThanOrEqual(observed + 2);
  expect(charge.amountNanoUsd).toBe((charge.promptTokens ?? 0) * 1 + (charge.completionTokens ?? 0) * 2);
  expect(account).toMatchObject({ reservedNanoUsd: 0, balanceNanoUsd: 10_000_000_000 - charge.amountNanoUsd });
});

test("a worker terminated mid-request: its reservation is released when the worker restarts", async ({
  context,
  page,
}) => {
  await openHarness(page, { engine: "deterministic", tokenDelayMs: 200 });
  await page.evaluate((id) => {
    void window.harness
      .client()
      .chat.completions.create({
        model: id,
        messages: [{ role: "user", content: "Take your time." }],
        max_tokens: 200,
        stream: true,
      })
      .then(async (stream) => {
        for await (const chunk of stream) void chunk;
      })
      .catch(() => undefined);
  }, model);
  await expect
    .poll(async () => (await ledgerOf(page)).account?.reservedNanoUsd, { timeout: 10_000 })
    .toBeGreaterThan(0);
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  await cdp.send("ServiceWorker.stopAllWorkers");
  // The next request starts a new worker, which releases what the killed one held.
  const status = await page.evaluate(async () => (await window.harness.fetch("/models")).status);
  expect(status).toBe(200);
  const { account, entries } = await ledgerOf(page);
  expect(account).toMatchObject({ reservedNanoUsd: 0, balanceNanoUsd: 10_000_000_000 });
  expect(entries.filter((entry) => entry.kind === "charge")).toEqual([
    expect.objectContaining({ status: "failed", amountNanoUsd: 0 }),
  ]);
});

test("a plain-HTTP base URL is refused with a clear error", async ({ page }) => {
  await page.goto(`${process.env.E2E_ORIGIN}/index.html`);
  await expect(page.locator("#status")).toHaveText("ready");
  const message = await page.evaluate(() =>
    window.harness.start({ engine: "deterministic", baseUrl: "http://api.example/openai" }).then(
      () => "started",
      (error: Error) => error.message,
    ),
  );
  expect(message).toContain("must use https:");
});

test("one account filling storage is refused at its quota, with nothing half-written, while another account stores and chats", async ({
  page,
}) => {
  await openHarness(page, { engine: "deterministic" }, { creditUsd: 0, rpm: 1_000 });
  const result = await page.evaluate(async () => {
    const admin = window.harness.handle!.admin;
    await admin.setStorageQuota(window.harness.accountId, { bytes: 2_000_000 });
    const post = (path: string, body: unknown, key = window.harness.key) =>
      window.harness.fetch(path, {
        method: "POST",
        body: JSON.stringify(body),
        headers: { authorization: `Bearer ${key}` },
      });
    const conversation = (await (await post("/conversations", {})).json()) as { id: string };
    // 20 items of 38 kB a request, as the attack sent them (at a tenth of their size).
    const items = Array.from({ length: 20 }, (_, index) => ({
      role: "user",
      content: `${index} ${"x".repeat(38_000)}`,
    }));
    const statuses: number[] = [];
    for (let round = 0; round < 6; round++)
      statuses.push((await post(`/conversations/${conversation.id}/items`, { items })).status);
    const refused = (await (await post(`/conversations/${conversation.id}/items`, { items })).json()) as {
      error: { code: string };
    };
    const usage = await admin.storageUsage(window.harness.accountId);
    const listed = (await (await window.harness.fetch(`/conversations/${conversation.id}/items?limit=100`)).json()) as {
      data: unknown[];
    };
    const other = await admin.createAccount({ name: "neighbour", creditUsd: 1 });
    const { key } = await admin.createKey({ accountId: other.id });
    const chat = await post(
      "/chat/completions",
      { model: "gamma-7b-instruct-v0.3", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, store: true },
      key,
    );
    const freed = await admin.deleteStoredData(window.harness.accountId);
    return {
      statuses,
      code: refused.error.code,
      usage,
      listed: listed.data.length,
      chat: chat.status,
      neighbour: await admin.storageUsage(other.id),
      freed,
      after: await admin.storageUsage(window.harness.accountId),
    };
  });
  // 760 kB a round: two fit in 2 MB, and every later round is refused whole.
  expect(result.statuses).toEqual([200, 200, 403, 403, 403, 403]);
  expect(result.code).toBe("storage_quota_exceeded");
  expect(result.usage).toMatchObject({ items: 41, quota: { bytes: 2_000_000 } });
  expect(result.usage.bytes).toBeLessThanOrEqual(2_000_000);
  expect(result.listed).toBe(40);
  expect(result.chat).toBe(200);
  expect(result.neighbour.kinds.completions.items).toBe(1);
  expect(result.freed).toEqual({ bytes: result.usage.bytes, items: 41 });
  expect(result.after).toMatchObject({ bytes: 0, items: 0 });
});

/**
 * Remote routing in a real browser: the worker forwards to a real HTTP server on 127.0.0.1 that
 * speaks OpenAI's protocol, through the openai SDK in the page, with the same keys, headers and
 * ledger as a local model. The worker is the real-engine one (WebLLM on SwiftShader), so `auto`
 * decides on the real adapter: the 70B model needs shader-f16, which SwiftShader lacks.
 */
import type { Page } from "@playwright/test";
import { expect, openHarness, test } from "../support/browser.js";
import { startUpstream, type Upstream } from "../support/upstream.js";

const secret = "sk-upstream-secret-for-the-test";
let upstream: Upstream;
test.beforeAll(async () => {
  upstream = await startUpstream(secret);
});
test.afterAll(async () => upstream.close());

const messages = [{ role: "user" as const, content: "Say four words." }];

function upstreamsFor(modes: string[]) {
  return modes.map((mode) => ({
    name: mode,
    baseUrl: `${upstream.origin}/${mode}/v1`,
    model: `upstream-${mode}`,
    ...(mode === "ok" ? { credential: "lab" } : {}),
  }));
}

function remote(id: string, modes: string[]) {
  return {
    id,
    family: "llama3" as const,
    contextWindow: 8_192,
    price: { inputNanoUsdPerToken: 10, outputNanoUsdPerToken: 20 },
    routing: "remote" as const,
    upstreams: upstreamsFor(modes),
  };
}

async function open(page: Page) {
  await openHarness(page, {
    serviceWorkerUrl: "/real-engine-sw.js",
    engine: "webllm",
    models: [
      remote("remote-ok", ["ok"]),
      remote("remote-failover", ["fail", "ok"]),
      remote("remote-down", ["fail"]),
      remote("remote-nousage", ["nousage"]),
      remote("remote-slow", ["slow"]),
      remote("remote-nocors", ["nocors"]),
      remote("remote-moved", ["moved"]),
      remote("remote-llama", ["llama"]),
      remote("remote-ollama", ["ollama"]),
      { id: "alpha-3-70b-instruct", routing: "auto", upstreams: upstreamsFor(["ok"]) },
    ],
  });
  // The app hands the worker the upstream's secret once; page code never sends it again.
  await page.evaluate(
    ({ value, origin }) => window.harness.handle!.admin.setUpstreamCredential("lab", value, { origin }),
    { value: secret, origin: new URL(upstream.origin).origin },
  );
}

async function ledger(page: Page) {
  return page.evaluate(async () => ({
    account: (await window.harness.handle!.admin.getAccount(window.harness.accountId))!,
    entries: (await window.harness.handle!.admin.ledger({ accountId: window.harness.accountId })).filter(
      (entry) => entry.kind === "charge",
    ),
  }));
}

test("a remote model through the openai SDK: whole and streamed, with our headers, the upstream's usage, and the ledger", async ({
  page,
}) => {
  await open(page);
  upstream.calls.length = 0;
  const result = await page.evaluate(async (history) => {
    const client = window.harness.client();
    const { data: whole, response } = await client.chat.completions
      .create({ model: "remote-ok", messages: history, max_tokens: 32 })
      .withResponse();
    const headers = Object.fromEntries(
      ["x-inference-route", "x-inference-upstream", "x-ratelimit-remaining-requests", "x-request-id"].map((name) => [
        name,
        response.headers.get(name),
      ]),
    );
    const stream = await client.chat.completions.create({
      model: "remote-ok",
      messages: history,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = await window.harness.collect(stream);
    const info = await (await window.harness.fetch("/model/info?model=alpha-3-70b-instruct")).json();
    return { whole, headers, chunks, info };
  }, messages);
  expect(result.whole).toMatchObject({
    object: "chat.completion",
    model: "remote-ok",
    choices: [{ message: { content: "The quick brown fox" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 17, completion_tokens: 4, total_tokens: 21 },
  });
  expect(result.headers).toMatchObject({ "x-inference-route": "remote", "x-inference-upstream": "ok" });
  expect(Number(result.headers["x-ratelimit-remaining-requests"])).toBeGreaterThan(0);
  const text = result.chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
  expect(text).toBe("The quick brown fox");
  expect(result.chunks.every((chunk) => chunk.model === "remote-ok")).toBe(true);
  expect(result.chunks[0]?.choices[0]?.delta.role).toBe("assistant");
  expect(result.chunks.at(-1)).toMatchObject({
    choices: [],
    usage: { prompt_tokens: 17, completion_tokens: 4, total_tokens: 21 },
  });
  // The 70B model needs shader-f16; SwiftShader has none, so `auto` sends it upstream.
  expect(result.info.routing).toMatchObject({ policy: "auto", target: "remote", upstreams: ["ok"] });
  expect(result.info.routing.reason).toContain("shader-f16");

  expect(upstream.calls.map((call) => [call.mode, call.body.model, call.authorization])).toEqual([
    ["ok", "upstream-ok", `Bearer ${secret}`],
    ["ok", "upstream-ok", `Bearer ${secret}`],
  ]);
  expect(upstream.calls[1]!.body.stream_options).toEqual({ include_usage: true });
  const { account, entries } = await ledger(page);
  expect(
    entries.map((entry) => [
      entry.status,
      entry.model,
      entry.upstream,
      entry.promptTokens,
      entry.completionTokens,
      entry.amountNanoUsd,
    ]),
  ).toEqual([
    ["completed", "remote-ok", "ok", 17, 4, 17 * 10 + 4 * 20],
    ["completed", "remote-ok", "ok", 17, 4, 17 * 10 + 4 * 20],
  ]);
  expect(account.balanceNanoUsd).toBe(10_000_000_000 - 2 * (17 * 10 + 4 * 20));
  expect(account.reservedNanoUsd).toBe(0);
});

test("llama-server's ways, normalised to OpenAI's: a role in the first delta, no usage unasked, several prompts as one completion", async ({
  page,
}) => {
  await open(page);
  const result = await page.evaluate(async (history) => {
    const client = window.harness.client();
    const stream = await client.chat.completions.create({ model: "remote-llama", messages: history, stream: true });
    const chunks = await window.harness.collect(stream);
    const legacy = await client.completions.create({ model: "remote-llama", prompt: ["Once", "Twice"], max_tokens: 4 });
    return { chunks, legacy };
  }, messages);
  expect(result.chunks[0]?.choices[0]?.delta).toMatchObject({ role: "assistant", content: "The" });
  expect(result.chunks.slice(1).every((chunk) => chunk.choices[0]?.delta.role === undefined)).toBe(true);
  expect(result.chunks.every((chunk) => chunk.usage === undefined && chunk.choices.length === 1)).toBe(true);
  expect(result.legacy.choices.map((choice) => [choice.index, choice.text])).toEqual([
    [0, "The quick"],
    [1, "The quick brown"],
  ]);
  expect(result.legacy.usage).toEqual({ prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 });
  const { entries } = await ledger(page);
  // Newest first: the legacy completion, billed for both prompts, then the chat (usage sent unasked, still billed).
  expect(entries.map((entry) => [entry.model, entry.promptTokens, entry.completionTokens])).toEqual([
    ["remote-llama", 9, 5],
    ["remote-llama", 17, 4],
  ]);
});

test("several prompts in one legacy completion, streamed and not, against llama-server and Ollama (one prompt per call): every choice, one bill each", async ({
  page,
}) => {
  await open(page);
  const result = await page.evaluate(async () => {
    const client = window.harness.client();
    const out: Record<string, unknown> = {};
    for (const model of ["remote-llama", "remote-ollama"]) {
      const whole = await client.completions.create({ model, prompt: ["Once", "Twice", "Thrice"], max_tokens: 4 });
      const stream = await client.completions.create({
        model,
        prompt: ["Once", "Twice", "Thrice"],
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
      });
      const texts: string[] = [];
      let usage: unknown = null;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) texts[choice.index] = (texts[choice.index] ?? "") + choice.text;
        usage = chunk.usage ?? usage;
      }
      out[model] = {
        whole: { texts: whole.choices.map((choice) => [choice.index, choice.text]), usage: whole.usage },
        streamed: { texts, usage },
      };
    }
    return out;
  });
  // "Once" and "Thrice" have even lengths (two words), "Twice" odd (three); prompt_tokens is the length.
  const expected = {
    whole: {
      texts: [
        [0, "The quick"],
        [1, "The quick brown"],
        [2, "The quick"],
      ],
      usage: { prompt_tokens: 15, completion_tokens: 7, total_tokens: 22 },
    },
    streamed: {
      texts: ["The quick", "The quick brown", "The quick"],
      usage: { prompt_tokens: 15, completion_tokens: 7, total_tokens: 22 },
    },
  };
  expect(result).toEqual({ "remote-llama": expected, "remote-ollama": expected });
  // One upstream call per prompt, each prompt a string: what Ollama requires.
  const legacyCalls = upstream.calls.filter(
    (call) =>
      call.path === "/v1/completions" &&
      (call.mode === "ollama" || ["Once", "Twice", "Thrice"].includes(String(call.body.prompt))),
  );
  expect(legacyCalls.slice(-12).map((call) => [call.mode, call.body.prompt, call.body.stream === true])).toEqual(
    ["llama", "ollama"].flatMap((mode) =>
      [false, true].flatMap((stream) => ["Once", "Twice", "Thrice"].map((prompt) => [mode, prompt, stream])),
    ),
  );
  const { entries } = await ledger(page);
  expect(
    entries.slice(0, 4).map((entry) => [entry.model, entry.promptTokens, entry.completionTokens, entry.status]),
  ).toEqual([
    ["remote-ollama", 15, 7, "completed"],
    ["remote-ollama", 15, 7, "completed"],
    ["remote-llama", 15, 7, "completed"],
    ["remote-llama", 15, 7, "completed"],
  ]);
});

test("failover past an upstream 500, a 503 when none is left, a missing CORS header named, a redirect not followed, and none of them charged", async ({
  page,
}) => {
  await open(page);
  const result = await page.evaluate(async (history) => {
    const client = window.harness.client();
    const failedOver = await client.chat.completions.create({
      model: "remote-failover",
      messages: history,
      stream: true,
    });
    let text = "";
    for await (const chunk of failedOver) text += chunk.choices[0]?.delta.content ?? "";
    const attempt = async (model: string) => {
      try {
        await client.chat.completions.create({ model, messages: history });
        return null;
      } catch (error) {
        const apiError = error as { status: number; code: string; type: string; message: string };
        return { status: apiError.status, code: apiError.code, type: apiError.type, message: apiError.message };
      }
    };
    return {
      text,
      down: await attempt("remote-down"),
      nocors: await attempt("remote-nocors"),
      moved: await attempt("remote-moved"),
    };
  }, messages);
  expect(result.text).toBe("The quick brown fox");
  expect(result.down).toMatchObject({ status: 503, code: "upstream_unavailable", type: "service_unavailable" });
  expect(result.down?.message).toContain("fail: HTTP 500: the GPU fell off the bus");
  expect(result.nocors).toMatchObject({ status: 503, code: "upstream_unavailable" });
  expect(result.nocors?.message).toMatch(
    /nocors: could not reach http:\/\/127\.0\.0\.1:\d+ .*must allow cross-origin requests from http:\/\/localhost:\d+/,
  );
  // A prompt goes to the origin the app configured, and nowhere an upstream's redirect points.
  expect(result.moved).toMatchObject({ status: 503, code: "upstream_unavailable" });
  expect(result.moved?.message).toContain("a redirect is not followed");
  expect(upstream.calls.at(-1)?.mode).toBe("moved");
  const { account, entries } = await ledger(page);
  expect(entries.map((entry) => [entry.model, entry.status, entry.upstream ?? null, entry.amountNanoUsd])).toEqual([
    ["remote-moved", "failed", null, 0],
    ["remote-nocors", "failed", null, 0],
    ["remote-down", "failed", null, 0],
    ["remote-failover", "completed", "ok", 17 * 10 + 4 * 20],
  ]);
  expect(account.balanceNanoUsd).toBe(10_000_000_000 - (17 * 10 + 4 * 20));
  expect(account.reservedNanoUsd).toBe(0);
});

test("an upstream without usage is billed by our own count, marked as an estimate; an abort reaches the upstream and bills what streamed", async ({
  page,
}) => {
  await open(page);
  upstream.calls.length = 0;
  const result = await page.evaluate(async (history) => {
    const client = window.harness.client();
    const stream = await client.chat.completions.create({
      model: "remote-nousage",
      messages: history,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = await window.harness.collect(stream);
    const slow = await client.chat.completions.create({ model: "remote-slow", messages: history, stream: true });
    let received = 0;
    for await (const chunk of slow) {
      if (chunk.choices[0]?.delta.content) received++;
      if (received === 5) break;
    }
    return { usage: chunks.at(-1)?.usage, received };
  }, messages);
  expect(result.usage).toMatchObject({ completion_tokens: 4, estimated: true });
  expect(result.usage!.total_tokens).toBe(result.usage!.prompt_tokens + 4);

  // Breaking out of the SDK's stream aborts the fetch; the worker aborts its upstream fetch in turn.
  await expect.poll(() => upstream.calls.find((call) => call.mode === "slow")?.aborted, { timeout: 10_000 }).toBe(true);
  const slowCall = upstream.calls.find((call) => call.mode === "slow")!;
  expect(slowCall.sent).toBeLessThan(100);
  await expect.poll(async () => (await ledger(page)).entries.length, { timeout: 10_000 }).toBe(2);
  const { account, entries } = await ledger(page);
  const [aborted, estimated] = entries;
  expect(estimated).toMatchObject({
    model: "remote-nousage",
    status: "completed",
    completionTokens: 4,
    usageEstimated: true,
  });
  expect(aborted).toMatchObject({ model: "remote-slow", status: "aborted", usageEstimated: true });
  expect(aborted!.completionTokens).toBeGreaterThanOrEqual(5);
  expect(aborted!.completionTokens).toBeLessThan(200);
  expect(account.reservedNanoUsd).toBe(0);
});

/**
 * `npm start`'s relay: the demo server (scripts/serve-demo.mjs, as `npm start` runs it) hands
 * requests from curl and servers to an open tab, whose service worker answers them. Here curl runs
 * the new-key notice's own snippet, and the openai SDK runs in Node against the tab.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { writeFile } from "node:fs/promises";
import { promisify } from "node:util";
import OpenAI from "openai";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import type { Page } from "@playwright/test";
import { chatCompletionSchema } from "../../src/core/wire/chat-completion.js";
import { fileObjectSchema } from "../../src/core/wire/files.js";
import { expect, launchProfile, test } from "../support/browser.js";
// @ts-expect-error -- a plain ES module that generates the zod fixtures; its models are reused here
import { models as zodModels } from "../fixtures/schemas/zod-models.mjs";

const root = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/** The demo server on a free port, as `npm start` starts it once built. */
async function startDemoServer(): Promise<{ origin: string; process: ChildProcess }> {
  const server = spawn(process.execPath, [resolve(root, "scripts/serve-demo.mjs")], {
    env: { ...process.env, PORT: "0" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const origin = await new Promise<string>((done, fail) => {
    let output = "";
    server.stdout!.on("data", (chunk: Buffer) => {
      output += String(chunk);
      const found = output.match(/demo: (http:\/\/localhost:\d+)\//);
      if (found) done(found[1]!);
    });
    server.once("exit", (code) => fail(new Error(`the demo server exited (${code}): ${output}`)));
  });
  return { origin, process: server };
}

test("curl and a server's openai SDK reach the API in an open tab through npm start's relay, and hear plainly when no tab is open", async () => {
  const server = await startDemoServer();
  const profile = await launchProfile();
  try {
    const baseURL = `${server.origin}/openai/v1`;
    const closed = await fetch(`${baseURL}/models`);
    expect(closed.status).toBe(503);
    expect(((await closed.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "no_open_tab",
      message: expect.stringContaining(`open ${server.origin}/`),
    });

    // The page and its worker script are served under the demo's Content Security Policy, and the
    // demo runs under it (the chat below).
    for (const path of ["/", "/sw.js"]) {
      const policy = (await fetch(`${server.origin}${path}`)).headers.get("content-security-policy") ?? "";
      for (const directive of [
        "img-src 'self' data: blob:",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "connect-src 'self'",
      ])
        expect(policy).toContain(directive);
    }
    const page: Page = profile.context.pages()[0] ?? (await profile.context.newPage());
    const violations: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${server.origin}/?engine=deterministic&delay=50`);
    await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
    await page.getByRole("tab", { name: "Keys & usage" }).click();
    await page.getByLabel("Name").fill("relay");
    await page.getByRole("button", { name: "Create key" }).click();
    await expect(page.locator("#new-key-value")).toHaveText(/^sk-/);
    const key = (await page.locator("#new-key-value").textContent())!;
    await expect(page.locator("#new-key-reach")).toContainText("through the demo server's relay");
    const curl = page
      .locator(".snippet")
      .filter({ has: page.getByRole("heading", { name: "curl" }) })
      .locator("code");
    await expect(curl).toContainText(`curl ${baseURL}/chat/completions`);
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page
        .locator("#new-key")
        .screenshot({ path: test.info().outputPath(`demo-keys-new-key-relayed-${width}.png`) });
    }

    // The notice's curl snippet, run as a person pastes it into a shell.
    const { stdout } = await run("bash", ["-c", `${await curl.textContent()} --silent --show-error`]).catch(
      (error: Error) => {
        throw new Error(`curl failed (the browser tests need curl: apt-get install curl): ${error.message}`);
      },
    );
    const viaCurl = chatCompletionSchema.parse(JSON.parse(stdout));
    expect(viaCurl.choices[0]?.message.content).toMatch(/\S/);

    // The openai SDK in Node, whole and streamed, with the worker's headers passed through.
    const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
    const { data: completion, response } = await client.chat.completions
      .create({ model: "beta-2-9b-it", messages: [{ role: "user", content: "Hello from Node" }], max_tokens: 8 })
      .withResponse();
    expect(completion.usage?.completion_tokens).toBe(8);
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("60");
    expect(response.headers.get("x-request-id")).toMatch(/^req_/);
    let streamed = "";
    for await (const chunk of await client.chat.completions.create({
      model: "beta-2-9b-it",
      messages: [{ role: "user", content: "Stream it" }],
      max_tokens: 8,
      stream: true,
    }))
      streamed += chunk.choices[0]?.delta.content ?? "";
    expect(streamed).toMatch(/\S/);
    expect((await client.models.list()).data.map((model) => model.id)).toContain("alpha3:8b-instruct-q8_0");

    // Embeddings from the seed's embedding models: base64 (the SDK's default, decoded by it) and float.
    const embedded = await client.embeddings.create({
      model: "nomic-embed-text-v1.5",
      input: ["search_query: a red apple", "search_document: apples are red"],
      dimensions: 256,
    });
    expect(embedded.data.map((item) => item.embedding.length)).toEqual([256, 256]);
    const floats = await client.embeddings.create({
      model: "snowflake-arctic-embed-s",
      input: "a red apple",
      encoding_format: "float",
    });
    expect(floats.data[0]?.embedding).toHaveLength(384);
    expect(Math.hypot(...floats.data[0]!.embedding)).toBeCloseTo(1, 5);

    // Structured outputs as a server app writes them: zod models through the SDK's own helpers.
    const { Event, Invoice } = zodModels as Record<string, Parameters<typeof zodResponseFormat>[0]>;
    const parsed = await client.chat.completions.parse({
      model: "alpha3:8b-instruct-q8_0",
      messages: [{ role: "user", content: "Plan an event" }],
      response_format: zodResponseFormat(Event!, "event"),
    });
    expect(parsed.choices[0]?.message.parsed).toMatchObject({ startsAt: expect.stringMatching(/Z$/) });
    const called = await client.chat.completions.parse({
      model: "gamma-7b-instruct-v0.3",
      messages: [{ role: "user", content: "Record an invoice" }],
      tools: [zodFunction({ name: "record_invoice", parameters: Invoice! })],
      tool_choice: "required",
    });
    expect(called.choices[0]?.message.tool_calls?.[0]?.function.parsed_arguments).toMatchObject({
      number: expect.stringMatching(/^INV-\d{6}$/),
    });
    const refused = await fetch(`${baseURL}/models`, { headers: { authorization: "Bearer sk-not-a-key" } });
    expect(refused.status).toBe(401);

    // A file uploaded by curl's form comes back byte for byte, whatever its bytes.
    const bytes = Buffer.from([0x25, 0x50, 0x44, 0x46, 0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a]);
    const path = test.info().outputPath("report.pdf");
    await writeFile(path, bytes);
    const uploaded = await run("curl", [
      "--silent",
      "--show-error",
      `${baseURL}/files`,
      ...["-H", `Authorization: Bearer ${key}`, "-F", "purpose=assistants", "-F", `file=@${path}`],
    ]);
    const file = fileObjectSchema.parse(JSON.parse(uploaded.stdout));
    expect(file).toMatchObject({ filename: "report.pdf", bytes: bytes.length, purpose: "assistants" });
    const content = await client.files.content(file.id);
    expect(Buffer.from(await content.arrayBuffer())).toEqual(bytes);
    expect((await client.files.delete(file.id)).deleted).toBe(true);

    // A client that goes away stops its generation in the tab, which bills what streamed.
    const abort = new AbortController();
    const long = await client.chat.completions.create(
      { model: "beta-2-9b-it", messages: [{ role: "user", content: "A long story" }], max_tokens: 400, stream: true },
      { signal: abort.signal },
    );
    for await (const _chunk of long) break;
    abort.abort();
    await page.getByRole("tab", { name: "Keys & usage" }).click();
    const rows = page.locator("#ledger-table tbody tr").filter({ hasText: "relay (" });
    await expect(rows.filter({ hasText: "aborted" })).toHaveCount(1, { timeout: 10_000 });
    await expect(rows.filter({ hasText: "completed" })).toHaveCount(7);
    expect(violations).toEqual([]);

    await page.close();
    await expect
      .poll(async () => (await fetch(`${baseURL}/models`, { headers: { authorization: `Bearer ${key}` } })).status)
      .toBe(503);
  } finally {
    await profile.dispose();
    server.process.kill();
  }
});

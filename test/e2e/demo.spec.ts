/**
 * The demo that `npm start` serves, as a person uses it, on the deterministic engine: keys,
 * a streamed chat, stopping a reply, the ledger and the chart, working offline, and the views at
 * phone and desktop widths (screenshots are saved as test artifacts).
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Page } from "@playwright/test";
import { expect, launchProfile, noGpuArgs, origin, test } from "./harness.js";

async function openDemo(page: Page, delay = 30): Promise<string[]> {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${origin()}/demo/index.html?engine=deterministic&delay=${delay}`);
  await expect(page.locator("#status")).toHaveText("Ready.", { timeout: 30_000 });
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
  await page.getByRole("button", { name: "Keys & usage" }).click();
  await page.getByLabel("Name").fill("e2e");
  await page.getByRole("button", { name: "Create key" }).click();
  await expect(page.locator("#new-key-value")).toHaveText(/^sk-[A-Za-z0-9_-]{43}$/);
  await expect(page.locator("#keys-table tbody tr")).toHaveCount(2);
  await expect(page.locator("#keys-table tbody")).toContainText("(chat)");

  await page.getByRole("button", { name: "Chat" }).click();
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
  await page.getByRole("button", { name: "Stop" }).click();
  await expect(stopped.locator(".stats")).toHaveText("Stopped.");

  await page.getByRole("button", { name: "Keys & usage" }).click();
  const rows = page.locator("#ledger-table tbody tr");
  await expect(rows.filter({ hasText: "aborted" })).toHaveCount(1, { timeout: 10_000 });
  await expect(rows.filter({ hasText: "completed" }).filter({ hasText: "beta-2-9b-it" })).toHaveCount(1);
  await expect(page.locator("#chart svg rect").first()).toBeVisible();
  await expect(page.locator("#rate-state")).toContainText("Requests:");
  await page.locator("#filter-model").selectOption("beta-2-9b-it");
  await expect(rows.filter({ hasText: "credit" })).toHaveCount(0);
  expect(errors).toEqual([]);

  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    for (const view of ["Chat", "Models", "Keys & usage"]) {
      await page.getByRole("button", { name: view }).click();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect({ width, view, overflow }).toEqual({ width, view, overflow: 0 });
      await page.screenshot({ path: test.info().outputPath(`demo-${view.split(" ")[0]!.toLowerCase()}-${width}.png`), fullPage: true });
    }
  }
});

test("after one visit the demo reloads and chats with the network off", async ({ context, page }) => {
  await openDemo(page, 0);
  await chat(page, "Hello while online.");
  await context.setOffline(true);
  // The browser stops idle workers: the reload wakes a fresh one, which must serve the shell
  // from its cache while it is still reading its stored configuration.
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  await cdp.send("ServiceWorker.stopAllWorkers");
  await page.reload();
  await expect(page.locator("#status")).toHaveText("Ready.", { timeout: 30_000 });
  // The conversation is kept locally, and a new reply still streams in.
  await expect(page.locator("#conversation li.user").first()).toHaveText("Hello while online.");
  const reply = await chat(page, "Hello while offline.");
  expect((await reply.locator(".body").textContent())?.length).toBeGreaterThan(10);
  await context.setOffline(false);
});

test("the models view lists the catalogue with windows, prices and what this device can run", async ({ page }) => {
  await openDemo(page);
  await page.getByRole("button", { name: "Models" }).click();
  const rows = page.locator("#models-table tbody tr");
  // The four seed models, and the demo's own small model for the CPU.
  await expect(rows).toHaveCount(5);
  await expect(rows.first()).toContainText("alpha3:8b-instruct-q8_0");
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
        const labelled = (control as HTMLInputElement).labels?.length || control.getAttribute("aria-label") || (control.tagName === "BUTTON" && control.textContent?.trim());
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
  expect(order).toEqual(["tab-chat", "tab-models", "tab-keys", "engine", "model", "temperature"]);
  await page.getByRole("textbox", { name: "Message", exact: true }).focus();
  await page.keyboard.type("Sent with the keyboard.");
  await page.keyboard.press("Enter");
  await expect(page.locator("#conversation li.user").last()).toHaveText("Sent with the keyboard.");
});

test("failures a person can meet are plain sentences: a revoked key, a rate limit, no WebGPU", async ({ context, page }) => {
  await openDemo(page, 0);
  await page.getByRole("button", { name: "Keys & usage" }).click();
  const chatKeyRow = page.locator("#keys-table tbody tr").filter({ hasText: "(chat)" });
  await chatKeyRow.getByRole("spinbutton", { name: /Requests per minute/ }).fill("1");
  await chatKeyRow.getByRole("button", { name: "Save" }).click();
  await expect(chatKeyRow.getByRole("spinbutton", { name: /Requests per minute/ })).toHaveValue("1");

  // Start-up already spent this minute's window (the model list and model info), so the next request is refused.
  await page.getByRole("button", { name: "Chat" }).click();
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Two.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  await expect(page.locator("#conversation li.assistant").last().locator(".stats")).toContainText("Too many requests or tokens for this key this minute");

  await page.getByRole("button", { name: "Keys & usage" }).click();
  await chatKeyRow.getByRole("button", { name: "Revoke" }).click();
  await expect(page.locator("#keys-table tbody tr").filter({ hasText: "(chat)" })).toContainText("revoked");
  await page.getByRole("button", { name: "Chat" }).click();
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Three.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  await expect(page.locator("#conversation li.assistant").last().locator(".stats")).toHaveText(
    "This API key was refused: it is missing, unknown or revoked. Create or pick one under Keys & usage.",
  );

  // One configuration serves every tab: this tab (deterministic) goes before one starts under auto.
  await page.close();
  const noGpu = await context.newPage();
  await noGpu.addInitScript(() => {
    delete (Navigator.prototype as { gpu?: unknown }).gpu;
  });
  await noGpu.goto(`${origin()}/demo/index.html`);
  await expect(noGpu.locator("#engine")).toHaveValue("auto");
  await expect(noGpu.locator("#banner")).toContainText("No model runs on a GPU here (this browser has no WebGPU). Models run on the CPU with llama.cpp instead", { timeout: 30_000 });
  await expect(noGpu.locator("#model")).toHaveValue("qwen2.5-0.5b-instruct");
});

test("a balance that cannot cover the reply is a plain sentence, and crediting the account fixes it", async ({ page }) => {
  await page.goto(`${origin()}/demo/index.html?engine=deterministic&config=/demo/premium-config.json`);
  await expect(page.locator("#status")).toHaveText("Ready.", { timeout: 30_000 });
  await page.locator("#model").selectOption("premium-9b");
  await page.getByLabel("Max tokens").fill("8");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Hello.");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  await expect(page.locator("#conversation li.assistant").last().locator(".stats")).toHaveText(
    "The account's balance cannot cover this request. Add credit under Keys & usage.",
  );

  // Eight output tokens at $1 each, plus the prompt: $10 more covers it.
  await page.getByRole("button", { name: "Keys & usage" }).click();
  await page.getByLabel("Add USD").fill("10");
  await page.getByRole("button", { name: "Add credit" }).click();
  await expect(page.locator("#balance")).toContainText("Balance $11");
  await page.getByRole("button", { name: "Chat" }).click();
  const reply = await chat(page, "Hello again.");
  await expect(reply.locator(".stats")).toContainText("$");
});

test("a new version of the worker is announced, and Reload takes it", async ({ page }) => {
  await openDemo(page, 0);
  await expect(page.locator("#banner")).toBeHidden();
  // A deployment ships a changed worker script; the browser finds it on the next visit.
  const override = resolve(import.meta.dirname, "../../.cache/e2e/demo/sw.js");
  writeFileSync(override, `${readFileSync(resolve(import.meta.dirname, "../../dist/demo/sw.js"), "utf8")}\n// the next version\n`);
  try {
    await page.reload();
    await expect(page.locator("#banner")).toContainText("A new version of this app has taken over.", { timeout: 30_000 });
    await page.locator("#banner").getByRole("button", { name: "Reload" }).click();
    await expect(page.locator("#status")).toHaveText("Ready.", { timeout: 30_000 });
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
    await expect(page.locator("#banner")).toContainText("No model runs on a GPU here (WebGPU gives no adapter here). Models run on the CPU with llama.cpp instead", { timeout: 30_000 });
    await expect(page.locator("#model")).toHaveValue("qwen2.5-0.5b-instruct");
    await page.getByRole("button", { name: "Models" }).click();
    await expect(page.locator("#models-table tbody tr").filter({ hasText: "qwen2.5-0.5b-instruct" })).toContainText("Runs here on the CPU (llama.cpp)");
    await page.getByRole("button", { name: "Chat" }).click();
    await page.getByLabel("Max tokens").fill("4");
    const online = await chat(page, "Hello on the CPU.");
    await expect(online.locator(".stats")).toContainText("4 tokens");

    await profile.context.setOffline(true);
    const cdp = await profile.context.newCDPSession(page);
    await cdp.send("ServiceWorker.enable");
    await cdp.send("ServiceWorker.stopAllWorkers");
    await page.reload();
    await expect(page.locator("#status")).toContainText("Ready.", { timeout: 30_000 });
    await page.getByLabel("Max tokens").fill("4");
    const offline = await chat(page, "Hello offline.");
    await expect(offline.locator(".stats")).toContainText("4 tokens");
  } finally {
    await profile.dispose();
  }
});

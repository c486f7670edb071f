/**
 * The demo that `npm start` serves: a person picks a catalogue model and chats; the reply
 * streams in through the openai SDK and the service worker.
 */
import { expect, origin, test } from "./harness.js";

test("the demo chats with a catalogue model and shows usage", async ({ page }) => {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${origin()}/demo/index.html?engine=deterministic`);
  await expect(page.locator("#status")).toHaveText("Ready.");
  await expect(page.locator("#model option")).toHaveCount(4);
  await page.locator("#model").selectOption("beta-2-9b-it");
  await page.locator("#prompt").fill("What can you do offline?");
  await page.locator("#prompt").press("Enter");
  await expect(page.locator("#conversation li.user")).toHaveText("What can you do offline?");
  const reply = page.locator("#conversation li.assistant").first();
  await expect(reply.locator(".stats")).toContainText("tokens", { timeout: 20_000 });
  await expect(reply.locator(".stats")).toContainText("TTFT");
  expect((await reply.locator(".body").textContent())?.length).toBeGreaterThan(10);
  await page.screenshot({ path: test.info().outputPath("demo-chat.png"), fullPage: true });
  expect(errors).toEqual([]);
});

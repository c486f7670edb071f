/**
 * The demo on a real WebLLM engine (web-llm 0.2.79 and the random-weight test model): download
 * the model from the Models view with a real progress bar, then chat with it.
 */
import { expect, origin, test } from "./harness.js";
import { testModelId } from "./test-model.js";

test("real-engine smoke: download with progress, then a streamed reply", async ({ page }) => {
  test.setTimeout(900_000);
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${origin()}/demo/index.html?engine=webllm&config=/demo/real-config.json`);
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 60_000 });

  await page.getByRole("button", { name: "Models" }).click();
  const row = page.locator("#models-table tbody tr").filter({ hasText: testModelId });
  await expect(row).toContainText("Runs here");
  await row.getByRole("button", { name: "Download" }).click();
  const progress = row.locator(".progress-text");
  await expect(progress).toContainText("%", { timeout: 60_000 });
  await page.screenshot({ path: test.info().outputPath("demo-models-downloading-1280.png"), fullPage: true });
  await expect(row.getByRole("button", { name: "Delete" })).toBeVisible({ timeout: 600_000 });
  await expect(row).toContainText("loaded");

  await page.getByRole("button", { name: "Chat" }).click();
  await page.locator("#model").selectOption(testModelId);
  await page.getByLabel("Max tokens").fill("1");
  await page.getByLabel("Temperature").fill("0");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Hi");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const reply = page.locator("#conversation li.assistant").last();
  await expect(reply.locator(".stats")).toContainText("+ 1 tokens", { timeout: 600_000 });
  expect(errors).toEqual([]);
});

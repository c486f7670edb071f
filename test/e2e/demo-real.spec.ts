/**
 * The demo on a real WebLLM engine (web-llm 0.2.79 and the random-weight test model): what this
 * device cannot run, a download cut off halfway and resumed, a chat, and deleting the model.
 */
import { expect, origin, test } from "../support/browser.js";
import { testModelId } from "../support/test-model.js";

async function server(path: string, body?: string): Promise<Response> {
  return fetch(`${origin()}/__server/${path}`, body === undefined ? {} : { method: "POST", body });
}

test("real-engine smoke: a model too big, a failed download resumed, a streamed reply, and Delete", async ({
  page,
}) => {
  // Two downloads of the model, and a streamed reply on SwiftShader.
  test.setTimeout(240_000);
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await server("faults", "on");
  // The test server lives for the whole run, so its counts are compared with their values here.
  const requestsBefore = (await (await server("requests")).json()) as Record<string, number>;
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${origin()}/demo/index.html?engine=webllm&config=/demo/real-config.json`);
  await expect(page.locator("#status")).toContainText("Ready.", { timeout: 60_000 });

  await page.getByRole("tab", { name: "Models" }).click();
  // The configuration gives this device 4 GB for a model, which Gemma 2 9B's f32 build exceeds;
  // the 70B model has no build without shader-f16, which SwiftShader lacks.
  const gemma = page.locator("#models-table tbody tr").filter({ hasText: "beta-2-9b-it" });
  await expect(gemma).toContainText(
    /Cannot run here\s*gemma-2-9b-it-q4f32_1-MLC needs about 11071 MB of GPU memory at its 8192-token context window; this device offers about 4096 MB/,
  );
  await expect(gemma.getByRole("button")).toHaveCount(0);
  await expect(page.locator("#models-table tbody tr").filter({ hasText: "alpha-3-70b-instruct" })).toContainText(
    "needs WebGPU feature(s) this adapter lacks: shader-f16",
  );
  await expect(page.locator("#model option[value='beta-2-9b-it']")).toBeDisabled();

  // The server cuts one weight shard halfway: the download fails, and Retry resumes it.
  const row = page.locator("#models-table tbody tr").filter({ hasText: testModelId });
  await expect(row).toContainText("GPU (WebLLM)");
  await row.getByRole("button", { name: "Download" }).click();
  // Said plainly, and true about what was kept: the shards finished before the cut.
  await expect(row.locator(".progress-text.error")).toContainText(
    "The finished parts are kept: Retry resumes from there.",
    { timeout: 120_000 },
  );
  await expect(row.locator("progress")).toHaveCount(0);
  await page.screenshot({ path: test.info().outputPath("demo-models-download-failed-1280.png"), fullPage: true });
  await server("faults", "off");
  await row.getByRole("button", { name: /Retry/ }).click();
  await expect(row.locator(".progress-text")).toContainText("%", { timeout: 60_000 });
  await expect(row.getByRole("button", { name: "Delete" })).toBeVisible({ timeout: 180_000 });
  await expect(row).toContainText("Loaded");
  const requestsAfter = (await (await server("requests")).json()) as Record<string, number>;
  const requests = Object.fromEntries(
    Object.entries(requestsAfter).map(([path, count]) => [path, count - (requestsBefore[path] ?? 0)]),
  );
  const shards = Object.entries(requests).filter(([path]) =>
    path.startsWith("/flaky-model/resolve/main/params_shard_"),
  );
  // The cut shard was fetched twice; the shards finished before the cut were not fetched again.
  expect(requests["/flaky-model/resolve/main/params_shard_3.bin"]).toBe(2);
  expect(shards.filter(([, count]) => count === 1).length).toBeGreaterThan(0);

  await page.getByRole("tab", { name: "Chat" }).click();
  await page.locator("#model").selectOption(testModelId);
  await page.getByLabel("Max tokens").fill("1");
  await page.getByLabel("Temperature").fill("0");
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("Hi");
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const reply = page.locator("#conversation li.assistant").last();
  await expect(reply.locator(".stats")).toContainText("+ 1 tokens", { timeout: 180_000 });

  // Delete frees the cache: the row offers a download again.
  await page.getByRole("tab", { name: "Models" }).click();
  const storageBefore = await page.evaluate(async () => (await navigator.storage.estimate()).usage ?? 0);
  await row.getByRole("button", { name: "Delete" }).click();
  await expect(row.getByRole("button", { name: "Download" })).toBeVisible({ timeout: 60_000 });
  await expect(row).not.toContainText("Downloaded");
  const storageAfter = await page.evaluate(async () => (await navigator.storage.estimate()).usage ?? 0);
  expect(storageAfter).toBeLessThan(storageBefore);
  expect(errors).toEqual([]);
});

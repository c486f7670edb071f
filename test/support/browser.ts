import { chromium, test as base, expect, type BrowserContext, type Page } from "@playwright/test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
// @ts-expect-error: a plain JavaScript module, shared with the benchmark
import { chromiumArgs, chromiumPath } from "../../scripts/chromium.mjs";
import type { StartInferenceOptions } from "../../src/index.js";
import type { AccountSetup } from "../e2e/fixtures/main.js";

export const origin = () => {
  const value = process.env.E2E_ORIGIN;
  if (!value) throw new Error("E2E_ORIGIN is not set: the global setup did not run");
  return value;
};

const executablePath: string = chromiumPath;

/** Chromium refuses service workers in Playwright's off-the-record contexts, so every test gets a fresh on-disk profile. */
export async function launchProfile(
  args: readonly string[] = chromiumArgs,
): Promise<{ context: BrowserContext; dispose(): Promise<void> }> {
  const directory = mkdtempSync(join(tmpdir(), "webgpu-inference-profile-"));
  const context = await chromium.launchPersistentContext(directory, {
    executablePath,
    args: [...args],
    headless: true,
  });
  return {
    context,
    async dispose() {
      await context.close().catch(() => undefined);
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

export const test = base.extend({
  // eslint-disable-next-line no-empty-pattern -- Playwright reads a fixture's dependencies from its first parameter's pattern: none.
  context: async ({}, use) => {
    const profile = await launchProfile();
    await use(profile.context);
    await profile.dispose();
  },
  page: async ({ context }, use) => {
    await use(context.pages()[0] ?? (await context.newPage()));
  },
});

/** Opens the harness page and starts the ready-made worker with `options`. */
export async function openHarness(
  page: Page,
  options: StartInferenceOptions = { engine: "deterministic" },
  account: AccountSetup | null = {},
): Promise<{ baseURL: string; key: string; accountId: string; keyId: string }> {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${origin()}/index.html`);
  await expect(page.locator("#status")).toHaveText("ready");
  const started = await page.evaluate(([startOptions, setup]) => window.harness.start(startOptions, setup), [
    options,
    account,
  ] as const);
  expect(errors).toEqual([]);
  return started;
}

/** Chromium without `--enable-unsafe-webgpu` here: `navigator.gpu` is there but gives no adapter, as on a device without a usable GPU. */
export const noGpuArgs: readonly string[] = (chromiumArgs as string[]).filter(
  (flag) => flag !== "--enable-unsafe-webgpu",
);

export { expect };

import { defineConfig } from "@playwright/test";

// @ts-expect-error: a plain JavaScript module, shared with the benchmark
import { chromiumArgs, chromiumPath } from "./scripts/chromium.mjs";

export default defineConfig({
  testDir: "test/e2e",
  testMatch: /.*\.spec\.ts$/,
  globalSetup: "./test/e2e/global-setup.ts",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"], ["json", { outputFile: ".cache/reports/e2e.json" }]],
  // Each test within a minute unless it says otherwise (the real engines, near their measured
  // need), and the whole suite within 70 minutes, under CI's 90 with its install and unit tests
  // (a clean run on the slowest machine yet took 54.8 minutes for its 98 tests, the real-engine
  // tier's tool call 24.5 of them): a hang fails by name.
  timeout: 60_000,
  globalTimeout: 70 * 60_000,
  outputDir: "test-results",
  use: {
    headless: true,
    launchOptions: { executablePath: chromiumPath, args: chromiumArgs },
  },
});

import { defineConfig } from "@playwright/test";

// @ts-expect-error: a plain JavaScript module, shared with the benchmark
import { chromiumArgs, chromiumPath } from "./scripts/chromium.mjs";

/**
 * The specs of the full run (`npm run test:full`): web-llm on SwiftShader, where a forward pass
 * is slow, the benchmark's quick mode, fresh Vite apps built from the packed package, and
 * llama.cpp's Memory64 build on a model past 4 GB. Every other spec is the gate (`npm test`):
 * the deterministic engine and llama.cpp.
 */
const fullRun = /(real-engine|demo-real|bench|fresh-app|memory64)\.spec\.ts$/;

export default defineConfig({
  testDir: "test/e2e",
  testMatch: /.*\.spec\.ts$/,
  globalSetup: "./test/support/browser-setup.ts",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"], ["json", { outputFile: ".cache/reports/e2e.json" }]],
  // Each test within a minute unless it says otherwise (the real engines, near their need), and a
  // run within 60 minutes (the full run's specs take most of it): a hang fails by name.
  timeout: 60_000,
  globalTimeout: 60 * 60_000,
  projects: [
    { name: "gate", testIgnore: fullRun },
    { name: "full", testMatch: fullRun },
  ],
  outputDir: "test-results",
  use: {
    headless: true,
    launchOptions: { executablePath: chromiumPath, args: chromiumArgs },
  },
});

import { defineConfig } from "@playwright/test";

/** Debian's Chromium, WebGPU through SwiftShader; see DEVELOPERS.md for why each flag is here. */
export const chromiumArgs = [
  "--no-sandbox",
  "--enable-unsafe-webgpu",
  "--disable-gpu-watchdog",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
  "--no-first-run",
];

export default defineConfig({
  testDir: "test/e2e",
  testMatch: /.*\.spec\.ts$/,
  globalSetup: "./test/e2e/global-setup.ts",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"], ["json", { outputFile: ".cache/reports/e2e.json" }]],
  timeout: 60_000,
  outputDir: "test-results",
  use: {
    headless: true,
    launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: chromiumArgs },
  },
});

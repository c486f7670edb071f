import { defineConfig } from "@playwright/test";
import base from "./playwright.config.js";

/**
 * `npm run test:peer`: the remote path against a real llama-server (test/peer/), apart from `npm
 * test` because the server is built first (about ten minutes on two cores, once). The same global
 * set-up and browser as the browser tests.
 */
export default defineConfig({
  ...base,
  testDir: "test/peer",
  projects: [{ name: "peer" }],
  // Each test within a minute, as the browser tests; the set-up may build the server.
  globalTimeout: 30 * 60_000,
  reporter: [["list"]],
});

import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    environment: "node",
    globalSetup: ["test/support/unit-setup.ts"],
    testTimeout: 20_000,
    reporters: ["default", "json"],
    outputFile: { json: ".cache/reports/unit.json" },
  },
});

/**
 * Serves the built library, the test pages and the generated test model on localhost for the
 * whole run. The origin is handed to the specs in E2E_ORIGIN.
 */
import { existsSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
// @ts-expect-error: a plain JavaScript build script
import { buildTestModel } from "../../scripts/test-model.mjs";
// @ts-expect-error: a plain JavaScript script
import { startStaticServer } from "../../scripts/static-server.mjs";
import { testModelEntry } from "./test-model.js";

const root = resolve(import.meta.dirname, "../..");

export default async function globalSetup(): Promise<() => Promise<void>> {
  for (const required of ["dist/inference-sw.js", "dist/tokenizers/qwen2/tokenizer.json", ".cache/e2e/index.html", ".cache/e2e/real-engine-sw.js", ".cache/e2e/demo/real-sw.js", "dist/demo/index.html"]) {
    if (!existsSync(resolve(root, required))) throw new Error(`${required} is missing: run 'npm test', which builds it first.`);
  }
  await buildTestModel(resolve(root, ".cache/test-model"));
  const server = await startStaticServer([
    { prefix: "/test-model/resolve/main/", directory: resolve(root, ".cache/test-model/model") },
    { prefix: "/test-model/lib/", directory: resolve(root, ".cache/test-model/lib") },
    { prefix: "/", directory: resolve(root, ".cache/e2e") },
    { prefix: "/", directory: resolve(root, "dist") },
  ]);
  process.env.E2E_ORIGIN = server.origin;
  // The demo, pointed at the test model and at its worker built on web-llm 0.2.79.
  writeFileSync(
    resolve(root, ".cache/e2e/demo/real-config.json"),
    JSON.stringify({ serviceWorkerUrl: "/demo/real-sw.js", scope: "/demo/", models: [testModelEntry(server.origin)] }),
  );
  return () => server.close();
}

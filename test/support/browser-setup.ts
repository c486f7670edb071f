/**
 * Serves the built library, the test pages and the generated test model on localhost for the
 * whole run. The origin is handed to the specs in E2E_ORIGIN.
 */
import { existsSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
// @ts-expect-error: a plain JavaScript build script
import { buildTestModel } from "../../scripts/test-model.mjs";
// @ts-expect-error: a plain JavaScript build script
import { buildTestGguf, testGgufFiles } from "../../scripts/test-gguf.mjs";
// @ts-expect-error: a plain JavaScript script
import { startStaticServer } from "../../scripts/static-server.mjs";
// @ts-expect-error: a plain JavaScript script
import { demoHeaders } from "../../scripts/demo-headers.mjs";
import { seedCatalogue } from "../../src/catalogue/seed.js";
import { testGgufEntry, testModelEntry } from "./test-model.js";

const root = resolve(import.meta.dirname, "../..");

export default async function globalSetup(): Promise<() => Promise<void>> {
  for (const required of [
    "dist/inference-sw.js",
    "dist/tokenizers/qwen2.json.gz",
    ".cache/e2e/index.html",
    ".cache/e2e/real-engine-sw.js",
    ".cache/e2e/demo/real-sw.js",
    "dist/demo/index.html",
  ]) {
    if (!existsSync(resolve(root, required)))
      throw new Error(`${required} is missing: run 'npm test', which builds it first.`);
  }
  await buildTestModel(resolve(root, ".cache/test-model"));
  buildTestGguf(resolve(root, ".cache/test-gguf"));
  buildTestGguf(resolve(root, ".cache/test-gguf"), "embed-bert-mean");
  buildTestGguf(resolve(root, ".cache/test-gguf"), "test-q4_0");
  buildTestGguf(resolve(root, ".cache/test-gguf"), "test-q5_0");
  buildTestGguf(resolve(root, ".cache/test-gguf"), "test-q4_k_m");
  const server = await startStaticServer(
    [
      { prefix: "/test-model/resolve/main/", directory: resolve(root, ".cache/test-model/model") },
      // The same weights again, for the demo: one shard is cut halfway until a test switches faults off.
      {
        prefix: "/flaky-model/resolve/main/",
        directory: resolve(root, ".cache/test-model/model"),
        interrupt: /params_shard_3\.bin$/,
      },
      { prefix: "/test-model/lib/", directory: resolve(root, ".cache/test-model/lib") },
      { prefix: "/test-gguf/", directory: resolve(root, ".cache/test-gguf") },
      // The same GGUF at another URL: a file the browser's cache has never seen.
      { prefix: "/test-gguf-copy/", directory: resolve(root, ".cache/test-gguf") },
      // Two more, for a pinned hash that matches and one that does not (a download each).
      { prefix: "/test-gguf-pinned/", directory: resolve(root, ".cache/test-gguf") },
      { prefix: "/test-gguf-tampered/", directory: resolve(root, ".cache/test-gguf") },
      // And one for a download the browser has no room to keep.
      { prefix: "/test-gguf-roomless/", directory: resolve(root, ".cache/test-gguf") },
      // The GGUF past 4 GB, for the Memory64 spec: made in memory when first asked for, never
      // written to disk (only the browser's copy takes the disk's room).
      { prefix: "/test-gguf-big/", generate: () => testGgufFiles("big-q4_0") },
      // The demo's page and worker script under the Content Security Policy `npm start` serves them
      // with (the test's own demo files first: a test ships a changed worker there).
      { prefix: "/demo/", directory: resolve(root, ".cache/e2e/demo"), headers: demoHeaders },
      { prefix: "/demo/", directory: resolve(root, "dist/demo"), headers: demoHeaders },
      // axe-core, which a test injects into the demo: from this origin, as the demo's policy allows scripts.
      { prefix: "/axe/", directory: resolve(root, "node_modules/axe-core") },
      { prefix: "/", directory: resolve(root, ".cache/e2e") },
      { prefix: "/", directory: resolve(root, "dist") },
    ],
    { control: true },
  );
  process.env.E2E_ORIGIN = server.origin;
  // The demo, pointed at the test model (through the flaky mount) and at its worker built on web-llm 0.2.79.
  writeFileSync(
    resolve(root, ".cache/e2e/demo/real-config.json"),
    // A 4 GB device: the test model fits, Gemma 2 9B does not.
    JSON.stringify({
      serviceWorkerUrl: "/demo/real-sw.js",
      scope: "/demo/",
      memoryBudgetMB: 4096,
      models: [testModelEntry(server.origin, "flaky-model")],
    }),
  );
  // A deployment's own model priced above the demo account's $1 credit for any reply: a 403.
  writeFileSync(
    resolve(root, ".cache/e2e/demo/premium-config.json"),
    JSON.stringify({
      models: [
        {
          ...seedCatalogue.find((model) => model.id === "beta-2-9b-it"),
          id: "premium-9b",
          price: { inputNanoUsdPerToken: 1_000, outputNanoUsdPerToken: 1_000_000_000 },
        },
      ],
    }),
  );
  // The demo's CPU model with its GGUF swapped for the test one (a Llama 3 vocabulary, so that family).
  writeFileSync(
    resolve(root, ".cache/e2e/demo/cpu-config.json"),
    JSON.stringify({
      models: [{ id: "qwen2.5-0.5b-instruct", family: "llama3", gguf: testGgufEntry(server.origin).gguf }],
    }),
  );
  return () => server.close();
}

#!/usr/bin/env node
/**
 * `npm run bench`: what the service-worker path costs over raw WebLLM, measured side by side in
 * one run, on one model, one browser and one engine instance. Writes <out>/<name>.json (every
 * sample), <name>.md (the table against the targets) and <name>.png (the chart).
 *
 *   npm run bench                    the full run: bench/results/latest.*
 *   npm run bench -- --quick         a few requests of each kind: bench/results/quick.* (part of npm test)
 *   npm run bench -- --model m.json  a real model: a catalogue entry whose build names its artifacts
 *   npm run bench -- --gguf g.json   the llama.cpp side of the engines' comparison: a catalogue entry
 *                                    with a GGUF build (default: a random GGUF of Qwen2-0.5B's shapes)
 *   --iterations N --max-tokens N --out DIR
 *
 * Absolute times on SwiftShader mean little; the ratios between the two paths are the result.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { chromium } from "@playwright/test";
import { chromiumArgs, chromiumPath } from "../scripts/chromium.mjs";
import { startStaticServer } from "../scripts/static-server.mjs";
import { buildTestModel } from "../scripts/test-model.mjs";
import { buildTestGguf, ggufVariants } from "../scripts/test-gguf.mjs";
import { report } from "./report.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { values: options } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    model: { type: "string" },
    gguf: { type: "string" },
    iterations: { type: "string" },
    "max-tokens": { type: "string" },
    out: { type: "string", default: resolve(root, "bench/results") },
  },
});
const quick = options.quick;
const plan = {
  iterations: Number(options.iterations ?? (quick ? 1 : 10)),
  maxTokens: Number(options["max-tokens"] ?? (quick ? 1 : 3)),
  roundTrips: quick ? 30 : 1_000,
  ledgerSizes: quick ? [100, 1_000] : [1_000, 10_000, 100_000],
  policyIterations: quick ? 20 : 200,
  turns: quick ? 1 : 2,
  // The shared system prompt's copies: turn 1's prefill must dominate its TTFT for turn 2's
  // reuse to show, but each copy costs seconds of prefill on a CPU.
  systemRepeats: quick ? 1 : 4,
  coldStarts: quick ? 1 : 3,
  // The engines side by side. A decode rate needs tokens after the first, and enough of them that
  // a token held back (part of a character, streamed with the next) does not skew it: llama.cpp's
  // cost little; web-llm's take seconds each on a software adapter.
  engineIterations: quick ? 1 : 3,
  // Our cost alone: a short and a long reply from an engine that costs nothing, each also
  // consumed directly in the worker; the difference per extra token is our marginal cost.
  costIterations: quick ? 10 : 100,
  costTokens: quick ? [16, 256] : [16, 1_024],
  engineMaxTokens: { webllm: quick ? 2 : 4, llamacpp: quick ? 16 : 32 },
};
const name = quick ? "quick" : "latest";

for (const required of [".cache/bench/index.html", ".cache/bench/bench-sw.js", "dist/tokenizers/qwen2.json.gz"]) {
  if (!existsSync(resolve(root, required))) throw new Error(`${required} is missing: run 'npm run bench', which builds it first.`);
}

const mounts = [
  { prefix: "/", directory: resolve(root, ".cache/bench") },
  { prefix: "/", directory: resolve(root, "dist") },
];
if (!options.model) {
  await buildTestModel(resolve(root, ".cache/test-model"));
  mounts.unshift(
    { prefix: "/test-model/resolve/main/", directory: resolve(root, ".cache/test-model/model") },
    { prefix: "/test-model/lib/", directory: resolve(root, ".cache/test-model/lib") },
  );
}
if (!options.gguf) {
  buildTestGguf(resolve(root, ".cache/test-gguf"), "bench");
  mounts.unshift({ prefix: "/test-gguf/", directory: resolve(root, ".cache/test-gguf") });
}
const server = await startStaticServer(mounts);
const model = options.model
  ? JSON.parse(readFileSync(resolve(options.model), "utf8"))
  : JSON.parse(readFileSync(resolve(root, "scripts/test-model-entry.json"), "utf8").replaceAll("{origin}", server.origin).replaceAll("{weights}", "test-model"));
const buildId = model.builds[0].modelId;
/** Random weights in Qwen2-0.5B's shapes with the Llama 3 vocabulary (128,256 tokens against Qwen's 151,936), pinned to llama.cpp. */
const benchGguf = ggufVariants.bench;
const ggufModel = options.gguf
  ? { engine: "llamacpp", ...JSON.parse(readFileSync(resolve(options.gguf), "utf8")) }
  : {
      id: "qwen2-0.5b-shape-gguf",
      family: "llama3",
      contextWindow: 4_096,
      price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
      engine: "llamacpp",
      gguf: [{ modelId: "qwen2-0.5b-shape-q4_0", file: `${server.origin}/test-gguf/${benchGguf.file}`, quantization: "Q4_0", sizeMB: statSync(resolve(root, ".cache/test-gguf", benchGguf.file)).size / 2 ** 20, kvCache: { layers: benchGguf.layers, kvHeads: benchGguf.kvHeads, headDim: benchGguf.embedding / benchGguf.heads } }],
    };

const profile = mkdtempSync(join(tmpdir(), "webgpu-inference-bench-"));
const context = await chromium.launchPersistentContext(profile, { executablePath: chromiumPath, args: chromiumArgs, headless: true });
const log = (line) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

try {
  const page = context.pages()[0] ?? (await context.newPage());
  // The 401s are the point of one round-trip series; other console errors are worth seeing.
  page.on("console", (message) => message.type() === "error" && !message.text().includes("status of 401") && console.log(`[page] ${message.text()}`));
  await page.goto(`${server.origin}/index.html`);
  await page.waitForFunction(() => document.getElementById("status")?.textContent === "ready");
  const account = await page.evaluate(
    ([entry, gguf]) => window.bench.start({ serviceWorkerUrl: "/bench-sw.js", engine: "webllm", models: [entry, gguf], databaseName: "webgpu-inference-bench" }, true),
    [model, ggufModel],
  );

  const prompt = "Write one short sentence about the sea.";
  const request = (modelName, stream, extra = {}) => ({ model: modelName, messages: [{ role: "user", content: prompt }], max_tokens: plan.maxTokens, temperature: 0, stream, ...extra });
  const browserInfo = await page.evaluate(async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    return {
      userAgent: navigator.userAgent,
      adapter: adapter?.info ? `${adapter.info.vendor} ${adapter.info.architecture} ${adapter.info.description}`.trim() : "none",
      shaderF16: adapter?.features.has("shader-f16") ?? false,
    };
  });

  log(`loading ${model.id} (${buildId}) through /v1`);
  const warmup = await page.evaluate((body) => window.bench.ours(body), request(model.id, true, { max_tokens: 1 }));

  // 1. Decode throughput and TTFT: raw and ours interleaved, A B A B, streaming and not.
  const generation = [];
  for (let iteration = 0; iteration < plan.iterations; iteration++) {
    for (const stream of [true, false]) {
      const raw = await page.evaluate((body) => window.bench.raw(body), request(buildId, stream));
      const ours = await page.evaluate((body) => window.bench.ours(body), request(model.id, stream));
      generation.push({ iteration, stream, raw, ours });
      log(`generation ${iteration + 1}/${plan.iterations} ${stream ? "streamed" : "whole"}: raw ${Math.round(raw.totalMs)} ms, ours ${Math.round(ours.totalMs)} ms`);
    }
  }

  // 2. Round trips with no engine involved: a trivial worker route, the model list, and a 401 for
  // a well-formed key that is not ours (hashed and looked up, then refused).
  const roundTrips = { echo: [], models: [], unauthorized: [] };
  const block = Math.min(100, plan.roundTrips);
  for (let done = 0; done < plan.roundTrips; done += block) {
    roundTrips.echo.push(...(await page.evaluate(([count]) => window.bench.roundTrips("/bench/echo", count, null, 200), [block])));
    roundTrips.models.push(...(await page.evaluate(([count, key, base]) => window.bench.roundTrips(`${base}/models`, count, `Bearer ${key}`, 200), [block, account.key, account.baseURL])));
    roundTrips.unauthorized.push(...(await page.evaluate(([count, base]) => window.bench.roundTrips(`${base}/models`, count, `Bearer sk-${"0".repeat(40)}`, 401), [block, account.baseURL])));
  }
  log(`round trips: ${roundTrips.echo.length} of each`);

  // 7 (measured here, with the other engine-free work). Our cost over an engine that costs
  // nothing: the same request through /bench/zero/v1 and the engine consumed in the worker,
  // interleaved, short and long replies, streamed and whole.
  await page.evaluate(() => window.bench.zeroSetup());
  const ourCost = [];
  for (let iteration = 0; iteration < plan.costIterations; iteration++) {
    for (const stream of [true, false]) {
      for (const tokens of plan.costTokens) {
        const ours = await page.evaluate(([count, streamed]) => window.bench.zero(count, streamed), [tokens, stream]);
        const direct = await page.evaluate((count) => window.bench.zeroDirect(count), tokens);
        ourCost.push({ iteration, stream, tokens, ours, direct });
      }
    }
  }
  log(`our cost: ${ourCost.length} requests`);

  // 3. The policy's cost per request as the ledger grows.
  const policy = await page.evaluate(([sizes, iterations]) => window.bench.policy(sizes, iterations), [plan.ledgerSizes, plan.policyIterations]);
  log(`policy: ${policy.map((row) => `${row.ledgerEntries} entries ${row.p50Ms.toFixed(2)} ms`).join(", ")}`);

  // 4. A second turn that re-sends the first: is the KV cache reused through our layer?
  const system = "You are a patient assistant who answers questions about the sea, ships, weather and navigation. ".repeat(plan.systemRepeats).trim();
  const turns = [];
  for (let repetition = 0; repetition < plan.turns; repetition++) {
    for (const path of ["raw", "ours"]) {
      const modelName = path === "raw" ? buildId : model.id;
      const first = [{ role: "system", content: system }, { role: "user", content: `Question ${repetition}: what is a tide?` }];
      const turn1 = await page.evaluate(([which, body]) => window.bench[which](body), [path, { model: modelName, messages: first, max_tokens: plan.maxTokens, temperature: 0, stream: true }]);
      const second = [...first, { role: "assistant", content: turn1.text }, { role: "user", content: "And a current?" }];
      const turn2 = await page.evaluate(([which, body]) => window.bench[which](body), [path, { model: modelName, messages: second, max_tokens: plan.maxTokens, temperature: 0, stream: true }]);
      turns.push({ repetition, path, turn1, turn2 });
      log(`turns ${path}: turn 1 TTFT ${Math.round(turn1.firstTokenMs ?? Number.NaN)} ms, turn 2 ${Math.round(turn2.firstTokenMs ?? Number.NaN)} ms`);
    }
  }

  // 5. Cold start with the weights cached: web-llm's own reload, against a stopped worker woken by a request.
  const coldStarts = [];
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  for (let repetition = 0; repetition < plan.coldStarts; repetition++) {
    const raw = await page.evaluate(([id, body]) => window.bench.rawReload(id, body), [buildId, request(buildId, true, { max_tokens: 1 })]);
    await cdp.send("ServiceWorker.stopAllWorkers");
    const ours = await page.evaluate((body) => window.bench.ours(body), request(model.id, true, { max_tokens: 1 }));
    coldStarts.push({ repetition, raw, ours });
    log(`cold start: raw reload ${Math.round(raw.sample.firstTokenMs ?? Number.NaN)} ms to first token, ours ${Math.round(ours.firstTokenMs ?? Number.NaN)} ms`);
  }

  // 6. The engines side by side, interleaved: web-llm and llama.cpp, each through /v1.
  log(`loading ${ggufModel.id} (${ggufModel.gguf[0].modelId}) on llama.cpp through /v1`);
  const ggufWarmup = await page.evaluate((body) => window.bench.ours(body), request(ggufModel.id, true, { max_tokens: 1 }));
  const engines = [];
  for (let iteration = 0; iteration < plan.engineIterations; iteration++) {
    const webllm = await page.evaluate((body) => window.bench.ours(body), request(model.id, true, { max_tokens: plan.engineMaxTokens.webllm }));
    const llamacpp = await page.evaluate((body) => window.bench.ours(body), request(ggufModel.id, true, { max_tokens: plan.engineMaxTokens.llamacpp }));
    engines.push({ iteration, webllm, llamacpp });
    log(`engines ${iteration + 1}/${plan.engineIterations}: web-llm TTFT ${Math.round(webllm.firstTokenMs ?? Number.NaN)} ms, llama.cpp ${Math.round(llamacpp.firstTokenMs ?? Number.NaN)} ms`);
  }

  const results = {
    name,
    quick,
    date: new Date().toISOString(),
    model: { id: model.id, build: buildId },
    browser: browserInfo,
    plan,
    warmup,
    generation,
    roundTrips,
    policy,
    turns,
    coldStarts,
    engineModels: { webllm: { id: model.id, build: buildId }, llamacpp: { id: ggufModel.id, build: ggufModel.gguf[0].modelId, warmupMs: ggufWarmup.totalMs } },
    engines,
    ourCost,
  };
  mkdirSync(options.out, { recursive: true });
  writeFileSync(join(options.out, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  const { markdown, chartHtml } = report(results);
  writeFileSync(join(options.out, `${name}.md`), markdown);
  const chart = await context.newPage();
  await chart.setViewportSize({ width: 960, height: 560 });
  await chart.setContent(chartHtml);
  await chart.screenshot({ path: join(options.out, `${name}.png`) });
  log(`wrote ${join(options.out, `${name}.{json,md,png}`)}`);
} finally {
  await context.close().catch(() => undefined);
  rmSync(profile, { recursive: true, force: true });
  await server.close();
}

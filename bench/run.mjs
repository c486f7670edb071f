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
 *   --iterations N --max-tokens N --cost-iterations N --out DIR
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
    "cost-iterations": { type: "string" },
    model: { type: "string" },
    gguf: { type: "string" },
    iterations: { type: "string" },
    "max-tokens": { type: "string" },
    out: { type: "string", default: resolve(root, "bench/results") },
  },
});
const quick = options.quick;
const minutes = (count) => count * 60_000;
/** A section that runs exactly `count` times, whatever it takes. */
const exactly = (count) => ({ minimum: count, maximum: count, budgetMs: 0 });
/**
 * The real engine's sections repeat up to `maximum` times, each repetition started only while
 * the last one's duration still fits the section's budget, and at least `minimum` times: on a
 * real GPU a request takes a fraction of a second and every section runs its maximum; on a
 * software adapter one takes tens of seconds, and the budgets bound the full run.
 * The results say how many ran.
 */
const plan = {
  iterations: options.iterations
    ? exactly(Number(options.iterations))
    : quick
      ? exactly(1)
      : { minimum: 2, maximum: 10, budgetMs: minutes(9) },
  // Quick mode checks the harness in about four minutes: the streamed mode only, the raw path in
  // section 1 only, and its request shared with turn 1 and the engines' comparison.
  modes: quick ? [true] : [true, false],
  maxTokens: Number(options["max-tokens"] ?? (quick ? 1 : 3)),
  roundTrips: quick ? 30 : 1_000,
  ledgerSizes: quick ? [100, 1_000] : [1_000, 10_000, 100_000],
  policyIterations: quick ? 20 : 200,
  turns: quick ? exactly(1) : { minimum: 1, maximum: 3, budgetMs: minutes(5) },
  turnPaths: quick ? ["ours"] : ["raw", "ours"],
  // The shared system prompt's copies: turn 1's prefill must dominate its TTFT for turn 2's
  // reuse to show, but each copy costs seconds of prefill on a CPU. None in quick mode, where
  // turn 1 is section 1's request.
  systemRepeats: quick ? 0 : 4,
  coldStarts: quick ? exactly(1) : { minimum: 1, maximum: 3, budgetMs: minutes(4.5) },
  coldStartPaths: quick ? ["ours"] : ["raw", "ours"],
  // The engines side by side. A decode rate needs tokens after the first, and enough of them that
  // a token held back (part of a character, streamed with the next) does not skew it: llama.cpp's
  // cost little; web-llm's take seconds each on a software adapter. Quick mode takes web-llm's
  // sample from section 1 (one token: no decode rate).
  engineIterations: quick ? exactly(1) : { minimum: 2, maximum: 5, budgetMs: minutes(3) },
  // Our cost alone: a short and a long reply from an engine that costs nothing, each also
  // consumed directly in the worker; the difference per extra token is our marginal cost.
  costIterations: Number(options["cost-iterations"] ?? (quick ? 10 : 100)),
  costTokens: quick ? [16, 256] : [16, 1_024],
  engineMaxTokens: { webllm: quick ? 1 : 4, llamacpp: quick ? 16 : 32 },
};

/** Runs `body` for repetition 0, 1, … as `limits` allow (see `plan`); returns how many ran. */
async function repeatWithin(limits, body) {
  const started = performance.now();
  let last = 0;
  let count = 0;
  while (count < limits.maximum && (count < limits.minimum || performance.now() - started + last <= limits.budgetMs)) {
    const before = performance.now();
    await body(count);
    last = performance.now() - before;
    count++;
  }
  return count;
}
const name = quick ? "quick" : "latest";
const runStarted = performance.now();
/** Seconds from the run's start to the end of each section, for the report's account of its own length. */
const timeline = {};
const mark = (section) => (timeline[section] = Math.round((performance.now() - runStarted) / 1000));

for (const required of [".cache/bench/index.html", ".cache/bench/bench-sw.js", "dist/tokenizers/qwen2.json.gz"]) {
  if (!existsSync(resolve(root, required)))
    throw new Error(`${required} is missing: run 'npm run bench', which builds it first.`);
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
const server = await startStaticServer(mounts, { control: true });
const model = options.model
  ? JSON.parse(readFileSync(resolve(options.model), "utf8"))
  : JSON.parse(
      readFileSync(resolve(root, "scripts/test-model-entry.json"), "utf8")
        .replaceAll("{origin}", server.origin)
        .replaceAll("{weights}", "test-model"),
    );
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
      gguf: [
        {
          modelId: "qwen2-0.5b-shape-q4_0",
          file: `${server.origin}/test-gguf/${benchGguf.file}`,
          quantization: "Q4_0",
          sizeMB: statSync(resolve(root, ".cache/test-gguf", benchGguf.file)).size / 2 ** 20,
          kvCache: {
            layers: benchGguf.layers,
            kvHeads: benchGguf.kvHeads,
            headDim: benchGguf.embedding / benchGguf.heads,
          },
        },
      ],
    };

const profile = mkdtempSync(join(tmpdir(), "webgpu-inference-bench-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: chromiumPath,
  args: chromiumArgs,
  headless: true,
});
const log = (line) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

try {
  const page = context.pages()[0] ?? (await context.newPage());
  // The 401s are the point of one round-trip series; other console errors are worth seeing.
  page.on(
    "console",
    (message) =>
      message.type() === "error" &&
      !message.text().includes("status of 401") &&
      console.log(`[page] ${message.text()}`),
  );
  // Cross-origin isolated, as docs/engines.md asks of a hosting page: llama.cpp gets a thread per core.
  await page.goto(`${server.origin}/index.html?isolated`);
  await page.waitForFunction(() => document.getElementById("status")?.textContent === "ready");
  const account = await page.evaluate(
    ([entry, gguf]) =>
      window.bench.start(
        {
          serviceWorkerUrl: "/bench-sw.js",
          engine: "webllm",
          models: [entry, gguf],
          databaseName: "webgpu-inference-bench",
        },
        true,
      ),
    [model, ggufModel],
  );

  const prompt = "Write one short sentence about the sea.";
  const request = (modelName, stream, extra = {}) => ({
    model: modelName,
    messages: [{ role: "user", content: prompt }],
    max_tokens: plan.maxTokens,
    temperature: 0,
    stream,
    ...extra,
  });
  const browserInfo = await page.evaluate(async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    return {
      userAgent: navigator.userAgent,
      adapter: adapter?.info
        ? `${adapter.info.vendor} ${adapter.info.architecture} ${adapter.info.description}`.trim()
        : "none",
      shaderF16: adapter?.features.has("shader-f16") ?? false,
    };
  });

  log(`loading ${model.id} (${buildId}) through /v1`);
  // Quick mode loads the model without generating: on a software adapter a request's prefill is
  // slow, and quick mode is a harness check. The full run warms up with a request.
  const warmup = quick
    ? { loadOnlyMs: await page.evaluate((id) => window.bench.load(id), model.id) }
    : await page.evaluate((body) => window.bench.ours(body), request(model.id, true, { max_tokens: 1 }));
  mark("load");

  const system = "You are a patient assistant who answers questions about the sea, ships, weather and navigation. "
    .repeat(plan.systemRepeats)
    .trim();
  const firstTurn = (repetition) => [
    ...(system ? [{ role: "system", content: system }] : []),
    { role: "user", content: `Question ${repetition}: what is a tide?` },
  ];
  // In quick mode section 1's request is turn 1 of section 4.
  const generationRequest = (modelName, stream) =>
    quick ? { ...request(modelName, stream), messages: firstTurn(0) } : request(modelName, stream);

  // 1. Decode throughput and TTFT: raw and ours interleaved, A B A B, streaming and not.
  const generation = [];
  await repeatWithin(plan.iterations, async (iteration) => {
    for (const stream of plan.modes) {
      const raw = await page.evaluate((body) => window.bench.raw(body), generationRequest(buildId, stream));
      const ours = await page.evaluate((body) => window.bench.ours(body), generationRequest(model.id, stream));
      generation.push({ iteration, stream, raw, ours });
      log(
        `generation ${iteration + 1} ${stream ? "streamed" : "whole"}: raw ${Math.round(raw.totalMs)} ms, ours ${Math.round(ours.totalMs)} ms`,
      );
    }
  });
  mark("generation");

  // 2. Round trips with no engine involved: a trivial worker route, the model list, and a 401 for
  // a well-formed key that is not ours (hashed and looked up, then refused).
  const roundTrips = { echo: [], models: [], unauthorized: [] };
  const block = Math.min(100, plan.roundTrips);
  for (let done = 0; done < plan.roundTrips; done += block) {
    roundTrips.echo.push(
      ...(await page.evaluate(([count]) => window.bench.roundTrips("/bench/echo", count, null, 200), [block])),
    );
    roundTrips.models.push(
      ...(await page.evaluate(
        ([count, key, base]) => window.bench.roundTrips(`${base}/models`, count, `Bearer ${key}`, 200),
        [block, account.key, account.baseURL],
      )),
    );
    roundTrips.unauthorized.push(
      ...(await page.evaluate(
        ([count, base]) => window.bench.roundTrips(`${base}/models`, count, `Bearer sk-${"0".repeat(40)}`, 401),
        [block, account.baseURL],
      )),
    );
  }
  log(`round trips: ${roundTrips.echo.length} of each`);
  mark("roundTrips");

  // 7 (run here, with the other engine-free work). Our cost over an engine that costs
  // nothing: the same request through /bench/zero/v1 and the engine consumed in the worker,
  // interleaved, short and long replies, streamed and whole.
  await page.evaluate(() => window.bench.zeroSetup());
  // Unmeasured: the first request fetches the zero model's tokenizer.
  for (const stream of [true, false])
    await page.evaluate(([count, streamed]) => window.bench.zero(count, streamed), [plan.costTokens[0], stream]);
  const ourCost = [];
  for (let iteration = 0; iteration < plan.costIterations; iteration++) {
    for (const stream of [true, false]) {
      for (const tokens of plan.costTokens) {
        // The echo beside each request: the service worker's round trip at that moment, the
        // browser's floor under the fixed cost.
        const [echoMs] = await page.evaluate(() => window.bench.roundTrips("/bench/echo", 1, null, 200));
        const ours = await page.evaluate(([count, streamed]) => window.bench.zero(count, streamed), [tokens, stream]);
        const direct = await page.evaluate((count) => window.bench.zeroDirect(count), tokens);
        ourCost.push({ iteration, stream, tokens, ours, direct, echoMs });
      }
    }
  }
  log(`our cost: ${ourCost.length} requests`);
  mark("ourCost");

  // 3. The policy's cost per request as the ledger grows.
  const policy = await page.evaluate(
    ([sizes, iterations]) => window.bench.policy(sizes, iterations),
    [plan.ledgerSizes, plan.policyIterations],
  );
  log(`policy: ${policy.map((row) => `${row.ledgerEntries} entries ${row.p50Ms.toFixed(2)} ms`).join(", ")}`);
  mark("policy");

  // 4. A second turn that re-sends the first: is the KV cache reused through our layer?
  const turns = [];
  await repeatWithin(plan.turns, async (repetition) => {
    for (const path of plan.turnPaths) {
      const modelName = path === "raw" ? buildId : model.id;
      const first = firstTurn(repetition);
      const shared = quick ? generation.find((row) => row.stream)?.[path] : undefined;
      const turn1 =
        shared ??
        (await page.evaluate(
          ([which, body]) => window.bench[which](body),
          [path, { model: modelName, messages: first, max_tokens: plan.maxTokens, temperature: 0, stream: true }],
        ));
      const second = [
        ...first,
        { role: "assistant", content: turn1.text },
        { role: "user", content: "And a current?" },
      ];
      const turn2 = await page.evaluate(
        ([which, body]) => window.bench[which](body),
        [path, { model: modelName, messages: second, max_tokens: plan.maxTokens, temperature: 0, stream: true }],
      );
      turns.push({ repetition, path, turn1, turn2 });
      log(
        `turns ${path}: turn 1 TTFT ${Math.round(turn1.firstTokenMs ?? Number.NaN)} ms, turn 2 ${Math.round(turn2.firstTokenMs ?? Number.NaN)} ms`,
      );
    }
  });
  mark("turns");

  // 5. Cold start with the weights cached: web-llm's own reload, against a stopped worker woken by a request.
  const coldStarts = [];
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  await repeatWithin(plan.coldStarts, async (repetition) => {
    const raw = plan.coldStartPaths.includes("raw")
      ? await page.evaluate(
          ([id, body]) => window.bench.rawReload(id, body),
          [buildId, request(buildId, true, { max_tokens: 1 })],
        )
      : null;
    await cdp.send("ServiceWorker.stopAllWorkers");
    const ours = await page.evaluate((body) => window.bench.ours(body), request(model.id, true, { max_tokens: 1 }));
    coldStarts.push({ repetition, raw, ours });
    log(
      `cold start: raw reload ${Math.round(raw?.sample.firstTokenMs ?? Number.NaN)} ms to first token, ours ${Math.round(ours.firstTokenMs ?? Number.NaN)} ms`,
    );
  });
  mark("coldStarts");

  // 6. The engines side by side, interleaved: web-llm and llama.cpp, each through /v1.
  log(`loading ${ggufModel.id} (${ggufModel.gguf[0].modelId}) on llama.cpp through /v1`);
  const ggufWarmup = await page.evaluate(
    (body) => window.bench.ours(body),
    request(ggufModel.id, true, { max_tokens: 1 }),
  );
  const engines = [];
  await repeatWithin(plan.engineIterations, async (iteration) => {
    const shared = quick ? generation.find((row) => row.stream)?.ours : undefined;
    const webllm =
      shared ??
      (await page.evaluate(
        (body) => window.bench.ours(body),
        request(model.id, true, { max_tokens: plan.engineMaxTokens.webllm }),
      ));
    // A question of its own each time: a prompt seen before would be prefilled from the cache.
    const llamacpp = await page.evaluate((body) => window.bench.ours(body), {
      ...(quick ? generationRequest(ggufModel.id, true) : request(ggufModel.id, true)),
      messages: [{ role: "user", content: `${prompt} (Question ${iteration + 1} of the engines' comparison.)` }],
      max_tokens: plan.engineMaxTokens.llamacpp,
    });
    engines.push({ iteration, webllm, llamacpp });
    log(
      `engines ${iteration + 1}: web-llm TTFT ${Math.round(webllm.firstTokenMs ?? Number.NaN)} ms, llama.cpp ${Math.round(llamacpp.firstTokenMs ?? Number.NaN)} ms`,
    );
  });
  mark("engines");

  const results = {
    name,
    quick,
    // Seconds from the start to each section's end; the files are written a few seconds later.
    timeline,
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
    engineModels: {
      webllm: { id: model.id, build: buildId },
      llamacpp: { id: ggufModel.id, build: ggufModel.gguf[0].modelId, warmupMs: ggufWarmup.totalMs },
    },
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

#!/usr/bin/env node
/**
 * `npm run bench:cpu`: llama.cpp on the CPU, our WebAssembly build in Chromium against native
 * llama.cpp (node-llama-cpp's prebuilt binaries) on the same GGUF files at the same thread
 * counts, interleaved in one run. Writes bench/results/cpu.{json,md}.
 *
 * Each sample is a fresh prompt (distinct text, nothing cached), so prefill is the uncached
 * prompt tokens over the time to the first token, and decode the tokens after the first over
 * the time after it. The browser side goes through /v1 (the openai-shaped fetch a client makes)
 * and, beside it, the engine driven directly in the same page, so our layer's cost shows too:
 * its target is judged on the median of per-sample ratios (each /v1 sample against the direct
 * sample run next to it), which the machine's drift between samples does not move. Chromium
 * runs these samples with no debugger attached (bench/remote-page.mjs says why).
 * Three files of Qwen2-0.5B's shapes: Q4_0, Q8_0 and Q4_K_M (llama.cpp's own quantizer makes the
 * last, built natively once: scripts/llama-quantize.mjs, which needs cmake and a C++ compiler).
 * Beside them, in the same turns: the engine on the Memory64 builds (a second instance, what
 * 64-bit addresses cost each file's kernels), and wllama, the browser peer (bench/wllama/, its
 * own install). Then a file past 4 GB (Llama 3 8B's shapes in Q4_0), on the Memory64 build
 * against native. Last, the demo as `npm start` serves it: its own time to first token.
 *
 *   --iterations N   samples per file, thread count and path (default 5: five paths take turns)
 *   --tokens N       tokens generated per sample (default 64)
 *   --big-iterations N, --big-tokens N   the same for the file past 4 GB (default 3, 16)
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "@playwright/test";
import { getLlama } from "node-llama-cpp";
import { chromiumArgs, chromiumPath } from "../scripts/chromium.mjs";
import { startStaticServer } from "../scripts/static-server.mjs";
import { demoHeaders } from "../scripts/demo-headers.mjs";
import { buildTestGguf, ggufVariants } from "../scripts/test-gguf.mjs";
import { cpuBenchFiles, q4kmFile } from "./cpu-files.mjs";
import { median } from "./statistics.mjs";
import { remotePages } from "./remote-page.mjs";

const root = resolve(import.meta.dirname, "..");
const { values: options } = parseArgs({
  options: {
    iterations: { type: "string", default: "5" },
    tokens: { type: "string", default: "64" },
    "big-iterations": { type: "string", default: "3" },
    "big-tokens": { type: "string", default: "16" },
    out: { type: "string", default: resolve(root, "bench/results") },
  },
});
const iterations = Number(options.iterations);
const tokens = Number(options.tokens);
const bigIterations = Number(options["big-iterations"]);
const bigTokens = Number(options["big-tokens"]);
const cores = availableParallelism();
const threadCounts = [...new Set([1, cores])];
const variants = ["bench", "bench-q8_0", "bench-q4_k_m"];
const log = (line) => console.log(`[bench:cpu ${new Date().toISOString().slice(11, 19)}] ${line}`);

/** A distinct question each sample: no prefix beyond the template's is shared with the last one. */
const words = ["tide", "current", "reef", "harbour", "gale", "compass", "anchor", "lighthouse", "sextant", "squall"];
const question = (index) =>
  `${words[index % words.length]} ${index}: explain ${words[(index * 7 + 3) % words.length]} and ${words[(index * 3 + 1) % words.length]} to a sailor who has never seen ${words[(index * 5 + 2) % words.length]}, in plain words.`;

const gguf = resolve(root, ".cache/test-gguf");
/** The files (bench/cpu-files.mjs): the same shapes and vocabulary in all three. */
const shapes = {
  bench: ggufVariants.bench,
  "bench-q8_0": ggufVariants["bench-q8_0"],
  "bench-q4_k_m": { ...ggufVariants.bench, file: q4kmFile, type: "q4_k_m" },
};
cpuBenchFiles(gguf);
/** Past 4 GB, in three shards: only the Memory64 build loads it. */
const bigGguf = resolve(root, ".cache/test-gguf-big");
const bigShape = ggufVariants["big-q4_0"];
buildTestGguf(bigGguf, "big-q4_0");
const bigShards = [1, 2, 3].map((shard) => bigShape.file.replace(/\.gguf$/, `-0000${shard}-of-00003.gguf`));
const bigFirstShard = bigShards[0];
const bigMB = bigShards.reduce((sum, shard) => sum + statSync(join(bigGguf, shard)).size, 0) / 2 ** 20;

const wllamaFolder = resolve(root, "bench/wllama");
if (!existsSync(join(wllamaFolder, "node_modules/@wllama/wllama")))
  execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: wllamaFolder, stdio: "inherit" });
const wllamaVersion = JSON.parse(
  readFileSync(join(wllamaFolder, "node_modules/@wllama/wllama/package.json"), "utf8"),
).version;

/** The file past 4 GB: its size is its three shards', so the engine takes the Memory64 build. */
function bigEntry(origin) {
  return {
    id: "cpu-big",
    family: "llama3",
    contextWindow: 512,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
    engine: "llamacpp",
    gguf: [
      {
        modelId: "llama3-8b-shape-q4_0",
        file: `${origin}/test-gguf-big/${bigFirstShard}`,
        quantization: "Q4_0",
        sizeMB: bigMB,
        kvCache: { layers: bigShape.layers, kvHeads: bigShape.kvHeads, headDim: bigShape.embedding / bigShape.heads },
      },
    ],
  };
}

function entry(variant, origin) {
  const shape = shapes[variant];
  return {
    id: `cpu-${variant}`,
    family: "llama3",
    contextWindow: 2_048,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
    engine: "llamacpp",
    gguf: [
      {
        modelId: shape.file.replace(/\.gguf$/, ""),
        file: `${origin}/test-gguf/${shape.file}`,
        quantization: shape.type.toUpperCase(),
        sizeMB: statSync(join(gguf, shape.file)).size / 2 ** 20,
        kvCache: { layers: shape.layers, kvHeads: shape.kvHeads, headDim: shape.embedding / shape.heads },
      },
    ],
  };
}

/** Native llama.cpp: the same chat text (our rendering, special tokens parsed), greedy. */
async function nativeSample(model, threads, text, maxTokens = tokens) {
  const context = await model.createContext({
    contextSize: 2_048,
    batchSize: 512,
    threads: { ideal: threads, min: threads },
  });
  try {
    const prompt = model.tokenize(text, true);
    const sequence = context.getSequence();
    const started = performance.now();
    let firstTokenMs = null;
    let produced = 0;
    for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
      void token;
      firstTokenMs ??= performance.now() - started;
      if (++produced === maxTokens) break;
    }
    return {
      promptTokens: prompt.length,
      cachedTokens: 0,
      firstTokenMs,
      totalMs: performance.now() - started,
      completionTokens: produced,
    };
  } finally {
    await context.dispose();
  }
}

const rates = (sample) => ({
  prefill: (sample.promptTokens - sample.cachedTokens) / (sample.firstTokenMs / 1000),
  decode: (sample.completionTokens - 1) / ((sample.totalMs - sample.firstTokenMs) / 1000),
});

/** Chromium with a profile of its own (service workers need a persistent one), and its removal. */
async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "webgpu-inference-cpu-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    args: chromiumArgs,
    headless: true,
  });
  const close = async () => {
    await context.close().catch(() => undefined);
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

const remote = remotePages();
const server = await startStaticServer(
  [
    { prefix: "/test-gguf/", directory: gguf },
    { prefix: "/test-gguf-big/", directory: bigGguf },
    { prefix: "/wllama/", directory: join(wllamaFolder, "node_modules/@wllama/wllama/esm") },
    { prefix: "/", directory: resolve(root, ".cache/bench") },
    { prefix: "/", directory: resolve(root, "dist") },
  ],
  { control: true, extend: remote.extend },
);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const samples = [];
const bigSamples = [];
const wllamaFailures = [];
try {
  const models = Object.fromEntries(
    await Promise.all(
      variants.map(async (variant) => [
        variant,
        await llama.loadModel({ modelPath: join(gguf, shapes[variant].file) }),
      ]),
    ),
  );
  for (const threads of threadCounts) {
    // Cross-origin isolated, so the pthreads build can run; one thread takes the one-thread build.
    const page = remote.open(`${server.origin}/index.html?isolated&remote`);
    try {
      const entries = [...variants.map((variant) => entry(variant, server.origin)), bigEntry(server.origin)];
      await page.call(
        "start",
        {
          serviceWorkerUrl: "/bench-sw.js",
          engine: "llamacpp",
          models: entries,
          databaseName: "webgpu-inference-cpu",
          pageEngine: { threads },
        },
        true,
      );
      for (const variant of variants) await sampleVariant(page, models[variant], variant, threads);
      await sampleBig(page, threads);
    } finally {
      await page.close();
    }
  }
} finally {
  await server.close();
}

/**
 * One file at one thread count: a warm-up on each path, then `iterations` samples through /v1,
 * directly (wasm32 and Memory64), through wllama, and natively. The browser paths take turns in
 * an order that reverses each iteration, so /v1 and direct, and direct and Memory64, each go
 * first alike: what the first leaves behind (the worker's settlement, V8's background work)
 * falls on each alike.
 */
async function sampleVariant(page, model, variant, threads) {
  const id = `cpu-${variant}`;
  const index = threads * 1000 + variants.indexOf(variant) * 100;
  const chat = (offset) => [{ role: "user", content: question(index + offset) }];
  const ours = (offset) =>
    page.call("ours", { model: id, messages: chat(offset), max_tokens: tokens, temperature: 0, stream: true });
  const direct = (offset, addressing) =>
    page.call("llamaDirect", {
      model: id,
      messages: chat(offset),
      maxTokens: tokens,
      ...(addressing ? { addressing } : {}),
    });
  // wllama completes the same text our engine is given (the page renders it alike). On some
  // questions its module fails in the middle of the sample, every time, and is left unusable;
  // then it is loaded again and the sample taken on another question, and the failure counted
  // in the results.
  const load = () =>
    page.call("wllamaLoad", { url: `/test-gguf/${shapes[variant].file}`, threads, contextSize: 2_048 });
  const wllama = async (offset) => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await page.call("wllamaSample", { messages: chat(offset + 500 * attempt), maxTokens: tokens });
      } catch (error) {
        const message = String(error.message).split("\n")[0];
        wllamaFailures.push({ variant, threads, message });
        log(`wllama failed (${message}); loading it again, for another question`);
        if (attempt === 2) throw error;
        await load();
      }
    }
  };
  await load();
  // Load, and warm every path with a whole sample each, unmeasured: the first request also
  // compiles, and V8 moves hot WebAssembly to its optimising tier, on threads of its own, only
  // once it has run a while; each prompt length runs tiles of its own shapes. A whole sample
  // on each path keeps that compilation out of the measured ones.
  await ours(90);
  await direct(91);
  await direct(92, "wasm64");
  await wllama(93);
  for (let iteration = 0; iteration < iterations; iteration++) {
    const offset = iteration * 5;
    const runs = {
      ours: () => ours(offset),
      direct: () => direct(offset + 1),
      memory64: () => direct(offset + 2, "wasm64"),
      wllama: () => wllama(offset + 3),
    };
    const order =
      iteration % 2 === 0 ? ["ours", "direct", "memory64", "wllama"] : ["memory64", "direct", "ours", "wllama"];
    const turn = {};
    for (const path of order) turn[path] = await runs[path]();
    const native = await nativeSample(model, threads, turn.direct.renderedPrompt.replace(/^<\|begin_of_text\|>/, ""));
    samples.push({ variant, threads, iteration, ...turn, native });
    const decode = (path) => rates(path === "native" ? native : turn[path]).decode.toFixed(1);
    log(
      `${variant} ${threads} thread(s) #${iteration + 1} (${order.join(", ")}): decode tok/s native ${decode("native")}, /v1 ${decode("ours")}, direct ${decode("direct")}, Memory64 ${decode("memory64")}, wllama ${decode("wllama")}; browser threads ${turn.direct.threads}`,
    );
  }
  await page.call("wllamaUnload");
}

/**
 * The file past 4 GB at one thread count: our engine takes its Memory64 build (the page's
 * instance, driven directly: the cost of /v1 is measured on the small files), against native.
 */
async function sampleBig(page, threads) {
  const model = await llama.loadModel({ modelPath: join(bigGguf, bigFirstShard) });
  try {
    const chat = (offset) => [{ role: "user", content: question(threads * 1000 + 900 + offset) }];
    const direct = (offset, maxTokens) =>
      page.call("llamaDirect", { model: "cpu-big", messages: chat(offset), maxTokens });
    await direct(90, 2);
    for (let iteration = 0; iteration < bigIterations; iteration++) {
      const sample = await direct(iteration, bigTokens);
      const native = await nativeSample(
        model,
        threads,
        sample.renderedPrompt.replace(/^<\|begin_of_text\|>/, ""),
        bigTokens,
      );
      bigSamples.push({ threads, iteration, direct: sample, native });
      log(
        `${bigShape.file} ${threads} thread(s) #${iteration + 1}: decode tok/s native ${rates(native).decode.toFixed(2)}, Memory64 ${rates(sample).decode.toFixed(2)}; browser threads ${sample.threads}`,
      );
    }
  } finally {
    await model.dispose();
  }
}

/**
 * The demo as `npm start` serves it (its headers: cross-origin isolated, its CSP), its CPU model
 * pointed by a same-origin `?config=` at the Q4_K_M file (the demo's own is Qwen2.5-0.5B's
 * Q4_K_M, not reachable here). After one warm-up reply (the load), each short prompt in a new
 * chat, as a person types it: the time to first token the demo itself shows.
 */
async function demoFirstTokens() {
  const config = mkdtempSync(join(tmpdir(), "webgpu-inference-demo-config-"));
  const shape = shapes["bench-q4_k_m"];
  const demo = await startStaticServer(
    [
      { prefix: "/test-gguf/", directory: gguf },
      { prefix: "/bench-config/", directory: config },
      { prefix: "/", directory: resolve(root, "dist/demo") },
    ],
    { headers: demoHeaders },
  );
  writeFileSync(
    join(config, "cpu.json"),
    JSON.stringify({
      models: [{ id: "qwen2.5-0.5b-instruct", family: "llama3", gguf: entry("bench-q4_k_m", demo.origin).gguf }],
    }),
  );
  const { context, close } = await launch();
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${demo.origin}/index.html?config=/bench-config/cpu.json`);
    await page.locator("#status").filter({ hasText: "Ready" }).waitFor({ timeout: 60_000 });
    await page.selectOption("#model", "qwen2.5-0.5b-instruct");
    await page.fill("#max-tokens", "8");
    const ask = async (text) => {
      await page.click("#clear");
      await page.getByRole("textbox", { name: "Message", exact: true }).fill(text);
      await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
      const stats = page.locator("#conversation li.assistant").last().locator(".stats");
      await stats.filter({ hasText: "tokens" }).waitFor({ timeout: 300_000 });
      const shown = await stats.textContent();
      return { text: shown, firstTokenMs: Number(/TTFT (\d+) ms/.exec(shown ?? "")?.[1] ?? Number.NaN) };
    };
    await ask("Hi");
    // The demo's page is isolated, so llama.cpp runs a thread per core (less one past two cores).
    const { isolated, cores: pageCores } = await page.evaluate(() => ({
      isolated: crossOriginIsolated,
      cores: navigator.hardwareConcurrency,
    }));
    const samples = [];
    for (let index = 0; index < 5; index++) {
      const sample = await ask(`What is a ${words[index]}?`);
      samples.push(sample);
      log(`demo: "${sample.text}"`);
    }
    return { file: shape.file, isolated, cores: pageCores, samples };
  } finally {
    await close();
    await demo.close();
    rmSync(config, { recursive: true, force: true });
  }
}
const demoRun = await demoFirstTokens();
const demoMedian = median(demoRun.samples.map((sample) => sample.firstTokenMs));
const demoMax = Math.max(...demoRun.samples.map((sample) => sample.firstTokenMs));

/** A path's median prefill and decode rates over a group of samples. */
const medianRates = (group, path) => ({
  prefill: median(group.map((sample) => rates(sample[path]).prefill)),
  decode: median(group.map((sample) => rates(sample[path]).decode)),
});
const rows = [];
for (const variant of variants)
  for (const threads of threadCounts) {
    const group = samples.filter((sample) => sample.variant === variant && sample.threads === threads);
    const both = (path) => medianRates(group, path);
    // Each sample against the one of the other path run beside it: drift between samples cancels.
    const paired = (path, over, kind) =>
      median(group.map((sample) => rates(sample[path])[kind] / rates(sample[over])[kind]));
    rows.push({
      file: shapes[variant].file,
      threads,
      browserThreads: group[0]?.direct.threads,
      native: both("native"),
      ours: both("ours"),
      direct: both("direct"),
      memory64: both("memory64"),
      wllama: both("wllama"),
      pairedDecode: paired("ours", "direct", "decode"),
      memory64Paired: {
        prefill: paired("memory64", "direct", "prefill"),
        decode: paired("memory64", "direct", "decode"),
      },
      promptTokens: median(group.map((sample) => sample.ours.promptTokens - sample.ours.cachedTokens)),
    });
  }
const bigRows = threadCounts.map((threads) => {
  const group = bigSamples.filter((sample) => sample.threads === threads);
  return {
    threads,
    browserThreads: group[0]?.direct.threads,
    native: medianRates(group, "native"),
    memory64: medianRates(group, "direct"),
  };
});
const fixed = (value, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : "—");
const ratio = (value) => fixed(value, 3);
const one = (file) => rows.find((row) => row.file === file && row.threads === 1);
/** Two threads (every core) over one, for a path and a kind, and native's own. */
const scaling = (row, path, kind) => row[path][kind] / one(row.file)[path][kind];
const targets = [
  ...rows.flatMap((row) => [
    {
      goal: `${row.file}, ${row.threads} thread(s): prefill ≥ 0.25× native`,
      measured: row.ours.prefill / row.native.prefill,
      met: row.ours.prefill / row.native.prefill >= 0.25,
    },
    {
      goal: `${row.file}, ${row.threads} thread(s): decode ≥ 0.45× native`,
      measured: row.ours.decode / row.native.decode,
      met: row.ours.decode / row.native.decode >= 0.45,
    },
    {
      goal: `${row.file}, ${row.threads} thread(s): decode ≥ 5× wllama ${wllamaVersion}'s at the same threads`,
      measured: row.ours.decode / row.wllama.decode,
      met: row.ours.decode / row.wllama.decode >= 5,
    },
    {
      goal: `${row.file}, ${row.threads} thread(s): /v1 within 3% of the engine driven directly (decode, the median of per-sample ratios)`,
      measured: row.pairedDecode,
      met: row.pairedDecode >= 0.97,
    },
  ]),
  ...rows
    .filter((row) => row.threads > 1)
    .flatMap((row) =>
      ["prefill", "decode"].map((kind) => ({
        goal: `${row.file}: ${kind} at ${row.threads} threads over 1 ≥ native's own (native ${fixed(scaling(row, "native", kind), 2)}×)`,
        measured: scaling(row, "ours", kind),
        met: scaling(row, "ours", kind) >= scaling(row, "native", kind),
      })),
    ),
  {
    goal: `The demo's CPU model answers its first token within 2 s of a short prompt, once loaded (issue #29: the demo page as npm start serves it, ${demoRun.isolated ? "cross-origin isolated" : "NOT isolated"} on ${demoRun.cores} cores, ${demoRun.file}; the demo's own TTFT, ${demoRun.samples.length} prompts, each in a new chat)`,
    shown: `median ${fixed(demoMedian, 0)} ms, max ${fixed(demoMax, 0)} ms`,
    met: demoMax <= 2_000,
  },
];
const lines = [
  "# llama.cpp on the CPU: our WebAssembly build against native llama.cpp and wllama",
  "",
  `Run ${new Date().toISOString()} on ${cores} cores · Chromium (${chromiumPath}) · native: node-llama-cpp's prebuilt llama.cpp (${llama.buildType}) · wllama ${wllamaVersion} (its one build: Memory64 and JSPI, on the CPU) · ${iterations} samples per row and path after one unmeasured on each, interleaved (through /v1, our engine driven directly in the page on its wasm32 and its Memory64 builds, and wllama, in an order that reverses each iteration, then native), ${tokens} tokens each at temperature 0, each on a question of its own (only the template's first few tokens can be cached; prefill counts the uncached ones). Random weights with Qwen2-0.5B's shapes and the Llama 3 vocabulary (scripts/test-gguf.mjs). Chromium runs with no debugger attached for these samples (bench/remote-page.mjs): a debugger is sent an event per streamed chunk, which only /v1 would pay.`,
  "",
  "| File | Threads | Prompt tokens | Native prefill tok/s | Native decode tok/s | /v1 prefill tok/s | /v1 decode tok/s | Direct decode tok/s | wllama prefill tok/s | wllama decode tok/s | Prefill /v1 / native | Decode /v1 / native | Decode /v1 / wllama | /v1 / direct (decode, median of per-sample ratios) |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ...rows.map(
    (row) =>
      `| ${row.file} | ${row.threads} | ${fixed(row.promptTokens, 0)} | ${fixed(row.native.prefill)} | ${fixed(row.native.decode)} | ${fixed(row.ours.prefill)} | ${fixed(row.ours.decode)} | ${fixed(row.direct.decode)} | ${fixed(row.wllama.prefill)} | ${fixed(row.wllama.decode)} | ${ratio(row.ours.prefill / row.native.prefill)} | ${ratio(row.ours.decode / row.native.decode)} | ${fixed(row.ours.decode / row.wllama.decode, 2)} | ${ratio(row.pairedDecode)} |`,
  ),
  "",
  "## What 64-bit addresses cost",
  "",
  "The same engine on its Memory64 builds (a second instance in the page, driven directly), against the wasm32 builds, each sample against the wasm32 sample beside it (medians of per-sample ratios; below 1 is slower). Two instances of one build have measured 3–4% apart by themselves (bench/page/main.ts), so a gap within that is not the addresses'.",
  "",
  "| File | Threads | wasm32 prefill tok/s | Memory64 prefill tok/s | wasm32 decode tok/s | Memory64 decode tok/s | Prefill Memory64 / wasm32 | Decode Memory64 / wasm32 |",
  "|---|---|---|---|---|---|---|---|",
  ...rows.map(
    (row) =>
      `| ${row.file} | ${row.threads} | ${fixed(row.direct.prefill)} | ${fixed(row.memory64.prefill)} | ${fixed(row.direct.decode)} | ${fixed(row.memory64.decode)} | ${ratio(row.memory64Paired.prefill)} | ${ratio(row.memory64Paired.decode)} |`,
  ),
  "",
  `## Past 4 GB: ${bigShape.file} on the Memory64 build`,
  "",
  `Llama 3 8B's shapes in Q4_0, ${fixed(bigMB, 0)} MB in three shards (scripts/test-gguf.mjs big-q4_0): ${bigIterations} samples of ${bigTokens} tokens per thread count after one unmeasured, our engine driven directly, then native.`,
  "",
  "| Threads | Native prefill tok/s | Native decode tok/s | Memory64 prefill tok/s | Memory64 decode tok/s | Prefill / native | Decode / native |",
  "|---|---|---|---|---|---|---|",
  ...bigRows.map(
    (row) =>
      `| ${row.threads} | ${fixed(row.native.prefill)} | ${fixed(row.native.decode, 2)} | ${fixed(row.memory64.prefill)} | ${fixed(row.memory64.decode, 2)} | ${ratio(row.memory64.prefill / row.native.prefill)} | ${ratio(row.memory64.decode / row.native.decode)} |`,
  ),
  "",
  "## Targets (issue #65)",
  "",
  "| Target | Measured | Met |",
  "|---|---|---|",
  ...targets.map(
    (target) => `| ${target.goal} | ${target.shown ?? ratio(target.measured)} | ${target.met ? "yes" : "**no**"} |`,
  ),
  "",
  ...(wllamaFailures.length > 0
    ? [
        `wllama failed ${wllamaFailures.length} time(s) in the middle of a sample (${[...new Set(wllamaFailures.map((failure) => failure.message))].join("; ")}), each time loaded again and the sample taken on another question: ${wllamaFailures.map((failure) => `${shapes[failure.variant].file} at ${failure.threads} thread(s)`).join(", ")}.`,
        "",
      ]
    : []),
  `The Q4_K_M file is llama.cpp's own mix, made by its native llama-quantize from the Q8_0 file (scripts/llama-quantize.mjs); as in Qwen's published Q4_K_M of Qwen2.5-0.5B, the 896-wide rows, not a multiple of 256, fall back to llama.cpp's other types.`,
  "",
];
mkdirSync(options.out, { recursive: true });
writeFileSync(
  join(options.out, "cpu.json"),
  `${JSON.stringify({ date: new Date().toISOString(), cores, iterations, tokens, wllamaVersion, wllamaFailures, rows, samples, bigRows, bigSamples, demo: demoRun }, null, 2)}\n`,
);
writeFileSync(join(options.out, "cpu.md"), lines.join("\n"));
log(`wrote ${join(options.out, "cpu.{json,md}")}`);
process.exit(0);

#!/usr/bin/env node
/**
 * `npm run bench:embeddings`: embeddings on the CPU, in one run and one Chromium build, at one
 * thread and at every core:
 * - our `/v1/embeddings` (base64, as the OpenAI SDKs ask) against our llama.cpp engine driven
 *   directly in the same page, in alternating order, and against native llama.cpp
 *   (`llama-server --embeddings`, built from the same source: scripts/llama-native.mjs);
 * - transformers.js v4 (ONNX Runtime Web, WebAssembly), what browser apps embed with today, on
 *   random-weight ONNX files of the same shapes (bench/onnx-model.py, which needs torch,
 *   transformers, onnx and onnxruntime from PyPI; `PYTHON` names the interpreter);
 * - one 10-token query, the path a search box takes, through /v1 and directly.
 * The batch is 64 inputs of about 100 tokens. The files (scripts/test-gguf.mjs): BERT at
 * all-MiniLM-L6-v2's shapes and at nomic-embed-text-v1.5's width and depth, in Q8_0 and F16.
 * Writes bench/results/embeddings.{json,md}.
 *
 *   --iterations N   the most batches per file, thread count and path (default 9)
 *   --budget S       seconds a file's batches may take at one thread count, past two (default 240)
 *   --queries N      one-query pairs (default 40)
 *   --shapes A,B     of minilm and nomic (default both)
 *   --types A,B      of q8_0 and f16 (default both)
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { startStaticServer } from "../scripts/static-server.mjs";
import { embeddingEntry } from "./embedding-model.mjs";
import { buildTestGguf, ggufVariants, wordPieceVocabulary } from "../scripts/test-gguf.mjs";
import { startLlamaServer } from "../scripts/llama-native.mjs";
import { median } from "./statistics.mjs";
import { remotePages } from "./remote-page.mjs";

const root = resolve(import.meta.dirname, "..");
const { values: options } = parseArgs({
  options: {
    iterations: { type: "string", default: "9" },
    budget: { type: "string", default: "240" },
    shapes: { type: "string", default: "minilm,nomic" },
    types: { type: "string", default: "q8_0,f16" },
    queries: { type: "string", default: "40" },
    out: { type: "string", default: resolve(root, "bench/results") },
  },
});
const iterations = Number(options.iterations);
const budgetMs = Number(options.budget) * 1000;
const queries = Number(options.queries);
const cores = availableParallelism();
const threadCounts = [...new Set([1, cores])];
const shapes = options.shapes.split(",");
const variants = shapes.flatMap((shape) => options.types.split(",").map((type) => `embed-${shape}-${type}`));
const dtypes = ["q8", "fp32"];
const log = (line) => console.log(`[bench:embeddings ${new Date().toISOString().slice(11, 19)}] ${line}`);

const gguf = resolve(root, ".cache/test-gguf");
const onnx = resolve(root, ".cache/onnx-models");
const transformers = resolve(root, "bench/transformers");
for (const variant of variants) buildTestGguf(gguf, variant);
const { tokens: vocabulary } = wordPieceVocabulary();

/** The WordPiece tokenizer of the GGUF files' vocabulary, in tokenizer.json's form: a first piece bare, a continuation after "##". */
function tokenizerFiles(directory, positions) {
  const specials = vocabulary.filter((token) => /^\[[A-Za-z0-9]+\]$/.test(token));
  const vocab = Object.fromEntries(
    vocabulary.map((token, id) => [
      specials.includes(token) ? token : token.startsWith("\u2581") ? token.slice(1) : `##${token}`,
      id,
    ]),
  );
  const special = (id) => ({ SpecialToken: { id, type_id: 0 } });
  const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map((content) => ({
      id: vocab[content],
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [special("[CLS]"), { Sequence: { id: "A", type_id: 0 } }, special("[SEP]")],
      pair: [
        special("[CLS]"),
        { Sequence: { id: "A", type_id: 0 } },
        special("[SEP]"),
        { Sequence: { id: "B", type_id: 1 } },
        special("[SEP]"),
      ],
      special_tokens: Object.fromEntries(
        ["[CLS]", "[SEP]"].map((token) => [token, { id: token, ids: [vocab[token]], tokens: [token] }]),
      ),
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: "[UNK]",
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab,
    },
  };
  writeFileSync(join(directory, "tokenizer.json"), JSON.stringify(tokenizer));
  writeFileSync(
    join(directory, "tokenizer_config.json"),
    JSON.stringify({
      tokenizer_class: "BertTokenizer",
      do_lower_case: true,
      model_max_length: positions,
      cls_token: "[CLS]",
      sep_token: "[SEP]",
      pad_token: "[PAD]",
      unk_token: "[UNK]",
      mask_token: "[MASK]",
    }),
  );
}

/** Each shape's ONNX files, written once (a stamp beside them). */
function onnxModel(shape) {
  const { layers, embedding, heads, feedForward, contextLength } = ggufVariants[`embed-${shape}-q8_0`];
  const directory = join(onnx, shape);
  const stamp = join(directory, "complete-1");
  if (!existsSync(stamp)) {
    const python = process.env.PYTHON ?? "python3";
    const shapeArgs = [layers, embedding, heads, feedForward, vocabulary.length, contextLength].map(String);
    log(`writing the ${shape} ONNX files with ${python} bench/onnx-model.py`);
    try {
      execFileSync(python, [resolve(root, "bench/onnx-model.py"), directory, ...shapeArgs], { stdio: "inherit" });
    } catch (error) {
      throw new Error(
        `bench/onnx-model.py failed (${error.message}): it needs torch, transformers, onnx and onnxruntime (pip install them, or set PYTHON to an interpreter that has them)`,
        { cause: error },
      );
    }
    tokenizerFiles(directory, contextLength);
    writeFileSync(stamp, "");
  }
  return directory;
}
for (const shape of shapes) onnxModel(shape);
if (!existsSync(join(transformers, "node_modules/@huggingface/transformers")))
  execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: transformers, stdio: "inherit" });

/** Sentences of the vocabulary's whole words (one token each), `count` words long, distinct for each `seed`. */
const words = vocabulary.filter((token) => /^\u2581[a-z]{3,}$/.test(token)).map((token) => token.slice(1));
const sentence = (seed, count) =>
  Array.from({ length: count }, (_, index) => words[(seed * 7_919 + index * 104_729) % words.length]).join(" ");
const batch = (seed) => Array.from({ length: 64 }, (_, index) => sentence(seed * 64 + index, 98));
const query = (seed) => sentence(1_000_000 + seed, 8);

/**
 * Native llama.cpp's server on the file at `threads` threads. One slot: measured here, one slot
 * embedded a batch faster than 64 slots sharing a unified cache, so it is native's better figure.
 */
function nativeServer(variant, threads) {
  const args = ["--embeddings", "-t", String(threads), "-np", "1", "-c", "2048", "-b", "2048", "-ub", "2048"];
  return startLlamaServer(join(gguf, ggufVariants[variant].file), args);
}

async function nativeEmbed(server, input) {
  const started = performance.now();
  const response = await fetch(`${server.origin}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "native", input, encoding_format: "base64" }),
  });
  if (!response.ok) throw new Error(`llama-server answered ${response.status}: ${await response.text()}`);
  const body = await response.json();
  const ms = performance.now() - started;
  return { ms, promptTokens: body.usage.prompt_tokens, vectors: body.data.length };
}

const rate = (sample) => sample.promptTokens / (sample.ms / 1000);

const remote = remotePages();
const isolatedWorker = { "cross-origin-embedder-policy": "require-corp" };
const server = await startStaticServer(
  [
    { prefix: "/test-gguf/", directory: gguf },
    { prefix: "/onnx-models/", directory: onnx },
    // ONNX Runtime's threads are Workers of its .mjs files, which an isolated page's Workers must say they may be.
    {
      prefix: "/transformers/",
      directory: join(transformers, "node_modules/@huggingface/transformers/dist"),
      headers: isolatedWorker,
    },
    {
      prefix: "/onnxruntime/",
      directory: join(transformers, "node_modules/onnxruntime-web/dist"),
      headers: isolatedWorker,
    },
    { prefix: "/", directory: resolve(root, ".cache/bench") },
    { prefix: "/", directory: resolve(root, "dist") },
  ],
  { control: true, extend: remote.extend },
);

/**
 * One file at one thread count: a warm-up on each path, then batches through /v1 and directly,
 * the two in alternating order (what the first leaves behind falls on each alike), then native's,
 * each batch of texts of its own: `iterations` of them, or fewer (two at least) where they would
 * take past the budget, as a slow file's do.
 */
async function sampleFile(page, variant, threads) {
  const native = await nativeServer(variant, threads);
  const samples = [];
  try {
    // The warm-up: a few inputs on each path, enough for the kernels to be compiled and tiered up.
    const warm = batch(0).slice(0, 8);
    await page.call("embedOurs", { model: variant, input: warm });
    await page.call("embedDirect", { model: variant, input: warm });
    await nativeEmbed(native, warm);
    const started = performance.now();
    for (let iteration = 1; iteration <= iterations; iteration++) {
      const elapsed = performance.now() - started;
      if (iteration > 2 && elapsed + elapsed / (iteration - 1) > budgetMs) break;
      const input = batch(iteration);
      const order = iteration % 2 ? ["ours", "direct"] : ["direct", "ours"];
      const pair = {};
      for (const path of order)
        pair[path] = await page.call(path === "ours" ? "embedOurs" : "embedDirect", { model: variant, input });
      pair.native = await nativeEmbed(native, input);
      samples.push({ variant, threads, iteration, ...pair });
      log(
        `${variant} ${threads} thread(s) #${iteration}: native ${rate(pair.native).toFixed(0)}, /v1 ${rate(pair.ours).toFixed(0)}, direct ${rate(pair.direct).toFixed(0)} tok/s`,
      );
    }
  } finally {
    native.stop();
  }
  return samples;
}

/** The search box's path: one short query at a time, through /v1 and directly, in alternating order. */
async function sampleQueries(page, variant) {
  for (let warm = 0; warm < 5; warm++) {
    await page.call("embedOurs", { model: variant, input: [query(warm)] });
    await page.call("embedDirect", { model: variant, input: [query(warm)] });
  }
  const pairs = [];
  for (let index = 0; index < queries; index++) {
    const input = [query(100 + index)];
    const pair = {};
    for (const path of index % 2 ? ["direct", "ours"] : ["ours", "direct"])
      pair[path] = await page.call(path === "ours" ? "embedOurs" : "embedDirect", { model: variant, input });
    // The service worker's trivial echo beside each pair: the browser's own floor under any fetch
    // a worker answers, which the chat path's fixed cost is measured over too (bench/run.mjs).
    [pair.echoMs] = await page.call("roundTrips", "/bench/echo", 1, null, 200);
    pairs.push(pair);
  }
  return pairs;
}

/** transformers.js on each shape and dtype, in a page of its own (ONNX Runtime's threads are set once per page). */
async function sampleTransformers(threads) {
  const samples = [];
  const page = remote.open(`${server.origin}/index.html?isolated&remote`);
  try {
    for (const shape of shapes)
      for (const dtype of dtypes) {
        const loaded = await page.call("transformersLoad", { model: shape, dtype, threads });
        await page.call("transformersEmbed", { input: batch(0) });
        for (let iteration = 1; iteration <= iterations; iteration++) {
          const sample = await page.call("transformersEmbed", { input: batch(iteration) });
          samples.push({ shape, dtype, threads, ortThreads: loaded.threads, iteration, sample });
          log(`transformers.js ${shape} ${dtype} ${threads} thread(s) #${iteration}: ${rate(sample).toFixed(0)} tok/s`);
        }
      }
  } finally {
    await page.close();
  }
  return samples;
}

const batches = [];
const transformersSamples = [];
let queryPairs = [];
try {
  for (const threads of threadCounts) {
    const page = remote.open(`${server.origin}/index.html?isolated&remote`);
    try {
      const models = variants.map((variant) => embeddingEntry(variant, server.origin, gguf));
      const started = { serviceWorkerUrl: "/bench-sw.js", engine: "llamacpp", models, pageEngine: { threads } };
      await page.call("start", { ...started, databaseName: "webgpu-inference-embeddings" }, true);
      for (const variant of variants) batches.push(...(await sampleFile(page, variant, threads)));
      if (threads === 1 && variants.includes("embed-minilm-q8_0"))
        queryPairs = await sampleQueries(page, "embed-minilm-q8_0");
    } finally {
      await page.close();
    }
    transformersSamples.push(...(await sampleTransformers(threads)));
  }
} finally {
  await server.close();
}

const fixed = (value, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : "—");
const transformersRate = (shape, dtype, threads) =>
  median(
    transformersSamples
      .filter((entry) => entry.shape === shape && entry.dtype === dtype && entry.threads === threads)
      .map((entry) => rate(entry.sample)),
  );
const rows = variants.flatMap((variant) =>
  threadCounts.map((threads) => {
    const group = batches.filter((sample) => sample.variant === variant && sample.threads === threads);
    const shape = variant.split("-")[1];
    const transformersRates = Object.fromEntries(
      dtypes.map((dtype) => [dtype, transformersRate(shape, dtype, threads)]),
    );
    return {
      file: ggufVariants[variant].file,
      shape,
      threads,
      batches: group.length,
      tokens: median(group.map((sample) => sample.ours.promptTokens)),
      native: median(group.map((sample) => rate(sample.native))),
      ours: median(group.map((sample) => rate(sample.ours))),
      direct: median(group.map((sample) => rate(sample.direct))),
      // Each /v1 batch against the direct one beside it: the machine's drift cancels.
      paired: median(group.map((sample) => sample.direct.ms / sample.ours.ms)),
      transformers: transformersRates,
      transformersBest: Math.max(...Object.values(transformersRates)),
    };
  }),
);
const queryDifference = median(queryPairs.map((pair) => pair.ours.ms - pair.direct.ms));
const queryEcho = median(queryPairs.map((pair) => pair.echoMs));
const queryOverhead = median(queryPairs.map((pair) => pair.ours.ms - pair.direct.ms - pair.echoMs));
const queryOurs = median(queryPairs.map((pair) => pair.ours.ms));
const queryDirect = median(queryPairs.map((pair) => pair.direct.ms));
const queryTokens = median(queryPairs.map((pair) => pair.ours.promptTokens));
const ortThreads = [...new Set(transformersSamples.map((entry) => `${entry.threads}→${entry.ortThreads}`))].join(", ");

const targets = [
  ...rows.map((row) => ({
    goal: `${row.file}, ${row.threads} thread(s): /v1 ≥ 0.3× native llama.cpp`,
    measured: row.ours / row.native,
    met: row.ours / row.native >= 0.3,
  })),
  ...rows.map((row) => ({
    goal: `${row.file}, ${row.threads} thread(s): /v1 ≥ 1.5× transformers.js (its faster dtype on the same shape)`,
    measured: row.ours / row.transformersBest,
    met: row.ours / row.transformersBest >= 1.5,
  })),
  ...rows.map((row) => ({
    goal: `${row.file}, ${row.threads} thread(s): the batch through /v1 within 3% of the engine driven directly (median of per-batch ratios)`,
    measured: row.paired,
    met: row.paired >= 0.97,
  })),
  {
    goal: `One ${fixed(queryTokens, 0)}-token query, embed-minilm-shape-q8_0, 1 thread: /v1 adds ≤ 3 ms over the engine driven directly, over the worker's echo as the chat path's fixed cost is judged (median of per-pair /v1 − direct − echo, ms)`,
    measured: queryOverhead,
    met: queryOverhead <= 3,
  },
];
const lines = [
  "# Embeddings on the CPU: /v1 against native llama.cpp and transformers.js",
  "",
  `Run ${new Date().toISOString()} on ${cores} cores · Chromium · native: llama.cpp's llama-server --embeddings from the same source as our WebAssembly build, one slot · transformers.js ${transformersVersion()} (ONNX Runtime Web, WebAssembly; its threads asked → given: ${ortThreads}). A batch is 64 inputs of about 100 tokens, each batch texts of its own; up to ${iterations} batches per file, thread count and path (fewer, two at least, where they would take past ${options.budget} s: the "Batches" column), after an unmeasured warm-up of 8 inputs, /v1 and direct in alternating order. Random weights (scripts/test-gguf.mjs; bench/onnx-model.py for the same shapes in ONNX, its q8 being ONNX Runtime's dynamic int8 quantization). Rates are tokens embedded per second, each path counting with its own tokenizer of the same WordPiece vocabulary.`,
  "",
  "| File | Threads | Batches | Tokens per batch | Native tok/s | /v1 tok/s | Direct tok/s | transformers.js q8 tok/s | transformers.js fp32 tok/s | /v1 / native | /v1 / transformers.js (faster) | /v1 / direct (per-batch ratios) |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ...rows.map(
    (row) =>
      `| ${row.file} | ${row.threads} | ${row.batches} | ${fixed(row.tokens, 0)} | ${fixed(row.native, 0)} | ${fixed(row.ours, 0)} | ${fixed(row.direct, 0)} | ${fixed(row.transformers.q8, 0)} | ${fixed(row.transformers.fp32, 0)} | ${fixed(row.ours / row.native, 3)} | ${fixed(row.ours / row.transformersBest, 2)} | ${fixed(row.paired, 3)} |`,
  ),
  "",
  `One query (${fixed(queryTokens, 0)} tokens, ${queryPairs.length} pairs, 1 thread): /v1 ${fixed(queryOurs, 2)} ms, direct ${fixed(queryDirect, 2)} ms, the worker's trivial echo ${fixed(queryEcho, 2)} ms (medians); /v1 − direct ${fixed(queryDifference, 2)} ms, and less the echo beside it ${fixed(queryOverhead, 2)} ms (medians of per-pair differences). /v1 includes the key's rate window and the policy's admission (an IndexedDB transaction; the settlement commits behind the reply) and the hop from the worker to the page that hosts llama.cpp and back.`,
  "",
  "## Targets (issue #63)",
  "",
  "| Target | Measured | Met |",
  "|---|---|---|",
  ...targets.map((target) => `| ${target.goal} | ${fixed(target.measured, 3)} | ${target.met ? "yes" : "**no**"} |`),
  "",
];

function transformersVersion() {
  const manifest = join(transformers, "node_modules/@huggingface/transformers/package.json");
  return JSON.parse(readFileSync(manifest, "utf8")).version;
}

mkdirSync(options.out, { recursive: true });
const results = {
  date: new Date().toISOString(),
  cores,
  iterations,
  rows,
  targets,
  queryPairs,
  batches,
  transformersSamples,
};
writeFileSync(join(options.out, "embeddings.json"), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(options.out, "embeddings.md"), lines.join("\n"));
log(`wrote ${join(options.out, "embeddings.{json,md}")}`);
process.exit(0);

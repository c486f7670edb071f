#!/usr/bin/env node
/**
 * `npm run bench:retrieval`: retrieval on the CPU, in one run and one Chromium build:
 * - indexing: a 1 MB Markdown file indexed through `/v1/vector_stores` (upload, extraction,
 *   chunking, embedding, storing, polled as an app polls), against its chunks embedded through
 *   `/v1/embeddings` alone, in alternating order, on llama.cpp at every core;
 * - search: the store's index (src/retrieval/search-index.ts) built and searched in the page at
 *   10,000 and 100,000 chunks of 384 dimensions, against embedding one 10-token query with a
 *   384-dimension model, llama.cpp driven directly, at one thread and at every core;
 * - recall: labelled passages in a store of the seed's snowflake-arctic-embed-s on the
 *   deterministic engine, each query searched by vectors alone, by words alone and by both.
 * The model: BERT at all-MiniLM-L6-v2's shapes, Q8_0, random weights (scripts/test-gguf.mjs).
 * Writes bench/results/retrieval.{json,md}.
 *
 *   --rounds N     indexing rounds, each the two paths (default 2)
 *   --searches N   searches per size (default 30)
 *   --sizes A,B    index sizes (default 10000,100000)
 *   --kilobytes N  the Markdown file's size (default 1000: the target's; less for a harness check)
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { startStaticServer } from "../scripts/static-server.mjs";
import { embeddingEntry } from "./embedding-model.mjs";
import { buildTestGguf, wordPieceVocabulary } from "../scripts/test-gguf.mjs";
import { median, percentile } from "./statistics.mjs";
import { remotePages } from "./remote-page.mjs";

const root = resolve(import.meta.dirname, "..");
const { values: options } = parseArgs({
  options: {
    rounds: { type: "string", default: "2" },
    searches: { type: "string", default: "30" },
    sizes: { type: "string", default: "10000,100000" },
    kilobytes: { type: "string", default: "1000" },
    batch: { type: "string", default: "32" },
    out: { type: "string", default: resolve(root, "bench/results") },
  },
});
const rounds = Number(options.rounds);
const searches = Number(options.searches);
const sizes = options.sizes.split(",").map(Number);
const cores = availableParallelism();
const threadCounts = [...new Set([1, cores])];
const variant = "embed-minilm-q8_0";
const log = (line) => console.log(`[bench:retrieval ${new Date().toISOString().slice(11, 19)}] ${line}`);

const gguf = resolve(root, ".cache/test-gguf");
buildTestGguf(gguf, variant);
const { tokens: vocabulary } = wordPieceVocabulary();
const words = vocabulary.filter((token) => /^\u2581[a-z]{3,}$/.test(token)).map((token) => token.slice(1));

/** A seeded generator, so every run reads the same texts. */
function generator(seed) {
  let state = seed;
  return () => (state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
}

/** `--kilobytes` of Markdown (1 MB unless told): headings, paragraphs and lists of the vocabulary's words. */
function markdown() {
  const length = Number(options.kilobytes) * 1000;
  const random = generator(1);
  const word = () => words[Math.floor(random() * words.length)];
  const sentence = (length) => Array.from({ length }, word).join(" ") + ".";
  const parts = ["# A manual of a thousand kilobytes"];
  for (let section = 1, total = 0; total < length; section++) {
    parts.push(`## Section ${section}: ${sentence(4)}`);
    parts.push(Array.from({ length: 5 }, () => sentence(12)).join(" "));
    parts.push(Array.from({ length: 3 }, () => `- ${sentence(8)}`).join("\n"));
    total += parts.at(-1).length + parts.at(-2).length + parts.at(-3).length + 6;
  }
  return parts.join("\n\n").slice(0, length);
}

/** One 10-token query (8 whole words, and the two special tokens), distinct for each seed. */
const query = (seed) =>
  Array.from({ length: 8 }, (_, index) => words[(seed * 7_919 + index * 104_729) % words.length]).join(" ");

/**
 * Labelled passages, and a query for each: 40 topics of 25 words each, every passage 24 words of
 * its topic and 8 common words, and two names of its own. A query asks as people do: in three of
 * the passage's words, each in another form half the time (a plural, "-ing" or "-ed", which a
 * word index does not match and a subword embedding partly does), half the time with one of the
 * passage's names, and in a word no passage has.
 */
function labelled(count) {
  const random = generator(2);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const pool = [...words].sort(() => random() - 0.5);
  const topics = Array.from({ length: 40 }, (_, topic) => pool.slice(topic * 25, topic * 25 + 25));
  const common = pool.slice(1_000, 1_050);
  const names = pool.slice(1_050, 1_050 + 2 * count);
  const unknown = pool.slice(1_050 + 2 * count, 1_050 + 2 * count + 200);
  const passages = [];
  const queries = [];
  for (let place = 0; place < count; place++) {
    const topic = topics[place % topics.length];
    const own = Array.from({ length: 24 }, () => pick(topic));
    const text = [...own, ...Array.from({ length: 8 }, () => pick(common)), names[2 * place], names[2 * place + 1]];
    passages.push(text.sort(() => random() - 0.5).join(" "));
    const inflected = (word) => (random() < 0.5 ? word : `${word}${pick(["s", "ing", "ed"])}`);
    const asked = [
      ...Array.from({ length: 3 }, () => inflected(pick(own))),
      random() < 0.5 ? names[2 * place] : pick(unknown),
      pick(unknown),
    ];
    queries.push({ text: asked.join(" "), passage: place });
  }
  return { passages, queries };
}

const remote = remotePages();
const server = await startStaticServer(
  [
    { prefix: "/test-gguf/", directory: gguf },
    { prefix: "/", directory: resolve(root, ".cache/bench") },
    { prefix: "/", directory: resolve(root, "dist") },
  ],
  { control: true, extend: remote.extend },
);

/** A page of its own (a fresh profile), started on `engine`; `run` is given it. */
async function withPage(start, run) {
  const page = remote.open(`${server.origin}/index.html?isolated&remote`);
  try {
    await page.call(
      "start",
      { serviceWorkerUrl: "/bench-sw.js", ...start, databaseName: "webgpu-inference-retrieval" },
      true,
    );
    return await run(page);
  } finally {
    await page.close();
  }
}

/** Indexing against embedding alone, at every core, in alternating order after a warm-up of each. */
async function sampleIndexing(page) {
  const text = markdown();
  const model = variant;
  const warm = await page.call("indexFile", { model, filename: "warm.md", text: text.slice(0, 20_000) });
  await page.call("embedChunks", { model, storeId: warm.storeId, fileId: warm.fileId, batch: 32 });
  const samples = [];
  let last;
  for (let round = 1; round <= rounds; round++) {
    const sample = {};
    for (const path of round % 2 || !last ? ["index", "embed"] : ["embed", "index"]) {
      if (path === "index") last = sample.index = await page.call("indexFile", { model, filename: "manual.md", text });
      else
        sample.embed = await page.call("embedChunks", {
          model,
          storeId: last.storeId,
          fileId: last.fileId,
          batch: Number(options.batch),
        });
    }
    samples.push(sample);
    log(
      `indexing #${round}: ${sample.index.chunks} chunks, index ${(sample.index.ms / 1000).toFixed(1)} s, /v1/embeddings ${(sample.embed.ms / 1000).toFixed(1)} s`,
    );
  }
  return samples;
}

/** One 10-token query, the engine driven directly, `searches` times after a warm-up. */
async function sampleQueries(page, threads) {
  for (let warm = 0; warm < 5; warm++) await page.call("embedDirect", { model: variant, input: [query(warm)] });
  const times = [];
  for (let index = 0; index < searches; index++)
    times.push((await page.call("embedDirect", { model: variant, input: [query(100 + index)] })).ms);
  log(`one query embedded at ${threads} thread(s): ${median(times).toFixed(2)} ms`);
  return times;
}

async function sampleSearch(page) {
  const random = generator(3);
  const texts = Array.from({ length: 5_000 }, () =>
    Array.from({ length: 300 }, () => words[Math.floor(random() * words.length)]).join(" "),
  );
  const queries = Array.from({ length: searches }, (_, index) => query(500 + index));
  const bySize = [];
  for (const count of sizes) {
    const result = await page.call("searchAtScale", { count, dimensions: 384, texts, queries });
    bySize.push({ count, ...result });
    log(
      `search at ${count} chunks: ${median(result.searchMs).toFixed(2)} ms, index ${(result.bytes / 1e6).toFixed(0)} MB`,
    );
  }
  return bySize;
}

const queryTimes = {};
let indexing = [];
let search = [];
let recall;
try {
  for (const threads of threadCounts)
    await withPage(
      { engine: "llamacpp", models: [embeddingEntry(variant, server.origin, gguf)], pageEngine: { threads } },
      async (page) => {
        queryTimes[threads] = await sampleQueries(page, threads);
        if (threads === cores) {
          indexing = await sampleIndexing(page);
          search = await sampleSearch(page);
        }
      },
    );
  const set = labelled(400);
  recall = await withPage({ engine: "deterministic" }, (page) =>
    page.call("recall", { model: "snowflake-arctic-embed-s", ...set }),
  );
  log(`recall@5: vectors ${recall.vectors}, words ${recall.keywords}, hybrid ${recall.hybrid} of ${recall.queries}`);
} finally {
  await server.close();
}

const fixed = (value, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : "—");
const indexRatio = median(indexing.map((sample) => sample.index.ms / sample.embed.ms));
const searchMedian = (count) => median(search.find((row) => row.count === count)?.searchMs ?? []);
const largest = sizes.at(-1);
const smallest = sizes[0];
const growth = searchMedian(largest) / searchMedian(smallest);
const targets = [
  {
    goal: "Indexing a 1 MB Markdown file takes at most 1.2× embedding its chunks through /v1/embeddings alone (median of per-round ratios)",
    measured: indexRatio,
    met: indexRatio <= 1.2,
  },
  ...threadCounts.map((threads) => ({
    goal: `One query's search at ${largest.toLocaleString("en-US")} chunks of 384 dimensions costs less than embedding that query (10 tokens, ${threads} thread(s); search ms ÷ embedding ms, medians)`,
    measured: searchMedian(largest) / median(queryTimes[threads]),
    met: searchMedian(largest) < median(queryTimes[threads]),
  })),
  {
    goal: `Search grows at most linearly from ${smallest.toLocaleString("en-US")} to ${largest.toLocaleString("en-US")} chunks (time ratio ≤ ${largest / smallest})`,
    measured: growth,
    met: growth <= largest / smallest,
  },
  {
    goal: "Recall@5: hybrid ≥ vectors alone and ≥ words alone (hybrid − the better of the two, in queries)",
    measured: recall.hybrid - Math.max(recall.vectors, recall.keywords),
    met: recall.hybrid >= recall.vectors && recall.hybrid >= recall.keywords,
  },
];
const lines = [
  "# Retrieval on the CPU: indexing, search at scale, and recall",
  "",
  `Run ${new Date().toISOString()} on ${cores} cores · Chromium. The embedding model is BERT at all-MiniLM-L6-v2's shapes (384 dimensions), Q8_0, random weights, on our llama.cpp WebAssembly build.`,
  "",
  `## Indexing a ${Number(options.kilobytes) / 1000} MB Markdown file`,
  "",
  `Through \`/v1/vector_stores\` (upload, extraction, chunking with the default strategy, embedding and storing in the worker's background, polled as the OpenAI SDKs poll: after the \`openai-poll-after-ms\` the file answers with) against the same chunks read back and embedded through \`/v1/embeddings\` alone, 32 a request, at ${cores} threads, alternating which goes first, after a warm-up of each.`,
  "",
  "| Round | Chunks | Tokens | Indexing s | /v1/embeddings s | Ratio |",
  "|---|---|---|---|---|---|",
  ...indexing.map(
    (sample, round) =>
      `| ${round + 1} | ${sample.index.chunks} | ${sample.index.tokens} | ${fixed(sample.index.ms / 1000, 1)} | ${fixed(sample.embed.ms / 1000, 1)} | ${fixed(sample.index.ms / sample.embed.ms, 3)} |`,
  ),
  "",
  "## Search at scale",
  "",
  `The store's index built in the page from random unit vectors of 384 dimensions and chunks of 300 of the vocabulary's words (5,000 distinct texts), then ${searches} queries of 8 words, each timed (hybrid, top 10). Beside it, one 10-token query embedded by the engine driven directly, ${searches} times.`,
  "",
  "| Chunks | Build s | Search p50 ms | Search p95 ms | Index memory MB |",
  "|---|---|---|---|---|",
  ...search.map(
    (row) =>
      `| ${row.count.toLocaleString("en-US")} | ${fixed(row.buildMs / 1000, 1)} | ${fixed(median(row.searchMs), 2)} | ${fixed(percentile(row.searchMs, 0.95), 2)} | ${fixed(row.bytes / 1e6, 0)} |`,
  ),
  "",
  ...threadCounts.map(
    (threads) =>
      `One 10-token query embedded at ${threads} thread(s): ${fixed(median(queryTimes[threads]), 2)} ms p50, ${fixed(percentile(queryTimes[threads], 0.95), 2)} ms p95.`,
  ),
  "",
  "## Recall",
  "",
  `${recall.queries} labelled queries over ${recall.queries} passages (bench/retrieval.mjs's \`labelled\`), in a store of snowflake-arctic-embed-s on the deterministic engine (a hashed bag of tokens), each searched through \`/v1/vector_stores/{id}/search\` by vectors alone (\`hybrid_search\` 1/0), words alone (0/1) and the default mix. Found in the top 5: vectors ${recall.vectors}, words ${recall.keywords}, hybrid ${recall.hybrid}.`,
  "",
  "## Targets (issue #64)",
  "",
  "| Target | Measured | Met |",
  "|---|---|---|",
  ...targets.map((target) => `| ${target.goal} | ${fixed(target.measured, 3)} | ${target.met ? "yes" : "**no**"} |`),
  "",
];
mkdirSync(options.out, { recursive: true });
const results = { date: new Date().toISOString(), cores, indexing, search, queryTimes, recall, targets };
writeFileSync(join(options.out, "retrieval.json"), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(options.out, "retrieval.md"), lines.join("\n"));
log(`wrote ${join(options.out, "retrieval.{json,md}")}`);
process.exit(0);

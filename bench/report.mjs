/**
 * Turns a benchmark run's samples into the results table and the chart. Pure: the samples in,
 * text out, so a run's JSON can be re-reported (`node bench/report.mjs results.json`).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { medianInterval, percentile } from "./statistics.mjs";

/** The report's medians are nearest-rank, as its other percentiles are. */
const p50 = (values) => percentile(values, 0.5);

/** Decode rate: tokens after the first over the time after the first, or the whole request's rate when not streamed. */
function tokensPerSecond(sample, stream) {
  if (stream)
    return sample.firstTokenMs === null || sample.completionTokens < 2
      ? Number.NaN
      : ((sample.completionTokens - 1) * 1000) / (sample.totalMs - sample.firstTokenMs);
  return (sample.completionTokens * 1000) / sample.totalMs;
}

const fixed = (value, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : "n/a");

/** The summary each target is judged on. */
export function summarize(results) {
  const byMode = (stream) => results.generation.filter((row) => row.stream === stream);
  const generation = Object.fromEntries(
    [true, false].map((stream) => {
      const rows = byMode(stream);
      const ratios = rows.map((row) => tokensPerSecond(row.ours, stream) / tokensPerSecond(row.raw, stream));
      const ttftDifferences = rows.map(
        (row) => (row.ours.firstTokenMs ?? Number.NaN) - (row.raw.firstTokenMs ?? Number.NaN),
      );
      const totalRatios = rows.map((row) => row.ours.totalMs / row.raw.totalMs);
      return [
        stream ? "streamed" : "whole",
        {
          requests: rows.length,
          rawTokensPerSecond: p50(rows.map((row) => tokensPerSecond(row.raw, stream))),
          oursTokensPerSecond: p50(rows.map((row) => tokensPerSecond(row.ours, stream))),
          ratioMedian: p50(ratios),
          ratioInterval: medianInterval(ratios),
          ratioP95Low: percentile(ratios, 0.05),
          ttftDifferenceMedianMs: p50(ttftDifferences),
          ttftDifferenceInterval: medianInterval(ttftDifferences),
          ttftDifferenceP95Ms: percentile(ttftDifferences, 0.95),
          totalRatioMedian: p50(totalRatios),
          sameOutput: rows.every(
            (row) => row.raw.text === row.ours.text && row.raw.completionTokens === row.ours.completionTokens,
          ),
        },
      ];
    }),
  );
  const trips = Object.fromEntries(
    Object.entries(results.roundTrips).map(([name, values]) => [
      name,
      { count: values.length, p50Ms: p50(values), p99Ms: percentile(values, 0.99) },
    ]),
  );
  const turnRows = (path) => results.turns.filter((row) => row.path === path);
  const turnRatio = (path) =>
    p50(turnRows(path).map((row) => (row.turn2.firstTokenMs ?? Number.NaN) / (row.turn1.firstTokenMs ?? Number.NaN)));
  const policyP50s = results.policy.map((row) => row.p50Ms);
  return {
    generation,
    trips,
    policy: { rows: results.policy, worstP50Ms: Math.max(...policyP50s), growth: policyP50s.at(-1) / policyP50s[0] },
    turns: {
      ours: {
        turn1Ms: p50(turnRows("ours").map((row) => row.turn1.firstTokenMs)),
        turn2Ms: p50(turnRows("ours").map((row) => row.turn2.firstTokenMs)),
        ratio: turnRatio("ours"),
      },
      raw: {
        turn1Ms: p50(turnRows("raw").map((row) => row.turn1.firstTokenMs)),
        turn2Ms: p50(turnRows("raw").map((row) => row.turn2.firstTokenMs)),
        ratio: turnRatio("raw"),
      },
    },
    coldStart: {
      // Quick mode times our path only.
      rawMs: p50(results.coldStarts.map((row) => row.raw?.sample.firstTokenMs ?? Number.NaN)),
      rawReloadMs: p50(results.coldStarts.map((row) => row.raw?.reloadMs ?? Number.NaN)),
      oursMs: p50(results.coldStarts.map((row) => row.ours.firstTokenMs)),
    },
    engines: summarizeEngines(results.engines ?? []),
    ourCost: summarizeCost(results.ourCost ?? [], results.plan.costTokens),
    softwareAdapter: /swiftshader|llvmpipe|lavapipe|softpipe|basic render|\bwarp\b/i.test(
      results.browser.adapter ?? "",
    ),
  };
}

/**
 * Our cost alone, per mode: the marginal cost per token (the long reply's extra time over the
 * short one's, per extra token, less the engine's own) and the fixed cost per request (the first
 * byte the page reads, less the engine's first part and less the echo route's round trip timed
 * just before it: the service worker's floor, which is the browser's), each as p50 and p95 over
 * the iterations, and the decode ratio the marginal p50 implies for an engine at 30, 100 and
 * 300 tok/s. The first byte with the floor in it is kept beside.
 */
function summarizeCost(rows, tokens) {
  if (rows.length === 0) return null;
  const [short, long] = tokens;
  const mode = (stream) => {
    const of = (iteration, count) =>
      rows.find((row) => row.stream === stream && row.iteration === iteration && row.tokens === count);
    const iterations = [...new Set(rows.map((row) => row.iteration))];
    const marginalUs = iterations.map((iteration) => {
      const [a, b] = [of(iteration, short), of(iteration, long)];
      return ((b.ours.totalMs - a.ours.totalMs - (b.direct.totalMs - a.direct.totalMs)) / (long - short)) * 1000;
    });
    const shortRows = iterations.map((iteration) => of(iteration, short));
    const firstByteMs = shortRows.map((row) => row.ours.firstByteMs - row.direct.firstPartMs);
    const echoMs = shortRows.map((row) => row.echoMs ?? Number.NaN);
    const fixedMs = firstByteMs.map((value, index) => value - echoMs[index]);
    const marginal = p50(marginalUs);
    return {
      requests: rows.filter((row) => row.stream === stream).length,
      marginalP50Us: marginal,
      marginalP95Us: percentile(marginalUs, 0.95),
      fixedP50Ms: p50(fixedMs),
      fixedP95Ms: percentile(fixedMs, 0.95),
      firstByteP50Ms: p50(firstByteMs),
      echoP50Ms: p50(echoMs),
      impliedRatios: Object.fromEntries(
        [30, 100, 300].map((rate) => [rate, 1 / (1 + (Math.max(0, marginal) / 1e6) * rate)]),
      ),
      complete: rows.filter((row) => row.stream === stream).every((row) => row.ours.completionTokens === row.tokens),
    };
  };
  return { short, long, streamed: mode(true), whole: mode(false) };
}

function costSection(summary) {
  const cost = summary.ourCost;
  if (!cost) return [];
  return [
    "## 7. Our cost, isolated: an engine that costs nothing, through /v1 and consumed directly",
    "",
    `A replay engine yields one fixed token as fast as it is read, through the same HTTP surface, policy and SSE writer as /v1 (at /bench/zero/v1), and consumed directly in the same worker; ${cost.short} and ${cost.long} tokens, interleaved. Marginal: the long reply's extra time over the short one's, per extra token, less the engine's own. Fixed: the first byte the page reads, less the engine's first part, less the echo route's round trip timed just before the request (the service worker's own floor: the browser's event dispatch and response piping, which any worker route pays). What remains is ours: routing, reading and checking the body, the key, the rate window, the prompt's tokens and the admission transaction (settlement follows the last token, the same for both lengths). The first byte with the floor in it is the next column.`,
    "",
    "| Mode | Requests | Marginal per token p50 | p95 | Fixed per request p50 | p95 | First byte, floor included, p50 (echo p50) | Implied decode ratio at 30 / 100 / 300 tok/s | Whole replies |",
    "|---|---|---|---|---|---|---|---|---|",
    ...["streamed", "whole"].map((mode) => {
      const row = cost[mode];
      return `| ${mode} | ${row.requests} | ${fixed(row.marginalP50Us, 1)} µs | ${fixed(row.marginalP95Us, 1)} µs | ${fixed(row.fixedP50Ms)} ms | ${fixed(row.fixedP95Ms)} ms | ${fixed(row.firstByteP50Ms)} ms (${fixed(row.echoP50Ms)} ms) | ${[30, 100, 300].map((rate) => fixed(row.impliedRatios[rate], 4)).join(" / ")} | ${row.complete ? "yes" : "no"} |`;
    }),
    "",
  ];
}

/** Prefill rate (the prompt over the time to the first token), decode rate and TTFT of each engine; null for a run without the comparison. */
function summarizeEngines(rows) {
  if (rows.length === 0) return null;
  const of = (name) => {
    const samples = rows.map((row) => row[name]);
    return {
      requests: samples.length,
      promptTokens: p50(samples.map((sample) => sample.promptTokens)),
      ttftMs: p50(samples.map((sample) => sample.firstTokenMs)),
      // Only the tokens prefilled for this request: a prefix the engine reused from its cache
      // (llama.cpp reports it as cached) cost nothing.
      prefillPerSecond: p50(
        samples.map((sample) =>
          sample.firstTokenMs
            ? ((sample.promptTokens - (sample.cachedTokens ?? 0)) * 1000) / sample.firstTokenMs
            : Number.NaN,
        ),
      ),
      decodePerSecond: p50(samples.map((sample) => tokensPerSecond(sample, true))),
    };
  };
  return { webllm: of("webllm"), llamacpp: of("llamacpp") };
}

function engineSection(results, summary) {
  const engines = summary.engines;
  if (!engines) return [];
  const { webllm, llamacpp } = engines;
  const models = results.engineModels;
  return [
    "## 6. Engines side by side: web-llm and llama.cpp through /v1, interleaved",
    "",
    `web-llm runs \`${models.webllm.build}\` on the WebGPU adapter (${results.browser.adapter}); llama.cpp (our WebAssembly build, SIMD kernels) runs \`${models.llamacpp.build}\`, the same shapes in GGUF, on the CPU${results.engines[0]?.llamacpp.threads ? ` with ${results.engines[0].llamacpp.threads} thread(s) (the page cross-origin isolated)` : ""}. Each request a question of its own, streamed at temperature 0: ${results.plan.engineMaxTokens.webllm} tokens from web-llm, ${results.plan.engineMaxTokens.llamacpp} from llama.cpp (decode rates are per token after the first; prefill rates count the uncached prompt tokens only). Each engine counts the prompt with its own vocabulary.`,
    "",
    "| Engine | Requests | Prompt tokens | TTFT (median) | Prefill tok/s | Decode tok/s |",
    "|---|---|---|---|---|---|",
    `| web-llm | ${webllm.requests} | ${fixed(webllm.promptTokens, 0)} | ${fixed(webllm.ttftMs, 0)} ms | ${fixed(webllm.prefillPerSecond, 3)} | ${fixed(webllm.decodePerSecond, 3)} |`,
    `| llama.cpp | ${llamacpp.requests} | ${fixed(llamacpp.promptTokens, 0)} | ${fixed(llamacpp.ttftMs, 0)} ms | ${fixed(llamacpp.prefillPerSecond, 3)} | ${fixed(llamacpp.decodePerSecond, 3)} |`,
    `| llama.cpp / web-llm | | | ${fixed(llamacpp.ttftMs / webllm.ttftMs, 3)} | ${fixed(llamacpp.prefillPerSecond / webllm.prefillPerSecond, 1)}× | ${fixed(llamacpp.decodePerSecond / webllm.decodePerSecond, 1)}× |`,
    "",
  ];
}

/**
 * Each product goal: the measured value, its verdict ("met", "missed" or "unresolved") and, when
 * not met, by how much. The generation targets are judged on the median's 95% interval, because
 * on a CPU-emulated GPU the spread between identical requests is larger than the margins those
 * targets ask about: a median on the right side of the line proves nothing when its interval
 * crosses it.
 */
export function targets(summary) {
  const streamed = summary.generation.streamed;
  const within = (value, target, atLeast) => (atLeast ? value >= target : value <= target);
  const judgedOnValue = (row, target, atLeast) => ({
    ...row,
    verdict: within(row.value, target, atLeast) ? "met" : "missed",
  });
  const judgedOnInterval = (row, interval, target, atLeast, digits) => {
    if (interval === null)
      return { ...row, verdict: "unresolved", gap: "too few requests for an interval of the median" };
    const [low, high] = interval;
    const verdict = within(atLeast ? low : high, target, atLeast)
      ? "met"
      : within(atLeast ? high : low, target, atLeast)
        ? "unresolved"
        : "missed";
    return {
      ...row,
      verdict,
      gap:
        verdict === "unresolved"
          ? `the median's 95% interval, ${fixed(low, digits)} to ${fixed(high, digits)}${row.unit ? ` ${row.unit}` : ""}, spans the target`
          : row.gap,
    };
  };
  // On a software adapter a token takes seconds: the real engine's ratios cannot show a cost of
  // microseconds, so they are reported, and judged only on a real adapter (section 7 measures ours).
  const onRealAdapter = (row) =>
    summary.softwareAdapter ? { ...row, verdict: "n/a", gap: "judged on a real adapter only" } : row;
  const modelsOverEcho = summary.trips.models.p50Ms / summary.trips.echo.p50Ms;
  const cost = summary.ourCost;
  const rows = [
    onRealAdapter(
      judgedOnInterval(
        {
          goal: "Decode throughput, ours / raw (streamed, median)",
          target: "≥ 0.98",
          value: streamed.ratioMedian,
          gap: `${fixed((0.98 - streamed.ratioMedian) * 100, 1)} points short`,
        },
        streamed.ratioInterval,
        0.98,
        true,
        3,
      ),
    ),
    onRealAdapter(
      judgedOnInterval(
        {
          goal: "TTFT overhead, ours − raw (streamed, p50)",
          target: "≤ 5 ms",
          value: streamed.ttftDifferenceMedianMs,
          unit: "ms",
          gap: `${fixed(streamed.ttftDifferenceMedianMs - 5, 1)} ms over`,
        },
        streamed.ttftDifferenceInterval,
        5,
        false,
        1,
      ),
    ),
    ...(cost
      ? [
          judgedOnValue(
            {
              goal: "Our marginal cost per token (streamed, p50)",
              target: "≤ 20 µs",
              value: cost.streamed.marginalP50Us,
              unit: "µs",
              gap: `${fixed(cost.streamed.marginalP50Us - 20, 1)} µs over`,
            },
            20,
            false,
          ),
          judgedOnValue(
            {
              goal: "Our fixed cost per request (streamed, p50, over the worker's echo)",
              target: "≤ 3 ms",
              value: cost.streamed.fixedP50Ms,
              unit: "ms",
              gap: `${fixed(cost.streamed.fixedP50Ms - 3)} ms over`,
            },
            3,
            false,
          ),
        ]
      : []),
    judgedOnValue(
      {
        goal: "GET /v1/models p50 / echo route p50",
        target: "≤ 1.25",
        value: modelsOverEcho,
        gap: `${fixed(modelsOverEcho - 1.25)} over (${fixed(summary.trips.models.p50Ms)} ms against ${fixed(summary.trips.echo.p50Ms)} ms)`,
      },
      1.25,
      false,
    ),
    judgedOnValue(
      {
        goal: "Policy per request (worst p50 over ledger sizes)",
        target: "≤ 3 ms",
        value: summary.policy.worstP50Ms,
        unit: "ms",
        gap: `${fixed(summary.policy.worstP50Ms - 3)} ms over`,
      },
      3,
      false,
    ),
    judgedOnValue(
      {
        goal: "Policy p50, largest ledger / smallest",
        target: "flat (≤ 1.5)",
        value: summary.policy.growth,
        gap: `${fixed(summary.policy.growth)}× growth`,
      },
      1.5,
      false,
    ),
    judgedOnValue(
      {
        goal: "Turn-2 TTFT / turn-1 TTFT (ours)",
        target: "≤ 0.5",
        value: summary.turns.ours.ratio,
        gap: `${fixed(summary.turns.ours.ratio - 0.5)} over`,
      },
      0.5,
      false,
    ),
  ];
  // A value this run could not measure (one token per request has no decode interval) is not met.
  return rows.map((row) =>
    Number.isFinite(row.value) || row.verdict === "n/a"
      ? row
      : { ...row, verdict: "missed", gap: "not measured in this run" },
  );
}

function chart(summary, title) {
  // Each bar is ours relative to its baseline; 1.0 is parity.
  const bars = [
    ["Decode tok/s, streamed", summary.generation.streamed.ratioMedian, 0.98],
    ["Decode tok/s, whole", summary.generation.whole.ratioMedian, 0.98],
    ["Request time, streamed", 1 / summary.generation.streamed.totalRatioMedian, null],
    ["/v1/models vs echo (p50)", summary.trips.echo.p50Ms / summary.trips.models.p50Ms, null],
    ["401 vs echo (p50)", summary.trips.echo.p50Ms / summary.trips.unauthorized.p50Ms, null],
    ["Cold start vs web-llm reload", summary.coldStart.rawMs / summary.coldStart.oursMs, null],
    ["Turn 2 / turn 1 TTFT (ours)", summary.turns.ours.ratio, 0.5],
    ["Turn 2 / turn 1 TTFT (raw)", summary.turns.raw.ratio, 0.5],
  ];
  const width = 560;
  const scale = (value) => Math.max(0, Math.min(1.5, Number.isFinite(value) ? value : 0)) * (width / 1.5);
  const rows = bars
    .map(([label, value, target], index) => {
      const y = 20 + index * 52;
      return `<text x="0" y="${y + 20}" class="label">${label}</text>
        <rect x="300" y="${y}" width="${scale(value)}" height="28" fill="#3465a4"/>
        <text x="${306 + scale(value)}" y="${y + 20}" class="value">${fixed(value)}</text>
        ${target === null ? "" : `<line x1="${300 + scale(target)}" x2="${300 + scale(target)}" y1="${y - 4}" y2="${y + 32}" stroke="#c00" stroke-width="2"/>`}`;
    })
    .join("\n");
  return `<!doctype html><html><head><meta charset="utf-8"><style>
    body { font: 15px system-ui, sans-serif; margin: 20px; color: #222; }
    .label { font-size: 14px; } .value { font-size: 13px; fill: #333; }
  </style></head><body>
  <h3 style="margin:0 0 8px">${title}</h3>
  <p style="margin:0 0 8px;color:#555">Ours relative to raw WebLLM (speed ratios: 1.0 is parity, higher is faster); red lines are targets.</p>
  <svg width="920" height="${40 + bars.length * 52}">
    <line x1="${300 + scale(1)}" x2="${300 + scale(1)}" y1="10" y2="${30 + bars.length * 52}" stroke="#999" stroke-dasharray="4 4"/>
    ${rows}
  </svg></body></html>`;
}

const ms = (value) => `${fixed(value)} ms`;

/**
 * Why a target can be missed, from this run's own numbers, and what would close the gap. Each
 * says what was measured; none is a verdict written before the run.
 */
export const explanations = {
  "Decode throughput, ours / raw (streamed, median)": (summary) => {
    const streamed = summary.generation.streamed;
    return `Both paths decode on the same engine instance with the same sampler, and on SwiftShader one token takes ${fixed(1 / streamed.rawTokensPerSecond, 1)} s; our per-token work is one SSE frame written in the worker and read by fetch(), microseconds against seconds. The spread between identical requests is the measure of noise here: the ratio's low tail (p95) is ${fixed(streamed.ratioP95Low, 3)}. A gap inside that spread is the machine, not the path; a real GPU run (see the README) decides it.`;
  },
  "TTFT overhead, ours − raw (streamed, p50)": (summary) => {
    const streamed = summary.generation.streamed;
    return `Time to first token here is the prompt's prefill on the CPU, whose run-to-run spread (the TTFT difference's p95 is ${ms(streamed.ttftDifferenceP95Ms)}) dwarfs a few milliseconds. Our fixed cost before the engine starts is measured without the engine in sections 2 and 3: routing and the key check (the 401 round trip, ${ms(summary.trips.unauthorized.p50Ms - summary.trips.echo.p50Ms)} over the echo) and the policy (${ms(summary.policy.worstP50Ms)} p50).`;
  },
  "GET /v1/models p50 / echo route p50": (summary) =>
    `A trivial service-worker echo route takes ${ms(summary.trips.echo.p50Ms)} p50 here. Over it, /v1/models adds ${ms(summary.trips.models.p50Ms - summary.trips.echo.p50Ms)}, with the key from the worker's memory, the rate window counted in memory and the list from the catalogue: what is left is routing, the JSON body and the headers, and a response the worker settles a few microtasks later than the echo's. A 401 for a well-formed unknown key, which is looked up every time (one read-only IndexedDB transaction), adds ${ms(summary.trips.unauthorized.p50Ms - summary.trips.echo.p50Ms)}.`,
  "Our marginal cost per token (streamed, p50)": (summary) =>
    `Each token is a chunk object, one JSON serialisation, one SSE frame and one stream enqueue in the worker, then one read in the page; ${fixed(summary.ourCost.streamed.marginalP50Us, 1)} µs p50 against ${fixed(summary.ourCost.whole.marginalP50Us, 1)} µs for whole replies, which skip the frames. Coalescing text already waiting into one frame when the reader is behind would take the per-frame work off the tokens that queue.`,
  "Our fixed cost per request (streamed, p50, over the worker's echo)": (summary) =>
    `Over the echo, the first byte waits for the key (from the worker's memory once read), the prompt's tokens and the admission (a read-write transaction: section 3 times it with settlement at ${ms(summary.policy.worstP50Ms)} p50). With the floor in it the first byte came at ${ms(summary.ourCost.streamed.firstByteP50Ms)} p50.`,
  "Policy per request (worst p50 over ledger sizes)": (summary) =>
    `One request's policy is two read-write IndexedDB transactions in sequence: admission (window lease when due, account, reservation) and settlement (reservation, account, ledger entry); the key comes from the worker's memory and its last use is written at most once a minute. The ledger's size does not enter (growth ${fixed(summary.policy.growth)}×). On this machine one read-write transaction costs about 0.8 to 1.3 ms with nothing else running, so two leave little room under 3 ms on a loaded CPU.`,
  "Policy p50, largest ledger / smallest": (summary) =>
    `Every policy query is by key (keys by hash, reservations and windows by id); no step reads the ledger. A growth of ${fixed(summary.policy.growth)}× points at IndexedDB's own cost of inserting into larger indexes (id, account, key, time), not at a scan.`,
  "Turn-2 TTFT / turn-1 TTFT (ours)": (summary) =>
    `Raw web-llm measured ${fixed(summary.turns.raw.ratio)} on the same turns. If ours is close to that, the prefix cache is reused through our layer and the gap is the engine's; if raw is well under 0.5 and ours is not, our path re-sends the conversation in a way that breaks web-llm's prefix match.`,
};

/** What ran: the real engine's sections repeat as their time budgets allow (bench/run.mjs), so the counts are this run's. */
function planLine(results) {
  const plan = results.plan;
  // Runs before the budgets had a fixed count per section.
  const count = (value) => (typeof value === "number" ? value : value.maximum);
  const iterations = new Set(results.generation.map((row) => row.iteration)).size || count(plan.iterations);
  const turns = new Set(results.turns.map((row) => row.repetition)).size;
  const length = results.timeline
    ? ` The run took ${Math.round(Object.values(results.timeline).at(-1) / 60)} minutes to its last section (${Object.entries(
        results.timeline,
      )
        .map(([section, seconds]) => `${section} ${seconds} s`)
        .join(", ")}, from the start).`
    : "";
  return `Plan: ${iterations} requests per path and mode at max_tokens ${plan.maxTokens}, interleaved raw, ours, raw, ours; ${plan.roundTrips} round trips of each kind; policy at ${plan.ledgerSizes.join(", ")} ledger entries × ${plan.policyIterations}; ${turns} two-turn chats per path; ${results.coldStarts.length} cold starts per path. On a software adapter the real engine's sections run as many requests as their time budgets hold; on a real one, their maximum.${length}`;
}

const verdictText = { met: "yes", missed: "**no**", unresolved: "not resolved", "n/a": "n/a (software adapter)" };

export function report(results) {
  const summary = summarize(results);
  const goals = targets(summary);
  const g = summary.generation;
  const lines = [
    `# Benchmark: the service-worker path against raw WebLLM${results.quick ? " (quick mode: a harness check, not a measurement)" : ""}`,
    "",
    `Run ${results.date} · model \`${results.model.id}\` (\`${results.model.build}\`) · ${results.browser.userAgent} · WebGPU adapter: ${results.browser.adapter} (${summary.softwareAdapter ? "a software adapter: WebGPU on the CPU" : "a hardware adapter"})`,
    "",
    planLine(results),
    "",
    "## Targets",
    "",
    "| Goal | Target | Measured | Met | Gap |",
    "|---|---|---|---|---|",
    ...goals.map(
      (row) =>
        `| ${row.goal} | ${row.target} | ${fixed(row.value)}${row.unit ? ` ${row.unit}` : ""} | ${verdictText[row.verdict]} | ${row.verdict === "met" ? "" : row.gap} |`,
    ),
    "",
    "## 1. Generation: raw `engine.chat.completions.create` in the worker vs `fetch` to /v1",
    "",
    "| Mode | Requests | Raw tok/s (median) | Ours tok/s (median) | Ratio median | Ratio p95 (low tail) | TTFT ours − raw, median | p95 | Same output |",
    "|---|---|---|---|---|---|---|---|---|",
    // A mode this run did not time (quick mode streams only) has no row.
    ...Object.entries(g)
      .filter(([, row]) => row.requests > 0)
      .map(
        ([mode, row]) =>
          `| ${mode} | ${row.requests} | ${fixed(row.rawTokensPerSecond, 3)} | ${fixed(row.oursTokensPerSecond, 3)} | ${fixed(row.ratioMedian, 3)} | ${fixed(row.ratioP95Low, 3)} | ${mode === "streamed" ? `${fixed(row.ttftDifferenceMedianMs, 1)} ms` : "—"} | ${mode === "streamed" ? `${fixed(row.ttftDifferenceP95Ms, 1)} ms` : "—"} | ${row.sameOutput ? "yes" : "no"} |`,
      ),
    "",
    "## 2. Round trips with no engine (sequential, from the page)",
    "",
    "| Route | Requests | p50 | p99 | p50 over echo |",
    "|---|---|---|---|---|",
    ...[
      ["Trivial worker echo (baseline)", "echo"],
      ["GET /v1/models (valid key)", "models"],
      ["GET /v1/models (unknown key: 401)", "unauthorized"],
    ].map(
      ([label, name]) =>
        `| ${label} | ${summary.trips[name].count} | ${fixed(summary.trips[name].p50Ms)} ms | ${fixed(summary.trips[name].p99Ms)} ms | ${name === "echo" ? "—" : `${fixed(summary.trips[name].p50Ms - summary.trips.echo.p50Ms)} ms`} |`,
    ),
    "",
    "## 3. Policy per request (authenticate, limit check, reserve, settle with its ledger write), in the worker",
    "",
    "| Ledger entries | p50 | p95 |",
    "|---|---|---|",
    ...summary.policy.rows.map(
      (row) => `| ${row.ledgerEntries.toLocaleString("en-US")} | ${fixed(row.p50Ms)} ms | ${fixed(row.p95Ms)} ms |`,
    ),
    "",
    "## 4. Multi-turn: TTFT of turn 2 (turn 1 re-sent) against turn 1",
    "",
    "| Path | Turn 1 TTFT (median) | Turn 2 TTFT (median) | Turn 2 / turn 1 |",
    "|---|---|---|---|",
    ...["raw", "ours"].map(
      (path) =>
        `| ${path} | ${fixed(summary.turns[path].turn1Ms, 0)} ms | ${fixed(summary.turns[path].turn2Ms, 0)} ms | ${fixed(summary.turns[path].ratio)} |`,
    ),
    "",
    "## 5. Cold start with the weights cached",
    "",
    "| Path | First token (median) | Of which model reload |",
    "|---|---|---|",
    `| web-llm's own unload + reload, then the request | ${fixed(summary.coldStart.rawMs, 0)} ms | ${fixed(summary.coldStart.rawReloadMs, 0)} ms |`,
    `| Ours: worker stopped, woken by the request | ${fixed(summary.coldStart.oursMs, 0)} ms | — |`,
    `| Ratio ours / raw | ${fixed(summary.coldStart.oursMs / summary.coldStart.rawMs)} | |`,
    "",
    ...engineSection(results, summary),
    ...costSection(summary),
  ];
  const missed = goals.filter((row) => row.verdict !== "met" && row.verdict !== "n/a");
  if (missed.length && !results.quick) {
    lines.push("## Targets missed or not resolved, and why", "");
    for (const row of missed)
      lines.push(
        `- **${row.goal}**: ${row.gap}. ${explanations[row.goal]?.(summary) ?? "No explanation recorded for this run."}`,
      );
    lines.push("");
  }
  return {
    summary,
    markdown: `${lines.join("\n")}\n`,
    chartHtml: chart(summary, `webgpu-inference vs raw WebLLM — ${results.model.id}`),
  };
}

// Re-report a saved run: node bench/report.mjs bench/results/latest.json
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  const file = process.argv[2];
  if (file) writeFileSync(file.replace(/\.json$/, ".md"), report(JSON.parse(readFileSync(file, "utf8"))).markdown);
}

import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain JavaScript module, run by node as the benchmark's reporter
import { report, targets } from "../../../bench/report.mjs";
// @ts-expect-error: a plain JavaScript module, shared by the benchmarks
import { medianInterval } from "../../../bench/statistics.mjs";
import { readFileSync } from "node:fs";

type Interval = [number, number] | null;
type Verdict = { goal: string; verdict: "met" | "missed" | "unresolved"; gap: string };

function summary(ratioInterval: Interval, ttftDifferenceInterval: Interval, modelsP50Ms = 1.5) {
  return {
    generation: { streamed: { ratioMedian: 1, ratioInterval, ttftDifferenceMedianMs: 0, ttftDifferenceInterval } },
    trips: { models: { p50Ms: modelsP50Ms }, echo: { p50Ms: 1.5 } },
    policy: { worstP50Ms: 2, growth: 1 },
    turns: { ours: { ratio: 0.4 } },
  };
}

const verdictOf = (rows: Verdict[], goal: string) => rows.find((row) => row.goal.startsWith(goal))!;

describe("the benchmark's median interval", () => {
  it("takes the order statistics whose coverage is at least 95%", () => {
    // n = 10: [x(2), x(9)] covers 1 − 2 · 11/1024 ≈ 97.9%; [x(3), x(8)] only 89%.
    expect(medianInterval([10, 9, 8, 7, 6, 5, 4, 3, 2, 1])).toEqual([2, 9]);
    // n = 6: only [min, max] reaches 95% (96.9%); n = 5 has no such interval.
    expect(medianInterval([6, 1, 5, 2, 4, 3])).toEqual([1, 6]);
    expect(medianInterval([1, 2, 3, 4, 5])).toBeNull();
  });

  it("ignores samples that were not measured", () => {
    expect(medianInterval([Number.NaN, 1, 2, 3, 4, 5, 6])).toEqual([1, 6]);
  });
});

describe("the benchmark's verdicts", () => {
  it("calls a generation target met or missed only when the whole interval is on one side", () => {
    const met = targets(summary([0.99, 1.1], [1, 4])) as Verdict[];
    expect(verdictOf(met, "Decode throughput").verdict).toBe("met");
    expect(verdictOf(met, "TTFT overhead").verdict).toBe("met");
    const missed = targets(summary([0.9, 0.97], [6, 40])) as Verdict[];
    expect(verdictOf(missed, "Decode throughput").verdict).toBe("missed");
    expect(verdictOf(missed, "TTFT overhead").verdict).toBe("missed");
  });

  it("says a target is not resolved when the interval crosses it, however good the median looks", () => {
    const rows = targets(summary([0.959, 1.1], [-1168.6, 726.3])) as Verdict[];
    expect(verdictOf(rows, "Decode throughput")).toMatchObject({
      verdict: "unresolved",
      gap: "the median's 95% interval, 0.959 to 1.100, spans the target",
    });
    expect(verdictOf(rows, "TTFT overhead")).toMatchObject({
      verdict: "unresolved",
      gap: "the median's 95% interval, -1168.6 to 726.3 ms, spans the target",
    });
    expect(verdictOf(targets(summary(null, null)) as Verdict[], "TTFT overhead").verdict).toBe("unresolved");
  });

  it("judges the round-trip and policy targets on their value", () => {
    expect(verdictOf(targets(summary([0.99, 1.1], [1, 4], 2.7)) as Verdict[], "GET /v1/models")).toMatchObject({
      verdict: "missed",
      gap: "0.55 over (2.70 ms against 1.50 ms)",
    });
    expect(verdictOf(targets(summary([0.99, 1.1], [1, 4], 1.8)) as Verdict[], "GET /v1/models").verdict).toBe("met");
    expect(verdictOf(targets(summary([0.99, 1.1], [1, 4])) as Verdict[], "Policy per request").verdict).toBe("met");
  });
});

describe("the engines' comparison", () => {
  it("reports each engine's TTFT, prefill and decode rates from its own samples, and a run without it stays as it was", () => {
    const saved = JSON.parse(readFileSync(new URL("../../../bench/results/latest.json", import.meta.url), "utf8"));
    expect(report({ ...saved, engines: [] }).markdown).not.toContain("## 6.");
    const sample = (promptTokens: number, firstTokenMs: number, totalMs: number) => ({
      promptTokens,
      firstTokenMs,
      totalMs,
      completionTokens: 4,
      text: "",
    });
    const withEngines = {
      ...saved,
      plan: { ...saved.plan, engineMaxTokens: { webllm: 4, llamacpp: 4 } },
      engineModels: { webllm: { id: "w", build: "w-build" }, llamacpp: { id: "l", build: "l-build" } },
      // web-llm: 20 prompt tokens in 40 s, then 3 tokens in 30 s; llama.cpp: 22 in 2 s, then 3 in 1 s.
      engines: [{ iteration: 0, webllm: sample(20, 40_000, 70_000), llamacpp: sample(22, 2_000, 3_000) }],
    };
    const markdown: string = report(withEngines).markdown;
    expect(markdown).toContain("## 6. Engines side by side");
    expect(markdown).toContain("| web-llm | 1 | 20 | 40000 ms | 0.500 | 0.100 |");
    expect(markdown).toContain("| llama.cpp | 1 | 22 | 2000 ms | 11.000 | 3.000 |");
    expect(markdown).toContain("| llama.cpp / web-llm | | | 0.050 | 22.0× | 30.0× |");
  });
});

describe("our cost, isolated", () => {
  it("takes the marginal cost per token from the long reply's extra time less the engine's, and reads the real engine's rows as n/a on a software adapter", () => {
    const saved = JSON.parse(readFileSync(new URL("../../../bench/results/latest.json", import.meta.url), "utf8"));
    const pair = (iteration: number, stream: boolean, extraMs: number) => [
      // The echo's round trip just before (the worker's floor) is not ours: 2 − 0.01 − 1.5.
      {
        iteration,
        stream,
        tokens: 16,
        ours: { firstByteMs: 2, totalMs: 3, completionTokens: 16 },
        direct: { firstPartMs: 0.01, totalMs: 0.1 },
        echoMs: 1.5,
      },
      // 240 more tokens: 240 × 10 µs of ours over 0.2 ms more of the engine's.
      {
        iteration,
        stream,
        tokens: 256,
        ours: { firstByteMs: 2, totalMs: 3 + 0.2 + extraMs, completionTokens: 256 },
        direct: { firstPartMs: 0.01, totalMs: 0.3 },
        echoMs: 1.5,
      },
    ];
    const ourCost = [0, 1, 2].flatMap((iteration) => [...pair(iteration, true, 2.4), ...pair(iteration, false, 1.2)]);
    const run = { ...saved, plan: { ...saved.plan, costTokens: [16, 256] }, ourCost };
    const { summary, markdown } = report(run);
    expect(summary.ourCost.streamed.marginalP50Us).toBeCloseTo(10, 6);
    expect(summary.ourCost.whole.marginalP50Us).toBeCloseTo(5, 6);
    expect(summary.ourCost.streamed.fixedP50Ms).toBeCloseTo(0.49, 6);
    expect(summary.ourCost.streamed.firstByteP50Ms).toBeCloseTo(1.99, 6);
    expect(summary.ourCost.streamed.impliedRatios[300]).toBeCloseTo(1 / (1 + 10e-6 * 300), 9);
    expect(markdown).toContain("## 7. Our cost, isolated");
    expect(markdown).toContain("| Our marginal cost per token (streamed, p50) | ≤ 20 µs | 10.00 µs | yes |");
    expect(markdown).toContain("| Decode throughput, ours / raw (streamed, median) | ≥ 0.98 |");
    expect(markdown).toMatch(
      /Decode throughput, ours \/ raw \(streamed, median\) \| ≥ 0\.98 \| [\d.]+ \| n\/a \(software adapter\)/,
    );
  });
});

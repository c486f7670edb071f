/**
 * `npm run bench -- --quick`: the benchmark harness end to end, in its own browser, writing its
 * files. It checks that every section measured something and that the report was written; it
 * does not gate on timings, which mean little on a shared CPU.
 */
import { test, expect } from "@playwright/test";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

test("the benchmark's quick mode runs every section and writes its table, chart and samples", async () => {
  // Quick mode loads the model on SwiftShader and runs every section once.
  test.setTimeout(600_000);
  const out = test.info().outputPath("bench");
  const output: string[] = [];
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, ["bench/run.mjs", "--quick", "--out", out], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.on("data", (data: Buffer) => output.push(data.toString()));
    child.stderr.on("data", (data: Buffer) => output.push(data.toString()));
    child.on("error", reject);
    child.on("close", resolve);
  });
  expect(exitCode, output.join("")).toBe(0);

  const results = JSON.parse(readFileSync(join(out, "quick.json"), "utf8"));
  expect(results.quick).toBe(true);
  // Quick mode: the streamed mode, once; its request is also turn 1 and web-llm's engine sample.
  expect(results.generation.map((row: { stream: boolean }) => row.stream)).toEqual(results.plan.modes);
  for (const row of results.generation) {
    for (const sample of [row.raw, row.ours]) {
      expect(sample.completionTokens).toBe(1);
      expect(sample.totalMs).toBeGreaterThan(0);
    }
  }
  for (const name of ["echo", "models", "unauthorized"])
    expect(results.roundTrips[name]).toHaveLength(results.plan.roundTrips);
  expect(results.policy).toHaveLength(results.plan.ledgerSizes.length);
  results.policy.forEach((row: { ledgerEntries: number; p50Ms: number }, index: number) => {
    expect(row.ledgerEntries).toBeGreaterThanOrEqual(results.plan.ledgerSizes[index]);
    expect(row.p50Ms).toBeGreaterThan(0);
  });
  expect(results.turns.map((row: { path: string }) => row.path)).toEqual(results.plan.turnPaths);
  for (const row of results.turns) {
    expect(row.turn1.firstTokenMs).toBeGreaterThan(0);
    expect(row.turn2.firstTokenMs).toBeGreaterThan(0);
    // Turn 2 re-sends turn 1 and its reply, then asks more.
    expect(row.turn2.promptTokens).toBeGreaterThan(row.turn1.promptTokens);
  }
  // Quick mode loads the model without a warm-up request.
  expect(results.warmup.loadOnlyMs).toBeGreaterThan(0);
  expect(results.coldStarts).toHaveLength(1);
  for (const row of results.coldStarts) expect(row.ours.firstTokenMs).toBeGreaterThan(0);

  expect(results.engines).toHaveLength(1);
  for (const row of results.engines) {
    for (const engine of ["webllm", "llamacpp"]) {
      const sample = row[engine];
      // llama.cpp: at least two tokens, for a decode rate (random weights could still end a reply
      // early); web-llm's sample is section 1's one token.
      expect(sample.completionTokens).toBeGreaterThanOrEqual(engine === "llamacpp" ? 2 : 1);
      expect(sample.completionTokens).toBeLessThanOrEqual(results.plan.engineMaxTokens[engine]);
      expect(sample.promptTokens).toBeGreaterThan(0);
      expect(sample.firstTokenMs).toBeGreaterThan(0);
    }
  }

  // Our cost: every request whole (all its tokens read), each with the engine's own time beside it.
  expect(results.ourCost).toHaveLength(results.plan.costIterations * 2 * results.plan.costTokens.length);
  for (const row of results.ourCost) {
    expect(row.ours.completionTokens).toBe(row.tokens);
    expect(row.ours.firstByteMs).toBeGreaterThan(0);
    expect(row.ours.totalMs).toBeGreaterThanOrEqual(row.ours.firstByteMs);
    expect(row.direct.totalMs).toBeGreaterThanOrEqual(row.direct.firstPartMs);
    expect(row.echoMs).toBeGreaterThan(0);
  }
  // Every section's end is on the run's timeline.
  expect(Object.keys(results.timeline)).toEqual([
    "load",
    "generation",
    "roundTrips",
    "ourCost",
    "policy",
    "turns",
    "coldStarts",
    "engines",
  ]);

  const markdown = readFileSync(join(out, "quick.md"), "utf8");
  expect(markdown).toContain("## Targets");
  expect(markdown).toContain("## 7. Our cost, isolated");
  expect(markdown).toContain("Our marginal cost per token (streamed, p50)");
  expect(markdown).toContain("GET /v1/models p50 / echo route p50");
  expect(markdown).toContain("## 5. Cold start with the weights cached");
  expect(markdown).toContain("## 6. Engines side by side");
  const png = readFileSync(join(out, "quick.png"));
  expect(png.subarray(1, 4).toString()).toBe("PNG");
});

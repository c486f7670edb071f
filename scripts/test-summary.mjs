#!/usr/bin/env node
/**
 * Prints one closing line for a run, from the unit and browser reports (the browser report alone
 * with `--browser`): "N passed, N failed, N skipped".
 */
import { existsSync, readFileSync } from "node:fs";

const totals = { passed: 0, failed: 0, skipped: 0 };
const missing = [];

// `--browser`: the full run, which runs browser specs alone.
const browserOnly = process.argv.includes("--browser");
const unit = ".cache/reports/unit.json";
if (browserOnly) {
  // No unit report to read.
} else if (existsSync(unit)) {
  const report = JSON.parse(readFileSync(unit, "utf8"));
  totals.passed += report.numPassedTests;
  totals.failed += report.numFailedTests;
  totals.skipped += report.numPendingTests + report.numTodoTests;
} else missing.push(unit);

const e2e = ".cache/reports/e2e.json";
if (existsSync(e2e)) {
  const { stats } = JSON.parse(readFileSync(e2e, "utf8"));
  totals.passed += stats.expected;
  totals.failed += stats.unexpected + stats.flaky;
  totals.skipped += stats.skipped;
} else missing.push(e2e);

if (missing.length) {
  console.error(`test summary: no report at ${missing.join(", ")}`);
  process.exit(1);
}
console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
process.exit(totals.failed > 0 || totals.passed === 0 ? 1 : 0);

/**
 * Two folders of llama.cpp builds (each as scripts/build-llamacpp.mjs writes wasm/llamacpp/)
 * side by side in one Chromium page: their one-thread builds take turns on the same GGUF files,
 * in an order that reverses each round, and each pair of samples gives a ratio. Before the
 * timing, each build's greedy ids and top-20 log probabilities on a fixed prompt are compared
 * bit for bit. For a change of compiler, flags or kernels, where the question is "faster, and
 * the same numbers?".
 *
 * Usage: node bench/builds.mjs <folder A> <folder B> [--rounds N] [--out file.md]
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "@playwright/test";
import { chromiumArgs, chromiumPath } from "../scripts/chromium.mjs";
import { startStaticServer } from "../scripts/static-server.mjs";
import { cpuBenchFiles } from "./cpu-files.mjs";
import { median } from "./statistics.mjs";

const root = resolve(import.meta.dirname, "..");
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: "string", default: "10" }, out: { type: "string" } },
});
if (positionals.length !== 2)
  throw new Error("usage: node bench/builds.mjs <folder A> <folder B> [--rounds N] [--out file.md]");
const folders = positionals.map((folder) => resolve(folder));
for (const folder of folders)
  if (!existsSync(join(folder, "llamacpp-st.wasm"))) throw new Error(`${folder} has no llamacpp-st.wasm`);
const rounds = Number(values.rounds);
const promptTokens = 33;
const decodeTokens = 32;
const variants = ["st", "st-relaxed"];

// The CPU benchmark's three files: Q4_0, Q8_0, and llama.cpp's own Q4_K_M mix.
const gguf = resolve(root, ".cache/test-gguf");
const { q4, q8, q4km } = cpuBenchFiles(gguf);
const models = [q4, q8, q4km].map((file) => file.slice(gguf.length + 1));

const server = await startStaticServer([
  { prefix: "/a/", directory: folders[0] },
  { prefix: "/b/", directory: folders[1] },
  { prefix: "/models/", directory: gguf },
  { prefix: "/", directory: import.meta.dirname },
]);
const profile = mkdtempSync(join(tmpdir(), "bench-builds-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: chromiumPath,
  headless: true,
  args: ["--headless=new", ...chromiumArgs],
});
const rows = [];
try {
  const page = await context.newPage();
  await page.goto(`${server.origin}/builds.html`);
  for (const model of models)
    for (const variant of variants) {
      const result = await page.evaluate((options) => window.compareBuilds(options), {
        variant,
        model,
        rounds,
        promptTokens,
        decodeTokens,
      });
      const rate = (index, key, tokens) =>
        (1000 * tokens * rounds) / result.samples.reduce((sum, sample) => sum + sample[index][key], 0);
      const ratio = (key) => median(result.samples.map((sample) => sample[0][key] / sample[1][key]));
      const row = [
        model,
        `llamacpp-${variant}`,
        rate(0, "prefill", promptTokens).toFixed(1),
        rate(1, "prefill", promptTokens).toFixed(1),
        rate(0, "decode", decodeTokens).toFixed(1),
        rate(1, "decode", decodeTokens).toFixed(1),
        ratio("prefill").toFixed(3),
        ratio("decode").toFixed(3),
        result.identical ? "yes" : "**no**",
      ];
      console.log(row.join(" · "));
      rows.push(row);
    }
} finally {
  await context.close();
  await server.close();
  rmSync(profile, { recursive: true, force: true });
}

/** What the folder's build.json says compiled it (earlier builds name a second compiler for their relaxed tiles). */
const compiler = (folder) => {
  const build = JSON.parse(readFileSync(join(folder, "build.json"), "utf8"));
  return [build.compiler, build.relaxedCompiler].filter(Boolean).join("; ");
};
const report = [
  "# Two llama.cpp builds side by side (bench/builds.mjs)",
  "",
  `Run ${new Date().toISOString()} · Chromium (${chromiumPath}) · one thread · ${rounds} rounds after one unmeasured, each build in turn (the order reversing each round), ${promptTokens} prompt tokens and ${decodeTokens} decoded a round. Ratios are medians of per-round ratios, B's speed over A's: above 1, B is faster.`,
  "",
  `- A: ${compiler(folders[0])}`,
  `- B: ${compiler(folders[1])}`,
  "",
  "| File | Build | A prefill tok/s | B prefill tok/s | A decode tok/s | B decode tok/s | Prefill B / A | Decode B / A | Same greedy ids and top-20 log probabilities |",
  "|---|---|---|---|---|---|---|---|---|",
  ...rows.map((row) => `| ${row.join(" | ")} |`),
  "",
].join("\n");
if (values.out) writeFileSync(values.out, report);
console.log(report);

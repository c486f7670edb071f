/**
 * Size budgets, asserted on the built bytes (not on time): the page entry as an app's bundler
 * ships it, and the tokenizers an app hosts.
 */
import { readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect, test } from "@playwright/test";
// @ts-expect-error: a plain JavaScript script
import { measurePageEntry } from "../../scripts/page-size.mjs";

const dist = resolve(import.meta.dirname, "../../dist");

test("the page entry, bundled and minified with its dependencies, is at most 30 kB gzipped", async () => {
  const { eager, lazy } = (await measurePageEntry()) as {
    eager: { gzipBytes: number; chunks: string[] };
    lazy: { gzipBytes: number; chunks: string[] };
  };
  console.log(
    `page entry: ${eager.gzipBytes} bytes gzipped (${eager.chunks.join(", ")}); on demand: ${lazy.gzipBytes} bytes (${lazy.chunks.join(", ")})`,
  );
  expect(eager.gzipBytes).toBeLessThanOrEqual(30_000);
  // The engine a page may host (src/runtime/page/host-engines.ts) is loaded only on demand, never with the entry.
  expect(lazy.chunks.some((chunk) => chunk.startsWith("host-engines"))).toBe(true);
  expect(eager.chunks.some((chunk) => chunk.startsWith("host-engines"))).toBe(false);
});

test("the tokenizers an app hosts: at most 10 MB for all four families, 3 MB for any one", () => {
  const files = readdirSync(join(dist, "tokenizers")).map((name) => ({
    name,
    bytes: statSync(join(dist, "tokenizers", name)).size,
  }));
  console.log(files.map((file) => `${file.name}: ${file.bytes}`).join(", "));
  expect(files.map((file) => file.name).sort()).toEqual([
    "gemma.json.gz",
    "llama3.json.gz",
    "mistral.json.gz",
    "qwen2.json.gz",
  ]);
  expect(files.reduce((sum, file) => sum + file.bytes, 0)).toBeLessThanOrEqual(10_000_000);
  for (const file of files) expect(file.bytes, file.name).toBeLessThanOrEqual(3_000_000);
});

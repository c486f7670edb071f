#!/usr/bin/env node
/**
 * The page entry's size as an app's bundler ships it: `dist/index.js` with every export kept
 * (`export *`), its dependencies bundled in, minified, then gzipped. `eager` is the entry chunk
 * and every chunk it imports statically, which a page loads with it; `lazy` the chunks loaded
 * only on demand (the page-hosted engine), which a page that hosts no engine never loads.
 *
 * Usage: node scripts/page-size.mjs   (prints JSON: {eager: {bytes, gzipBytes, chunks}, lazy})
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "vite";

export async function measurePageEntry(root = resolve(import.meta.dirname, "..")) {
  const directory = mkdtempSync(join(tmpdir(), "page-size-"));
  const entry = join(directory, "entry.js");
  writeFileSync(entry, `export * from ${JSON.stringify(join(root, "dist/index.js"))};\n`);
  // vite's build() sets NODE_ENV=production for the whole process; the caller's is put back.
  const nodeEnvironment = process.env.NODE_ENV;
  try {
    const output = await build({
      configFile: false,
      logLevel: "silent",
      root: directory,
      build: { write: false, minify: true, target: "es2022", lib: { entry, formats: ["es"], fileName: "entry" } },
    });
    const chunks = (Array.isArray(output) ? output : [output])
      .flatMap((result) => result.output)
      .filter((file) => file.type === "chunk");
    const byName = new Map(chunks.map((chunk) => [chunk.fileName, chunk]));
    const eager = new Set();
    const visit = (chunk) => {
      if (eager.has(chunk)) return;
      eager.add(chunk);
      for (const name of chunk.imports) visit(byName.get(name));
    };
    visit(chunks.find((chunk) => chunk.isEntry));
    const measure = (list) => {
      const code = list.map((chunk) => chunk.code).join("\n");
      return {
        bytes: Buffer.byteLength(code),
        gzipBytes: gzipSync(code, { level: 9 }).length,
        chunks: list.map((chunk) => chunk.fileName),
      };
    };
    return { eager: measure([...eager]), lazy: measure(chunks.filter((chunk) => !eager.has(chunk))) };
  } finally {
    if (nodeEnvironment === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = nodeEnvironment;
    rmSync(directory, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(await measurePageEntry(), null, 2));

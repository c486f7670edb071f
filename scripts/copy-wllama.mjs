#!/usr/bin/env node
/**
 * Copies llama.cpp's WebAssembly from the installed @wllama/wllama into a folder the library
 * serves beside its worker (dist/wllama/), so no page ever fetches it from a CDN.
 * Usage: node scripts/copy-wllama.mjs <folder>
 */
import { copyFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";

const folder = process.argv[2];
if (!folder) throw new Error("usage: node scripts/copy-wllama.mjs <folder>");
const require = createRequire(import.meta.url);
const packageFolder = dirname(require.resolve("@wllama/wllama/package.json"));
mkdirSync(resolve(folder), { recursive: true });
copyFileSync(join(packageFolder, "esm/wasm/wllama.wasm"), join(resolve(folder), "wllama.wasm"));

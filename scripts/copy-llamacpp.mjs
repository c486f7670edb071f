#!/usr/bin/env node
/**
 * Copies the library's llama.cpp build into a folder served beside the worker script: the
 * WebAssembly and its scripts from wasm/llamacpp/ (scripts/build-llamacpp.mjs makes them), and
 * the Worker script that Vite built into dist/llamacpp/.
 * Usage: node scripts/copy-llamacpp.mjs <folder>
 */
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";

const folder = process.argv[2];
if (!folder) throw new Error("usage: node scripts/copy-llamacpp.mjs <folder>");
const root = resolve(import.meta.dirname, "..");
const target = resolve(folder);
mkdirSync(target, { recursive: true });
// Every file the build wrote but its record (build.json): the WebAssembly and their scripts.
const built = readdirSync(join(root, "wasm/llamacpp")).filter((name) => /\.(js|wasm)$/.test(name));
for (const name of built) copyFileSync(join(root, "wasm/llamacpp", name), join(target, name));
const worker = join(root, "dist/llamacpp/llamacpp-worker.js");
if (resolve(worker) !== join(target, "llamacpp-worker.js")) copyFileSync(worker, join(target, "llamacpp-worker.js"));

/**
 * The files an app serves beside its pages, shared by the Vite plugin and the `copy-assets`
 * command: the ready-made worker, the tokenizers of the families the app uses, and llama.cpp's
 * WebAssembly. They are found
 * next to this module in the installed package (`dist/`).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { modelFamilies, tokenizerFileName, tokenizerNames, type ModelFamily } from "../../catalogue/families.js";
import { SetupError } from "../../core/errors/setup.js";

export interface AssetOptions {
  /** Serve the ready-made worker, `inference-sw.js`. Default true; false when the app's own worker calls `installInference`. */
  serviceWorker?: boolean;
  /** The model families whose tokenizers to serve: those of the models the app uses. Default: every family. */
  families?: readonly ModelFamily[];
  /** Serve the library's llama.cpp build (`llamacpp/`) for the `llamacpp` engine. Default true. */
  llamacpp?: boolean;
}

export interface Asset {
  /** The path below the app's root that the page and the worker ask for. */
  path: string;
  /** The file in the package. */
  file: string;
  contentType: string;
}

const workerPath = "inference-sw.js";
const tokenizerFolder = "tokenizers";
/**
 * The llama.cpp builds: their Worker, and the one-thread and pthreads WebAssembly with their
 * scripts, in 32-bit and Memory64 (`64`) addressing, each WebAssembly also with relaxed SIMD
 * (`-relaxed`), which browsers that have it load. Every pthreads build's threads start from its
 * own script.
 */
const llamacppFolder = "llamacpp";
const llamacppFiles = [
  "llamacpp-worker.js",
  ...["st", "mt", "st64", "mt64"].flatMap((variant) =>
    ["", "-relaxed"].flatMap((relaxed) => [`llamacpp-${variant}${relaxed}.js`, `llamacpp-${variant}${relaxed}.wasm`]),
  ),
];
/** What earlier versions copied and this one no longer ships: removed from an app as stale. */
const retiredFiles = ["llamacpp/llamacpp-mt.worker.js"];

/** Every path this package may have written into an app, so stale ones can be told apart. */
export function ownedPaths(): string[] {
  return [
    workerPath,
    ...llamacppFiles.map((name) => `${llamacppFolder}/${name}`),
    ...retiredFiles,
    ...Object.values(tokenizerNames).map((name) => `${tokenizerFolder}/${tokenizerFileName(name)}`),
  ];
}

export function assets(options: AssetOptions = {}, directory = fileURLToPath(new URL(".", import.meta.url))): Asset[] {
  const { serviceWorker = true, families = modelFamilies, llamacpp = true } = options;
  for (const family of families) {
    if (!modelFamilies.includes(family))
      throw new SetupError(
        "invalid_option",
        `unknown model family '${family}'; the families are ${modelFamilies.join(", ")}.`,
      );
  }
  const list: Asset[] = [];
  if (serviceWorker) list.push({ path: workerPath, file: join(directory, workerPath), contentType: "text/javascript" });
  if (llamacpp)
    for (const name of llamacppFiles) {
      const path = `${llamacppFolder}/${name}`;
      list.push({
        path,
        file: join(directory, path),
        contentType: name.endsWith(".wasm") ? "application/wasm" : "text/javascript",
      });
    }
  for (const name of new Set(families.map((family) => tokenizerNames[family]))) {
    const path = `${tokenizerFolder}/${tokenizerFileName(name)}`;
    list.push({ path, file: join(directory, path), contentType: "application/gzip" });
  }
  const missing = list.filter((asset) => !existsSync(asset.file));
  if (missing.length)
    throw new SetupError(
      "missing_asset",
      `the package is missing ${missing.map((asset) => asset.file).join(", ")}; reinstall it (or run \`npm run build\` in a checkout).`,
    );
  return list;
}

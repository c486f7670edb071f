/**
 * The files an app serves beside its pages, shared by the Vite plugin and the `copy-assets`
 * command: the ready-made worker, the tokenizers of the families the app uses, and llama.cpp's
 * WebAssembly. They are found
 * next to this module in the installed package (`dist/`).
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { modelFamilies, tokenizerFileName, tokenizerNames, type ModelFamily } from "../model/families.js";
import { SetupError } from "../errors/setup.js";

export interface AssetOptions {
  /** Serve the ready-made worker, `inference-sw.js`. Default true; false when the app's own worker calls `installInference`. */
  serviceWorker?: boolean;
  /** The model families whose tokenizers to serve: those of the models the app uses. Default: every family. */
  families?: readonly ModelFamily[];
  /**
   * Serve llama.cpp's WebAssembly (`wllama/wllama.wasm`, 8.8 MB) for the `llamacpp` engine, from
   * the app's own `@wllama/wllama`, so it matches the JavaScript the page imports. Default: when
   * that package is installed; `true` insists (an error says to install it).
   */
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
/** wllama's single build (JSPI and Memory64; its CDN-fetched compatibility build is turned off). */
const wllamaWasmPath = "wllama/wllama.wasm";

/** Every path this package may have written into an app, so stale ones can be told apart. */
export function ownedPaths(): string[] {
  return [
    workerPath,
    wllamaWasmPath,
    ...Object.values(tokenizerNames).map((name) => `${tokenizerFolder}/${tokenizerFileName(name)}`),
  ];
}

/** The installed @wllama/wllama's WebAssembly, resolved as the app's bundler resolves the package; null when it is not installed. */
function installedWllamaWasm(from = join(process.cwd(), "package.json")): string | null {
  try {
    return join(dirname(createRequire(from).resolve("@wllama/wllama/package.json")), "esm/wasm/wllama.wasm");
  } catch {
    return null;
  }
}

export function assets(options: AssetOptions = {}, directory = fileURLToPath(new URL(".", import.meta.url))): Asset[] {
  const { serviceWorker = true, families = modelFamilies, llamacpp } = options;
  for (const family of families) {
    if (!modelFamilies.includes(family))
      throw new SetupError(
        "invalid_option",
        `unknown model family '${family}'; the families are ${modelFamilies.join(", ")}.`,
      );
  }
  const list: Asset[] = [];
  if (serviceWorker) list.push({ path: workerPath, file: join(directory, workerPath), contentType: "text/javascript" });
  const wasm = llamacpp === false ? null : installedWllamaWasm();
  if (llamacpp === true && !wasm)
    throw new SetupError("missing_module", "the llamacpp engine needs @wllama/wllama: npm install @wllama/wllama.");
  if (wasm) list.push({ path: wllamaWasmPath, file: wasm, contentType: "application/wasm" });
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

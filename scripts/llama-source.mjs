/**
 * llama.cpp's source, from the git bundle `node-llama-cpp` ships (`llama/gitRelease.bundle`):
 * the one source both our WebAssembly build (scripts/build-llamacpp.mjs) and the CPU benchmark's
 * native quantizer (scripts/llama-quantize.mjs) compile. Never copied into this repository.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { tmpdir } from "node:os";

const root = resolve(import.meta.dirname, "..");

/** The temporary folder that holds the clone and the builds. */
export const llamaWork = join(tmpdir(), "webgpu-inference-llamacpp");

/**
 * Clones the bundle into `llamaWork/<folder>` (again, unless `reuse` and the clone is there).
 * The WebAssembly build patches its clone (our tiles in ggml-cpu), so native tools take their
 * own folder: ggml's native code must not call kernels only the WebAssembly build links.
 * @param {{ reuse?: boolean, folder?: string }} [options]
 * @returns {{ dir: string, description: string }}
 */
export function llamaSource({ reuse = false, folder = "llama.cpp" } = {}) {
  const require = createRequire(join(root, "package.json"));
  // The package exports no package.json: its folder is the one above its entry (dist/index.js).
  const packageDir = resolve(dirname(require.resolve("node-llama-cpp")), "..");
  const bundle = join(packageDir, "llama/gitRelease.bundle");
  if (!existsSync(bundle))
    throw new Error(`no llama.cpp source: ${bundle} is missing (npm ci installs node-llama-cpp)`);
  const info = JSON.parse(readFileSync(join(packageDir, "llama/llama.cpp.info.json"), "utf8"));
  const version = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")).version;
  const dir = join(llamaWork, folder);
  const stamp = join(llamaWork, `${folder}.source.txt`);
  if (reuse && existsSync(dir) && existsSync(stamp)) return { dir, description: readFileSync(stamp, "utf8") };
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(llamaWork, { recursive: true });
  execFileSync("git", ["clone", "--quiet", bundle, dir], { stdio: "inherit" });
  const commit = execFileSync("git", ["-C", dir, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
  const description = `llama.cpp ${info.tag} (${commit}) from node-llama-cpp ${version}'s git bundle`;
  writeFileSync(stamp, description);
  return { dir, description };
}

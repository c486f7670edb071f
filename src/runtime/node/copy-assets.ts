/**
 * `copy-assets`, the command behind `npx webgpu-inference copy-assets <folder>`: copies the library's assets into an app's static
 * folder (webpack's or Next.js's `public/`, any static host), for apps without the Vite plugin.
 * It copies exactly what the options select and removes what an earlier copy left that is no
 * longer selected, so nothing stale is served.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { modelFamilies, type ModelFamily } from "../../catalogue/families.js";
import { assets, ownedPaths } from "./assets.js";

const usage = `usage: webgpu-inference copy-assets <folder> [--families ${modelFamilies.join(",")}] [--no-service-worker] [--no-llamacpp]

Copies inference-sw.js (unless --no-service-worker: your own worker calls installInference), the
tokenizers of the given model families (default: all) and the library's llama.cpp build,
llamacpp/ (unless --no-llamacpp), into <folder>, and removes those it copied before that are no longer selected.`;

export function copyAssets(argv: string[]): string[] {
  const [command, folder, ...rest] = argv;
  if (command !== "copy-assets" || !folder) throw new Error(usage);
  let families: ModelFamily[] | undefined;
  let serviceWorker = true;
  let llamacpp: boolean | undefined;
  for (let index = 0; index < rest.length; index++) {
    const flag = rest[index];
    if (flag === "--no-service-worker") serviceWorker = false;
    else if (flag === "--no-llamacpp") llamacpp = false;
    else if (flag === "--families" && rest[index + 1])
      families = rest[++index]!.split(",").filter(Boolean) as ModelFamily[];
    else throw new Error(`unknown argument ${flag}\n\n${usage}`);
  }
  const selected = assets({
    serviceWorker,
    ...(llamacpp === undefined ? {} : { llamacpp }),
    ...(families ? { families } : {}),
  });
  const keep = new Set(selected.map((asset) => asset.path));
  const lines: string[] = [];
  for (const path of ownedPaths()) {
    if (keep.has(path) || !existsSync(join(folder, path))) continue;
    rmSync(join(folder, path));
    lines.push(`removed ${join(folder, path)}`);
  }
  for (const asset of selected) {
    const target = join(folder, asset.path);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(asset.file, target);
    lines.push(`copied ${target}`);
  }
  return lines;
}

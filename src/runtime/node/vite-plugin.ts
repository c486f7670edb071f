/**
 * `webgpu-inference/vite`: serves the library's assets in `vite dev` and emits them in
 * `vite build`, at the paths `startInference` uses by default (`/inference-sw.js`, `/tokenizers/`),
 * below the app's `base`. `vite preview` serves what the build emitted.
 *
 *   import inference from "webgpu-inference/vite";
 *   export default defineConfig({ plugins: [inference()] });
 */
import { createReadStream, readFileSync } from "node:fs";
import type { Plugin } from "vite";
import { assets, type AssetOptions } from "./assets.js";

export type { AssetOptions as InferencePluginOptions } from "./assets.js";
export type { ModelFamily } from "../../catalogue/families.js";

export default function webgpuInference(options: AssetOptions = {}): Plugin {
  const files = assets(options);
  let base = "/";
  return {
    name: "webgpu-inference",
    configResolved(config) {
      base = config.base.endsWith("/") ? config.base : `${config.base}/`;
    },
    configureServer(server) {
      server.middlewares.use((request, response, next) => {
        const path = decodeURI((request.url ?? "").split("?")[0] ?? "");
        const asset = path.startsWith(base)
          ? files.find((candidate) => candidate.path === path.slice(base.length))
          : undefined;
        if (!asset || (request.method !== "GET" && request.method !== "HEAD")) return next();
        response.setHeader("content-type", asset.contentType);
        // Revalidated on every load: a new version of the package is picked up at once.
        response.setHeader("cache-control", "no-cache");
        if (request.method === "HEAD") return response.end();
        createReadStream(asset.file).pipe(response);
      });
    },
    generateBundle() {
      if (this.environment?.config.consumer === "server") return;
      for (const asset of files)
        this.emitFile({ type: "asset", fileName: asset.path, source: readFileSync(asset.file) });
    },
  };
}

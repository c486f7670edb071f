/// <reference lib="webworker" />
/**
 * The ready-made service worker (`dist/inference-sw.js`). It takes its configuration from the
 * first page's `startInference()` and keeps it for restarts (see `installInference`).
 */
import * as webllm from "@mlc-ai/web-llm";
import { installInference } from "../src/worker.js";

declare const self: ServiceWorkerGlobalScope;

installInference(self, {
  webllm,
  // Model downloads take minutes; every open page hears how far along they are.
  onProgress: (modelId, progress) => {
    void self.clients.matchAll({ type: "window" }).then((clients) => {
      for (const client of clients) client.postMessage({ type: "webgpu-inference:progress", modelId, progress });
    });
  },
});

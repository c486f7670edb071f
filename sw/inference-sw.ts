/// <reference lib="webworker" />
/**
 * The ready-made service worker (`dist/inference-sw.js`). Its configuration comes in its own
 * script URL, written by `startInference()`.
 */
import * as webllm from "@mlc-ai/web-llm";
import { configFromScriptUrl, installInference } from "../src/worker.js";

declare const self: ServiceWorkerGlobalScope;

installInference(self, {
  ...configFromScriptUrl(self.location.href),
  webllm,
  // Model downloads take minutes; every open page hears how far along they are.
  onProgress: (modelId, progress) => {
    void self.clients.matchAll({ type: "window" }).then((clients) => {
      for (const client of clients) client.postMessage({ type: "webgpu-inference:progress", modelId, progress });
    });
  },
});

// A new configuration takes over at once, so the page that registered it is served by it.
self.addEventListener("install", () => void self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

/// <reference lib="webworker" />
/**
 * The demo's service worker: the inference API, plus an app shell precached at install so the
 * demo reloads and chats with the network off. The shell's file list is written by the build.
 */
import * as webllm from "@mlc-ai/web-llm";
import { installInference } from "../src/worker.js";

declare const self: ServiceWorkerGlobalScope;

const shellCache = "webgpu-inference-demo-shell";

const inference = installInference(self, {
  webllm,
  onProgress: (modelId, progress) => {
    void self.clients.matchAll({ type: "window" }).then((clients) => {
      for (const client of clients) client.postMessage({ type: "webgpu-inference:progress", modelId, progress });
    });
  },
});

async function precache(): Promise<void> {
  const list = (await (
    await fetch(new URL("precache.json", self.location.href), { cache: "no-store" })
  ).json()) as string[];
  const cache = await caches.open(shellCache);
  await cache.addAll(list.map((path) => new URL(path, self.location.href).href));
}

// The shell, and every family's tokenizer: offline, any model's prompt can then be counted.
self.addEventListener("install", (event) => {
  event.waitUntil(Promise.all([precache(), inference.precacheTokenizers()]));
});

/**
 * llama.cpp's WebAssembly is needed again offline, but at 3 MB a build it is kept on first use rather
 * than precached for every visitor: fetched from the network when it answers, else from the cache.
 */
function keptForOffline(url: URL): boolean {
  return /\/llamacpp\/llamacpp-[a-z0-9.-]+\.(wasm|js)$/.test(url.pathname);
}

async function networkThenCache(request: Request): Promise<Response> {
  const cache = await caches.open(shellCache);
  try {
    const response = await fetch(request);
    if (response.ok) await cache.put(request, response.clone());
    return response;
  } catch (error) {
    const cached = await cache.match(request);
    if (cached) return cached;
    throw error;
  }
}

// The API's requests are installInference's; the shell is served cache first, the files above
// network first, everything else from the network.
self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== self.location.origin || inference.handles(url)) return;
  if (keptForOffline(url)) {
    event.respondWith(networkThenCache(event.request));
    return;
  }
  event.respondWith(
    (async () => {
      const cache = await caches.open(shellCache);
      const key =
        event.request.mode === "navigate" ? new URL("index.html", self.location.href).href : event.request.url;
      const cached = await cache.match(key, { ignoreSearch: event.request.mode === "navigate" });
      return cached ?? fetch(event.request);
    })(),
  );
});

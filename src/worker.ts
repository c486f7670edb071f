/**
 * `webgpu-inference/sw`: the service-worker side. `installInference` wires the catalogue,
 * tokenizers, engine, queue and HTTP surface together and answers fetches under the base URL.
 * Apps that already have a service worker call it from theirs.
 */
import { Catalogue } from "./catalogue.js";
import { resolveConfig, type InferenceConfig } from "./config.js";
import { DeterministicEngine } from "./engine/deterministic.js";
import { Scheduler } from "./engine/scheduler.js";
import type { Engine, LoadProgress } from "./engine/types.js";
import { WebLlmEngine, type WebLlmModule } from "./engine/webllm.js";
import { InferenceApp } from "./http/app.js";
import { randomId } from "./http/dependencies.js";
import { fetchTokenizerSource, Tokenizers } from "./tokenizer.js";

export interface InstallOptions extends InferenceConfig {
  /** The web-llm module, for `engine: 'webllm'`: `import * as webllm from '@mlc-ai/web-llm'`. */
  webllm?: WebLlmModule;
  /** Model-loading progress, for example to post to pages. */
  onProgress?: (modelId: string, progress: LoadProgress) => void;
}

export interface InstalledInference {
  app: InferenceApp;
  engine: Engine;
  catalogue: Catalogue;
}

/** Builds the app without touching any global: usable from a worker, a page or a test. */
export function createInference(options: InstallOptions, scriptUrl: string): InstalledInference {
  const { webllm, onProgress, ...json } = options;
  const config = resolveConfig(json);
  const catalogue = Catalogue.create(config.models);
  const tokenizers = new Tokenizers(fetchTokenizerSource(config.artifacts.tokenizerBaseUrl ?? new URL("tokenizers/", scriptUrl).href));
  let engine: Engine;
  if (config.engine === "webllm") {
    if (!webllm) throw new Error("webgpu-inference: engine 'webllm' needs the web-llm module: installInference(self, { webllm, ... }).");
    engine = new WebLlmEngine({
      webllm,
      ...(config.artifacts.modelBaseUrl ? { modelBaseUrl: config.artifacts.modelBaseUrl } : {}),
      ...(config.artifacts.modelLibBaseUrl ? { modelLibBaseUrl: config.artifacts.modelLibBaseUrl } : {}),
      ...(onProgress ? { onProgress } : {}),
    });
  } else {
    engine = new DeterministicEngine({ tokenizers, ...(config.tokenDelayMs !== undefined ? { tokenDelayMs: config.tokenDelayMs } : {}) });
  }
  const app = new InferenceApp(config.baseUrl, {
    catalogue,
    engine,
    scheduler: new Scheduler({ maxQueued: config.maxQueued }),
    tokenizers,
    clock: () => Date.now(),
    newId: randomId,
  });
  return { app, engine, catalogue };
}

/** Answers every fetch under the base URL from this worker; other fetches are left alone. */
export function installInference(scope: ServiceWorkerGlobalScope, options: InstallOptions): InstalledInference {
  const installed = createInference(options, scope.location.href);
  scope.addEventListener("fetch", (event) => {
    if (installed.app.handles(new URL(event.request.url))) event.respondWith(installed.app.handle(event.request));
  });
  return installed;
}

export { configFromScriptUrl } from "./config.js";
export type { InferenceConfig } from "./config.js";

/**
 * `webgpu-inference`: the page side. `startInference` registers the inference service worker
 * (through workbox-window) and resolves once that worker controls the page, so the very next
 * `fetch` to the base URL is answered on this device.
 */
import { Workbox } from "workbox-window";
import { assertSecureUrl, resolveConfig, scriptUrlWithConfig, type InferenceConfig } from "./config.js";
import { createEngine } from "./engine/factory.js";
import { hostEngine } from "./engine/page-hosted.js";
import type { LoadProgress } from "./engine/types.js";
import type { WebLlmModule } from "./engine/webllm.js";
import { Admin } from "./policy/admin.js";
import { openPolicyStore } from "./policy/store.js";
import { fetchTokenizerSource, Tokenizers } from "./tokenizer.js";
import { manageMessage, type ManageReply, type ManageRequest } from "./worker-protocol.js";

export interface StartInferenceOptions extends Omit<InferenceConfig, "baseUrl"> {
  /** The worker script: `dist/inference-sw.js` served by the app, or the app's own worker. Default `/inference-sw.js`. */
  serviceWorkerUrl?: string;
  /** The registration scope. Default `/`. */
  scope?: string;
  /** Where the API answers. Default `<origin>/openai`; the SDK's `baseURL` is this plus `/v1`. */
  baseUrl?: string;
  /** How long to wait for the worker to take control, in ms. Default 30 s. */
  timeoutMs?: number;
  /**
   * Host the engine in this page, for browsers without WebGPU in service workers (used when
   * `engineHost` is `page`, or `auto` and the worker has no WebGPU). For `webllm`, pass the
   * module: `{ webllm: await import('@mlc-ai/web-llm') }`. The page must stay open to serve.
   */
  pageEngine?: { webllm?: WebLlmModule; onProgress?: (modelId: string, progress: LoadProgress) => void };
}

export interface InferenceHandle {
  /** The base URL, without `/v1`. */
  baseUrl: string;
  /** What to give the OpenAI SDK (`new OpenAI({ baseURL })`): the base URL plus `/v1`. */
  baseURL: string;
  registration: ServiceWorkerRegistration;
  workbox: Workbox;
  /** Accounts, credits, keys, limits and the ledger, on the database the worker uses. */
  admin: Admin;
  /** Downloads (if needed) and loads a model in the worker, reporting WebLLM's progress. */
  loadModel(modelId: string, onProgress?: (progress: LoadProgress) => void): Promise<void>;
  /** Deletes a model's downloaded files. */
  deleteModel(modelId: string): Promise<void>;
  /** Unregisters the worker; the API stops answering once the page reloads. */
  stop(): Promise<boolean>;
}

function waitForControl(scriptUrl: string, timeoutMs: number): Promise<void> {
  const container = navigator.serviceWorker;
  const isOurs = () => container.controller?.scriptURL === scriptUrl;
  if (isOurs()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      container.removeEventListener("controllerchange", check);
      reject(new Error(`webgpu-inference: the service worker did not take control of this page within ${timeoutMs} ms.`));
    }, timeoutMs);
    function check() {
      if (!isOurs()) return;
      clearTimeout(timer);
      container.removeEventListener("controllerchange", check);
      resolve();
    }
    container.addEventListener("controllerchange", check);
  });
}

function manage(request: ManageRequest, onProgress?: (progress: LoadProgress) => void): Promise<void> {
  const worker = navigator.serviceWorker.controller;
  if (!worker) return Promise.reject(new Error("webgpu-inference: no service worker controls this page."));
  const channel = new MessageChannel();
  return new Promise((resolve, reject) => {
    channel.port1.onmessage = (event: MessageEvent<ManageReply>) => {
      const reply = event.data;
      if ("progress" in reply) onProgress?.(reply.progress);
      else {
        channel.port1.close();
        if (reply.ok) resolve();
        else reject(new Error(reply.message));
      }
    };
    worker.postMessage(request, [channel.port2]);
  });
}

export async function startInference(options: StartInferenceOptions = {}): Promise<InferenceHandle> {
  if (!globalThis.isSecureContext) {
    throw new Error(
      `webgpu-inference needs a secure context (HTTPS, or http://localhost in development): service workers and WebGPU exist only there, and this page is served from ${location.origin}.`,
    );
  }
  if (!("serviceWorker" in navigator)) throw new Error("webgpu-inference: this browser has no service workers.");
  const { serviceWorkerUrl = "/inference-sw.js", scope = "/", timeoutMs = 30_000, baseUrl: requestedBase, pageEngine, ...rest } = options;
  const baseUrl = new URL(requestedBase ?? "/openai", location.href).href.replace(/\/+$/, "");
  assertSecureUrl(baseUrl);
  const config: InferenceConfig = { ...rest, baseUrl };
  // Checked here too: a worker given a bad configuration only says "script evaluation failed".
  const resolved = resolveConfig(config);
  const scriptUrl = scriptUrlWithConfig(serviceWorkerUrl, config, location.href);

  const workbox = new Workbox(scriptUrl, { scope, type: "module" });
  const registration = await workbox.register({ immediate: true });
  if (!registration) throw new Error("webgpu-inference: the service worker could not be registered.");
  let stopHosting = () => {};
  if (pageEngine) {
    const tokenizers = new Tokenizers(fetchTokenizerSource(resolved.artifacts.tokenizerBaseUrl ?? new URL("tokenizers/", scriptUrl).href));
    // Listening before the worker takes control, so its first call is not missed.
    stopHosting = hostEngine(createEngine({ config: resolved, tokenizers, webllm: pageEngine.webllm, onProgress: pageEngine.onProgress }));
  }
  await waitForControl(scriptUrl, timeoutMs);
  return {
    baseUrl,
    baseURL: `${baseUrl}/v1`,
    registration,
    workbox,
    admin: new Admin({ database: openPolicyStore(resolved.databaseName), defaults: resolved.limits }),
    loadModel: (modelId, onProgress) => manage({ type: manageMessage, action: "load", modelId }, onProgress),
    deleteModel: (modelId) => manage({ type: manageMessage, action: "delete", modelId }),
    stop: () => {
      stopHosting();
      return registration.unregister();
    },
  };
}

export { assertSecureUrl } from "./config.js";
export type { InferenceConfig } from "./config.js";
export { ApiError } from "./errors.js";
export type { Admin } from "./policy/admin.js";
export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./policy/admin.js";
export type { LedgerEntry } from "./policy/store.js";
export type { LoadProgress } from "./engine/types.js";
export { seedCatalogue, type ModelEntry, type ModelEntryInput, type MlcBuild } from "./catalogue.js";

/**
 * `webgpu-inference`: the page side. `startInference` registers the inference service worker
 * (through workbox-window), waits until it controls the page, and gives it this page's options;
 * from then on every `fetch` to the base URL is answered on this device.
 *
 * This entry carries only what a page runs: validation, tokenizers and engines live in the
 * worker (an engine a page hosts is loaded on demand), so an app's bundle stays small.
 */
import { Workbox } from "workbox-window";
import type { InferenceConfig, ResolvedConfig } from "../config/config.js";
import type { PageEngineOptions } from "./host-engines.js";
import type { LoadProgress } from "../../engines/contract.js";
import { Admin } from "../../accounts/admin.js";
import { broadcastKeyChange, keyChangedMessage, type KeyChanged } from "../bridge/key-changes.js";
import { openAccountsDatabase } from "../../accounts/database.js";
import { assertSecureUrl } from "../../core/secure-url.js";
import {
  configureMessage,
  manageMessage,
  type ConfigureReply,
  type ManageReply,
  type ManageRequest,
} from "../bridge/messages.js";
import { SetupError } from "../../core/errors/setup.js";
import { ask } from "../bridge/ask.js";

export interface StartInferenceOptions extends Omit<InferenceConfig, "baseUrl"> {
  /**
   * The worker script: the ready-made `inference-sw.js` (which the Vite plugin or the
   * `copy-assets` command serves), or the app's own worker that calls `installInference`.
   * Default `/inference-sw.js`.
   */
  serviceWorkerUrl?: string;
  /** The registration scope. Default `/`. */
  scope?: string;
  /** Where the API answers. Default `<origin>/openai`; the SDK's `baseURL` is this plus `/v1`. */
  baseUrl?: string;
  /** How long to wait for the worker to take control and answer, in ms. Default 30 s. */
  timeoutMs?: number;
  /**
   * Host the engine in this page, for browsers without WebGPU in service workers (used when
   * `engineHost` is `page`, or `auto` and the worker has no WebGPU). For `webllm`, pass the
   * module: `{ webllm: await import('@mlc-ai/web-llm') }`. The page must stay open to serve.
   */
  pageEngine?: PageEngineOptions;
}

export interface InferenceHandle {
  /** The base URL, without `/v1`. */
  baseUrl: string;
  /** The configuration the worker serves with, defaults filled in. */
  config: ResolvedConfig;
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

/** What an app does when the worker script is not where the page looks for it. */
const workerFix =
  "Serve it: add the Vite plugin (`import inference from 'webgpu-inference/vite'`, then `plugins: [inference()]`), or copy it into your static folder with `npx webgpu-inference copy-assets <folder>`; for your own worker, pass its URL as `serviceWorkerUrl`";

function waitForControl(scriptUrl: string, timeoutMs: number): Promise<void> {
  const container = navigator.serviceWorker;
  const isOurs = () => container.controller?.scriptURL === scriptUrl;
  if (isOurs()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      container.removeEventListener("controllerchange", check);
      reject(
        new SetupError(
          "worker_unavailable",
          `the service worker ${scriptUrl} did not take control of this page within ${timeoutMs} ms. A worker of your own must call installInference() (which claims its pages), and its scope must cover this page.`,
        ),
      );
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
  return ask<ManageReply>(request, (reply) => {
    if ("progress" in reply) {
      onProgress?.(reply.progress);
      return false;
    }
    if (!reply.ok) throw new SetupError("worker_refused", reply.message);
    return true;
  });
}

/** Gives the worker this page's options; it answers with the configuration it serves with, or why not. */
async function configure(
  options: Partial<InferenceConfig>,
  scriptUrl: string,
  timeoutMs: number,
): Promise<ResolvedConfig> {
  let config: ResolvedConfig | undefined;
  await ask<ConfigureReply>(
    { type: configureMessage, options },
    (reply) => {
      if (!reply.ok) throw new SetupError("worker_refused", reply.message);
      config = reply.config;
      return true;
    },
    timeoutMs,
    () =>
      new SetupError(
        "worker_unavailable",
        `the service worker ${scriptUrl} did not answer within ${timeoutMs} ms. A worker of your own must call installInference() from webgpu-inference/sw.`,
      ),
  );
  return config!;
}

/**
 * Tells the worker that serves this page that a key changed, and waits until it has forgotten it;
 * the broadcast reaches any other instance (see src/runtime/bridge/key-changes.ts).
 */
async function tellWorkers(databaseName: string, keyId: string, timeoutMs: number): Promise<void> {
  if (!navigator.serviceWorker.controller) return broadcastKeyChange(databaseName, keyId, 250);
  void broadcastKeyChange(databaseName, keyId, 0);
  await ask<{ ok: boolean }>(
    { type: keyChangedMessage, keyId } satisfies KeyChanged,
    () => true,
    timeoutMs,
    () =>
      new SetupError(
        "worker_unavailable",
        `the key ${keyId} was changed, but the service worker did not confirm within ${timeoutMs} ms that it stopped using the old record; it will within a minute.`,
      ),
  );
}

async function register(
  scriptUrl: string,
  scope: string,
): Promise<{ workbox: Workbox; registration: ServiceWorkerRegistration }> {
  const workbox = new Workbox(scriptUrl, { scope, type: "module" });
  let registration: ServiceWorkerRegistration | undefined;
  try {
    registration = await workbox.register({ immediate: true });
  } catch (error) {
    throw new SetupError(
      "worker_unavailable",
      `the service worker ${scriptUrl} could not be registered (${(error as Error).message}). ${workerFix}.`,
      { cause: error },
    );
  }
  if (!registration)
    throw new SetupError(
      "worker_unavailable",
      `the service worker ${scriptUrl} could not be registered. ${workerFix}.`,
    );
  return { workbox, registration };
}

/**
 * Registers the worker, waits until it controls this page, and configures it. One configuration
 * serves every tab of the origin: options that differ from the one in force are refused while
 * other tabs use it (the error names each option), and a worker whose code sets its own
 * configuration refuses any other values.
 */
export async function startInference(options: StartInferenceOptions = {}): Promise<InferenceHandle> {
  if (!globalThis.isSecureContext) {
    throw new SetupError(
      "unsupported_browser",
      `this page needs a secure context (HTTPS, or http://localhost in development): service workers and WebGPU exist only there, and this page is served from ${location.origin}.`,
    );
  }
  if (!("serviceWorker" in navigator))
    throw new SetupError("unsupported_browser", "this browser has no service workers.");
  const {
    serviceWorkerUrl = "/inference-sw.js",
    scope = "/",
    timeoutMs = 30_000,
    baseUrl: requestedBase,
    pageEngine,
    ...rest
  } = options;
  const wanted: Partial<InferenceConfig> = { ...rest };
  if (requestedBase !== undefined) {
    // Resolved against this page, and refused here before anything is registered when it is not secure.
    wanted.baseUrl = new URL(requestedBase, location.href).href.replace(/\/+$/, "");
    assertSecureUrl(wanted.baseUrl);
  }
  const scriptUrl = new URL(serviceWorkerUrl, location.href).href;

  const { workbox, registration } = await register(scriptUrl, scope);
  await waitForControl(scriptUrl, timeoutMs);
  const config = await configure(wanted, scriptUrl, timeoutMs);
  let stopHosting = () => {};
  if (pageEngine) stopHosting = (await import("./host-engines.js")).hostPageEngine(config, scriptUrl, pageEngine);
  const baseUrl = config.baseUrl.replace(/\/+$/, "");
  return {
    baseUrl,
    baseURL: `${baseUrl}/v1`,
    config,
    registration,
    workbox,
    admin: new Admin({
      database: openAccountsDatabase(config.databaseName),
      defaults: config.limits,
      afterKeyChange: (keyId) => tellWorkers(config.databaseName, keyId, timeoutMs),
    }),
    loadModel: (modelId, onProgress) => manage({ type: manageMessage, action: "load", modelId }, onProgress),
    deleteModel: (modelId) => manage({ type: manageMessage, action: "delete", modelId }),
    stop: () => {
      stopHosting();
      return registration.unregister();
    },
  };
}

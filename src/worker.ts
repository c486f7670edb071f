/**
 * `webgpu-inference/sw`: the service-worker side. `installInference` wires the catalogue,
 * tokenizers, engine, queue and HTTP surface together and answers fetches under the base URL.
 * Apps that already have a service worker call it from theirs.
 */
import { Catalogue } from "./catalogue.js";
import { resolveConfig, type InferenceConfig } from "./config.js";
import { createEngine } from "./engine/factory.js";
import { hostAnnouncement, PageHostedEngine } from "./engine/page-hosted.js";
import { Scheduler } from "./engine/scheduler.js";
import type { Engine, LoadProgress } from "./engine/types.js";
import type { WebLlmModule } from "./engine/webllm.js";
import { InferenceApp } from "./http/app.js";
import { randomId } from "./http/dependencies.js";
import { Admin } from "./policy/admin.js";
import { Policy } from "./policy/policy.js";
import { openPolicyStore } from "./policy/store.js";
import { fetchTokenizerSource, Tokenizers } from "./tokenizer.js";
import { manageMessage, type ManageReply, type ManageRequest } from "./worker-protocol.js";

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
  policy: Policy;
  scheduler: Scheduler;
}


/**
 * Loads or deletes a model for a page, one at a time with generations (the engine holds one
 * model), reporting load progress on `port`.
 */
export async function manageModel(installed: InstalledInference, request: ManageRequest, port: MessagePort): Promise<void> {
  const reply = (message: ManageReply) => port.postMessage(message);
  const model = installed.catalogue.get(request.modelId);
  if (!model) {
    reply({ ok: false, message: `The model \`${request.modelId}\` does not exist.` });
    return;
  }
  let release: (() => void) | undefined;
  try {
    release = await installed.scheduler.acquire(new AbortController().signal);
    if (request.action === "load") await installed.engine.load(model, (progress) => reply({ progress }));
    else await installed.engine.deleteCached?.(model);
    reply({ ok: true });
  } catch (error) {
    reply({ ok: false, message: error instanceof Error ? error.message : String(error) });
  } finally {
    release?.();
    port.close();
  }
}

export interface Environment {
  scriptUrl: string;
  /** Whether this global scope has WebGPU (`navigator.gpu`). */
  webgpu: boolean;
  /** Window clients, for a page-hosted engine. */
  clients?: Clients;
  /** The network, for remote models' upstreams; the global fetch by default. */
  fetch?: typeof fetch;
}

/** Builds the app without touching any global: usable from a worker, a page or a test. */
export function createInference(options: InstallOptions, environment: Environment): InstalledInference {
  const { webllm, onProgress, ...json } = options;
  const config = resolveConfig(json);
  const catalogue = Catalogue.create(config.models);
  const tokenizers = new Tokenizers(fetchTokenizerSource(config.artifacts.tokenizerBaseUrl ?? new URL("tokenizers/", environment.scriptUrl).href));
  const inPage = config.engineHost === "page" || (config.engineHost === "auto" && config.engine === "webllm" && !environment.webgpu);
  let engine: Engine;
  if (inPage) {
    if (!environment.clients) throw new Error("webgpu-inference: a page-hosted engine needs the worker's clients.");
    engine = new PageHostedEngine({ clients: environment.clients, name: `${config.engine} (page-hosted)` });
  } else {
    engine = createEngine({ config, tokenizers, webllm, onProgress });
  }
  const clock = () => Date.now();
  const policy = new Policy({ database: openPolicyStore(config.databaseName), clock, holder: randomId("worker_") });
  const scheduler = new Scheduler({ maxQueued: config.maxQueued });
  const app = new InferenceApp(config.baseUrl, {
    catalogue,
    engine,
    scheduler,
    tokenizers,
    policy,
    // Reservations a killed worker left open are released before this one admits anything.
    ready: policy.releaseOrphans(),
    clock,
    newId: randomId,
    fetch: environment.fetch ?? ((input, init) => fetch(input, init)),
  });
  return { app, engine, catalogue, policy, scheduler };
}

/** Answers every fetch under the base URL from this worker; other fetches are left alone. */
export function installInference(scope: ServiceWorkerGlobalScope, options: InstallOptions): InstalledInference {
  const installed = createInference(options, { scriptUrl: scope.location.href, webgpu: "gpu" in scope.navigator, clients: scope.clients });
  scope.addEventListener("fetch", (event) => {
    if (installed.app.handles(new URL(event.request.url))) event.respondWith(installed.app.handle(event.request));
  });
  const { engine } = installed;
  scope.addEventListener("message", (event) => {
    const data = event.data as { type?: string } | null;
    const source = event.source;
    if (data?.type === hostAnnouncement && engine instanceof PageHostedEngine && source && "id" in source) engine.addHost(source.id);
    const port = event.ports[0];
    if (data?.type === manageMessage && port) event.waitUntil(manageModel(installed, data as ManageRequest, port));
  });
  return installed;
}

/** The admin API on the worker's own database, for apps that manage keys from their worker. */
export function createAdmin(options: Pick<InferenceConfig, "limits" | "databaseName"> = {}): Admin {
  const config = resolveConfig({ baseUrl: "https://localhost/", ...options });
  return new Admin({ database: openPolicyStore(config.databaseName), defaults: config.limits });
}

export { configFromScriptUrl } from "./config.js";
export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./policy/admin.js";
export type { InferenceConfig } from "./config.js";

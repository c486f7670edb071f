/// <reference lib="webworker" preserve="true" />
/**
 * `webgpu-inference/sw`: the service-worker side. `installInference` wires the catalogue,
 * tokenizers, engine, queue and HTTP surface together and answers fetches under the base URL.
 * Apps that already have a service worker call it from theirs.
 */
import { inferenceApp, endsLikeEndpoint } from "../../endpoints/routes.js";
import { Catalogue } from "../../catalogue/catalogue.js";
import { type LocalEngine } from "../../catalogue/entry.js";
import { resolveConfig, type InferenceConfig, type ResolvedConfig } from "../config/config.js";
import { openConfigStore } from "../config/store.js";
import { createEngine } from "../config/engines.js";
import { ChoosingEngine } from "../../engines/choice.js";
import { hostAnnouncement, PageHosts, PageHostedEngine, type HostAnnouncement } from "../../engines/page-hosted.js";
import { Scheduler } from "../../pipeline/scheduler.js";
import type { Engine, LoadProgress } from "../../engines/contract.js";
import type { WebLlmModule } from "../../engines/webllm/engine.js";
import type { InferenceApp } from "../../http/app.js";
import { storedData } from "../../accounts/stored/stored-data.js";
import { browserEstimator } from "../../core/storage-room.js";
import { randomId } from "../../pipeline/services.js";
import { Admin } from "../../accounts/admin.js";
import { broadcastKeyChange, keyChangedMessage, listenForKeyChanges, type KeyChanged } from "../bridge/key-changes.js";
import { webLocksLiveness } from "../../accounts/liveness.js";
import { Accounts } from "../../accounts/accounts.js";
import { openAccountsDatabase } from "../../accounts/database.js";
import { tokenizerNames } from "../../catalogue/families.js";
import { cacheTokenizers, fetchTokenizerSource, Tokenizers } from "../../prompt/tokenizer.js";
import { WorkerConfiguration } from "./configuration.js";
import {
  configureMessage,
  manageMessage,
  type ConfigureRequest,
  type ManageReply,
  type ManageRequest,
} from "../bridge/messages.js";
import { SetupError } from "../../core/errors/setup.js";

export interface InstallOptions extends Partial<InferenceConfig> {
  /** The web-llm module, for `engine: 'webllm'`: `import * as webllm from '@mlc-ai/web-llm'`. */
  webllm?: WebLlmModule;
  /** Model-loading progress, for example to post to pages. */
  onProgress?: (modelId: string, progress: LoadProgress) => void;
}

export interface InstalledInference {
  config: ResolvedConfig;
  app: InferenceApp;
  engine: Engine;
  catalogue: Catalogue;
  accounts: Accounts;
  scheduler: Scheduler;
  /** The open pages that host engines (web-llm without WebGPU here, llama.cpp). */
  hosts: PageHosts | undefined;
}

/**
 * Loads or deletes a model for a page, one at a time with generations (the engine holds one
 * model), reporting load progress on `port`.
 */
export async function manageModel(
  installed: InstalledInference,
  request: ManageRequest,
  port: MessagePort,
): Promise<void> {
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
export function createInference(
  options: InstallOptions & InferenceConfig,
  environment: Environment,
): InstalledInference {
  const { webllm, onProgress, ...json } = options;
  const config = resolveConfig(json);
  const catalogue = Catalogue.create(config.models);
  const tokenizers = new Tokenizers(
    fetchTokenizerSource(config.artifacts.tokenizerBaseUrl ?? new URL("tokenizers/", environment.scriptUrl).href),
  );
  const hosts = environment.clients ? new PageHosts(environment.clients) : undefined;
  const engine = workerEngine(
    config,
    environment,
    hosts,
    () => createEngine({ config, tokenizers, webllm, onProgress }),
    webllm !== undefined,
  );
  const clock = () => Date.now();
  const database = openAccountsDatabase(config.databaseName);
  const accounts = new Accounts({
    database,
    clock,
    holder: randomId("worker_"),
    liveness: webLocksLiveness(),
  });
  const scheduler = new Scheduler({ maxQueued: config.maxQueued });
  const app = inferenceApp(config.baseUrl, {
    catalogue,
    engine,
    scheduler,
    tokenizers,
    accounts,
    ...storedData({ database, clock: clock, estimate: browserEstimator() }),
    // Reservations a killed worker left open are released before this one admits anything.
    ready: accounts.releaseOrphans(),
    clock,
    newId: randomId,
    rateLimitResets: config.rateLimitResets,
    fetch: environment.fetch ?? ((input, init) => fetch(input, init)),
  });
  return { config, app, engine, catalogue, accounts, scheduler, hosts };
}

/**
 * The engine the worker serves with. web-llm runs here when this scope has WebGPU, else in a
 * host page; llama.cpp always runs in a page (its Worker cannot start in a service worker).
 */
function workerEngine(
  config: ResolvedConfig,
  environment: Environment,
  hosts: PageHosts | undefined,
  local: () => Engine,
  hasWebLlm: boolean,
): Engine {
  const hosted = (name: string) => {
    if (!hosts) throw new SetupError("invalid_option", "a page-hosted engine needs the worker's clients.");
    return new PageHostedEngine({ hosts, engine: name, name: `${name} (page-hosted)` });
  };
  const webllmInPage = config.engineHost === "page" || (config.engineHost === "auto" && !environment.webgpu);
  if (config.engine === "deterministic") return config.engineHost === "page" ? hosted("deterministic") : local();
  const engines: Partial<Record<LocalEngine, Engine>> = {};
  if (webllmInPage) engines.webllm = hosted("webllm");
  // Pinned to web-llm without its module, `local` names the missing module.
  else if (config.engine === "webllm" || hasWebLlm) engines.webllm = local();
  if (hosts) engines.llamacpp = new PageHostedEngine({ hosts, engine: "llamacpp" });
  return new ChoosingEngine({ engines, policy: config.engine });
}

/** What `installInference` returns: the inference app for the configuration in force. */
export interface InferenceWorker {
  /** The app for the configuration in force; undefined until a page has configured this worker. */
  readonly installed: InstalledInference | undefined;
  /**
   * Resolves once a restarted worker has read its stored configuration (at once when it is in
   * the code), to the app in force then, or undefined when no page has configured this worker yet.
   */
  readonly ready: Promise<InstalledInference | undefined>;
  /**
   * Whether this worker answers `url`: under the base URL. While a restarted worker is still
   * reading its stored configuration it answers the URLs that end like an API endpoint (passing
   * through any that turn out not to be its own), so an app's own fetch handlers skip what this claims.
   */
  handles(url: URL): boolean;
  /**
   * Fetches every family's tokenizer into Cache Storage, so prompts of any model
   * can be counted offline; an offline app calls it from its `install` handler. Without it, a
   * family's tokenizer is fetched (and then kept) the first time one of its models is asked for.
   */
  precacheTokenizers(): Promise<void>;
}

/** A page's message: configure, a model to load or delete, or a host page announcing itself. */
function onMessage(configuration: WorkerConfiguration<InstalledInference>, event: ExtendableMessageEvent): void {
  const data = event.data as { type?: string } | null;
  const port = event.ports[0];
  const source = event.source;
  const sourceId = source && "id" in source ? source.id : undefined;
  if (data?.type === configureMessage && port) {
    event.waitUntil(
      configuration.configure((data as ConfigureRequest).options, sourceId).then((reply) => port.postMessage(reply)),
    );
    return;
  }
  if (data?.type === keyChangedMessage && port) {
    // At once, not after `ready`: a configuration still being built has no key in memory.
    configuration.app?.accounts.forgetKey((data as KeyChanged).keyId);
    port.postMessage({ ok: true });
    return;
  }
  event.waitUntil(
    configuration.ready().then((current) => {
      if (data?.type === hostAnnouncement && current?.hosts && sourceId)
        current.hosts.add(sourceId, (data as HostAnnouncement).engines ?? [], port);
      if (data?.type !== manageMessage || !port) return;
      if (current) return manageModel(current, data as ManageRequest, port);
      port.postMessage({
        ok: false,
        message: "webgpu-inference: no page has configured this worker yet: call startInference() first.",
      } satisfies ManageReply);
    }),
  );
}

/** Answers a fetch under the base URL; leaves any other alone. */
function onFetch(configuration: WorkerConfiguration<InstalledInference>, event: FetchEvent): void {
  const url = new URL(event.request.url);
  const current = configuration.app;
  if (current?.app.handles(url)) {
    const answered = current.app.handle(event.request);
    event.respondWith(answered);
    // Indexing a request started, or one a restart left, keeps the worker alive while it runs.
    event.waitUntil(answered.then(() => current.app.background()).catch(() => undefined));
  } else if (!configuration.settled && endsLikeEndpoint(url.pathname)) {
    event.respondWith(
      configuration
        .ready()
        .then((app) => (app?.app.handles(url) ? app.app.handle(event.request) : fetch(event.request))),
    );
  }
}

/**
 * Answers every fetch under the base URL from this worker; other fetches are left alone. Its
 * configuration comes from `options` when they hold any configuration option (an app's own
 * worker), else from the pages' `startInference` (see src/runtime/worker/configuration.ts). It also takes
 * control of its pages at once (`skipWaiting`, `clients.claim`), which `startInference` waits for.
 */
export function installInference(scope: ServiceWorkerGlobalScope, options: InstallOptions = {}): InferenceWorker {
  const { webllm, onProgress, ...fromCode } = options;
  const environment: Environment = {
    scriptUrl: scope.location.href,
    webgpu: "gpu" in scope.navigator,
    clients: scope.clients,
  };
  let stopListening = () => {};
  const build = (config: InferenceConfig) => {
    const installed = createInference(
      { ...config, ...(webllm ? { webllm } : {}), ...(onProgress ? { onProgress } : {}) },
      environment,
    );
    // Key changes broadcast by other contexts (a worker's own createAdmin, another instance's pages).
    stopListening();
    stopListening = listenForKeyChanges(installed.config.databaseName, (keyId) => installed.accounts.forgetKey(keyId));
    return installed;
  };
  const configuration = new WorkerConfiguration<InstalledInference>({
    build,
    fromCode: Object.keys(fromCode).length > 0 ? fromCode : undefined,
    store: () => openConfigStore(),
    scope: scope.registration?.scope ?? scope.location.href,
    defaultBaseUrl: new URL("/openai", scope.location.origin).href,
    windows: async () => (await scope.clients.matchAll({ type: "window" })).map((client) => client.id),
    scriptPath: scope.location.pathname,
  });
  scope.addEventListener("fetch", (event) => onFetch(configuration, event));
  scope.addEventListener("message", (event) => onMessage(configuration, event));
  scope.addEventListener("install", () => void scope.skipWaiting());
  scope.addEventListener("activate", (event) => event.waitUntil(scope.clients.claim()));
  return {
    get installed() {
      return configuration.app;
    },
    get ready() {
      return configuration.ready();
    },
    handles: (url) => configuration.app?.app.handles(url) ?? (!configuration.settled && endsLikeEndpoint(url.pathname)),
    async precacheTokenizers() {
      const configured = (await configuration.ready())?.config.artifacts.tokenizerBaseUrl;
      await cacheTokenizers(configured ?? new URL("tokenizers/", scope.location.href).href, [
        ...new Set(Object.values(tokenizerNames)),
      ]);
    },
  };
}

/**
 * The admin API on the worker's own database, for apps that manage keys from their worker. A key
 * change resolves once the worker that serves has forgotten the key: it hears the change on a
 * broadcast channel and answers within a task; with no configured worker to answer, after 250 ms.
 */
export function createAdmin(options: Pick<InferenceConfig, "limits" | "databaseName"> = {}): Admin {
  const config = resolveConfig({ baseUrl: "https://localhost/", ...options });
  return new Admin({
    database: openAccountsDatabase(config.databaseName),
    defaults: config.limits,
    afterKeyChange: (keyId) => broadcastKeyChange(config.databaseName, keyId, 250),
  });
}

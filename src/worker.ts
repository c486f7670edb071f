/// <reference lib="webworker" preserve="true" />
/**
 * `webgpu-inference/sw`: the service-worker side. `installInference` wires the catalogue,
 * tokenizers, engine, queue and HTTP surface together and answers fetches under the base URL.
 * Apps that already have a service worker call it from theirs.
 */
import { Catalogue } from "./catalogue.js";
import { differingOptions, inferenceConfigSchema, resolveConfig, type InferenceConfig, type ResolvedConfig } from "./config.js";
import { openConfigStore } from "./config-store.js";
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
import { configureMessage, manageMessage, type ConfigureReply, type ConfigureRequest, type ManageReply, type ManageRequest } from "./worker-protocol.js";

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
export function createInference(options: InstallOptions & InferenceConfig, environment: Environment): InstalledInference {
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
  return { config, app, engine, catalogue, policy, scheduler };
}

/** The names of the configuration's options, as opposed to the worker's own wiring. */
const configurationKeys = Object.keys(inferenceConfigSchema.shape) as (keyof InferenceConfig)[];

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
   * reading its stored configuration it answers every fetch (passing through what is not its own),
   * so an app's own fetch handlers must skip what this claims.
   */
  handles(url: URL): boolean;
}

/**
 * Answers every fetch under the base URL from this worker; other fetches are left alone.
 *
 * The configuration comes from one of two places, decided once per registration:
 * - the code: any configuration option in `options` (an app's own worker). A page's
 *   `startInference` may then give only the same values, and is refused naming any other;
 * - the page: with no configuration option here (the ready-made worker), the first page's
 *   `startInference` options are the configuration, kept in IndexedDB for restarts. A page with
 *   other options takes over only when it is the only tab this worker serves; with other tabs
 *   open it is refused, naming the options that differ, so no open tab changes behaviour.
 *
 * It also takes control of its pages at once (`skipWaiting`, `clients.claim`), which
 * `startInference` waits for.
 */
export function installInference(scope: ServiceWorkerGlobalScope, options: InstallOptions = {}): InferenceWorker {
  const { webllm, onProgress, ...json } = options;
  const inCode = Object.keys(json).length > 0;
  const environment: Environment = { scriptUrl: scope.location.href, webgpu: "gpu" in scope.navigator, clients: scope.clients };
  const build = (config: InferenceConfig) => createInference({ ...config, ...(webllm ? { webllm } : {}), ...(onProgress ? { onProgress } : {}) }, environment);
  const defaultBaseUrl = new URL("/openai", scope.location.origin).href;
  const store = inCode ? undefined : openConfigStore();
  const storeKey = scope.registration?.scope ?? scope.location.href;
  let installed = inCode ? build({ baseUrl: defaultBaseUrl, ...json } as InferenceConfig) : undefined;
  let settled = inCode;
  const ready = inCode
    ? Promise.resolve(installed)
    : store!.read(storeKey).then(
        (config) => {
          settled = true;
          if (config) installed = build(config);
          return installed;
        },
        (error: unknown) => {
          settled = true;
          console.error("[webgpu-inference] the stored configuration could not be read", error);
          return undefined;
        },
      );

  async function configure(wanted: Partial<InferenceConfig>, requester: string | undefined): Promise<ConfigureReply> {
    await ready;
    if (inCode) {
      const differing = differingOptions(installed!.config, resolveConfig({ ...installed!.config, ...wanted }), Object.keys(wanted));
      if (differing.length) {
        return refuse(`this worker (${scope.location.pathname}) sets its configuration in its code, with installInference(), and the page's startInference() asked for other values (${differing.join("; ")}). Give startInference() no configuration options, or the same ones, or change the worker's code.`);
      }
      return { ok: true, config: installed!.config };
    }
    let config: ResolvedConfig;
    try {
      config = resolveConfig({ baseUrl: defaultBaseUrl, ...wanted });
    } catch (error) {
      return { ok: false, message: (error as Error).message };
    }
    if (installed) {
      const differing = differingOptions(installed.config, config, configurationKeys);
      if (!differing.length) return { ok: true, config: installed.config };
      const others = (await scope.clients.matchAll({ type: "window" })).filter((client) => client.id !== requester);
      if (others.length) {
        return refuse(`one configuration serves every tab of ${scope.location.origin}, and ${others.length} other open tab(s) use the current one; this page asked for other options (${differing.join("; ")}). Start every tab with the same options, or close the other tabs first.`);
      }
      await installed.engine.dispose?.();
    }
    installed = build(config);
    await store!.write(storeKey, config);
    return { ok: true, config };
  }

  scope.addEventListener("fetch", (event) => {
    const url = new URL(event.request.url);
    if (installed) {
      if (installed.app.handles(url)) event.respondWith(installed.app.handle(event.request));
    } else if (!settled) {
      event.respondWith(ready.then((app) => (app?.app.handles(url) ? app.app.handle(event.request) : fetch(event.request))));
    }
  });
  scope.addEventListener("message", (event) => {
    const data = event.data as { type?: string } | null;
    const source = event.source;
    const port = event.ports[0];
    const sourceId = source && "id" in source ? source.id : undefined;
    if (data?.type === configureMessage && port) {
      const reply = configure((data as ConfigureRequest).options, sourceId).catch((error: unknown) => ({ ok: false, message: (error as Error).message ?? String(error) }) satisfies ConfigureReply);
      event.waitUntil(reply.then((message) => port.postMessage(message)));
      return;
    }
    event.waitUntil(
      ready.then(() => {
        const current = installed;
        if (data?.type === hostAnnouncement && current?.engine instanceof PageHostedEngine && sourceId) current.engine.addHost(sourceId);
        if (data?.type !== manageMessage || !port) return;
        if (current) return manageModel(current, data as ManageRequest, port);
        port.postMessage({ ok: false, message: "webgpu-inference: no page has configured this worker yet: call startInference() first." } satisfies ManageReply);
      }),
    );
  });
  scope.addEventListener("install", () => void scope.skipWaiting());
  scope.addEventListener("activate", (event) => event.waitUntil(scope.clients.claim()));
  return {
    get installed() {
      return installed;
    },
    get ready() {
      return ready.then(() => installed);
    },
    handles: (url) => (installed ? installed.app.handles(url) : !settled),
  };
}

function refuse(reason: string): ConfigureReply {
  return { ok: false, message: `webgpu-inference: ${reason}` };
}

/** The admin API on the worker's own database, for apps that manage keys from their worker. */
export function createAdmin(options: Pick<InferenceConfig, "limits" | "databaseName"> = {}): Admin {
  const config = resolveConfig({ baseUrl: "https://localhost/", ...options });
  return new Admin({ database: openPolicyStore(config.databaseName), defaults: config.limits });
}

export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./policy/admin.js";
export type { InferenceConfig } from "./config.js";

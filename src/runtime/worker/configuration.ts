/**
 * The configuration a service worker serves with, and the app built for it. It comes from one of
 * two places, decided once per registration:
 * - the worker's code (options given to `installInference`): fixed. A page's `startInference`
 *   may give only the same values, and is refused, naming any other;
 * - the pages (no options in the code, as in the ready-made worker): the first page's options,
 *   kept in IndexedDB for restarts. A page with other options takes over only when it is the one
 *   tab the worker serves; while other tabs use the configuration it is refused, naming each
 *   differing option, so no open tab changes behaviour.
 */
import {
  differingOptions,
  inferenceConfigSchema,
  resolveConfig,
  type InferenceConfig,
  type ResolvedConfig,
} from "../config/config.js";
import type { ConfigStore } from "../config/store.js";
import type { ConfigureReply } from "../bridge/messages.js";

/** What the configuration needs to know of the app it builds. */
export interface Built {
  config: ResolvedConfig;
  engine: { dispose?(): Promise<void> };
}

export interface ConfigurationOptions<App extends Built> {
  build(config: InferenceConfig): App;
  /** The options in the worker's code; undefined when the pages configure it. */
  fromCode: Partial<InferenceConfig> | undefined;
  /** Where a page-given configuration is kept; used only when the pages configure it. */
  store: () => ConfigStore;
  /** The registration's scope: one configuration per registration. */
  scope: string;
  /** `<origin>/openai`, when no one chose a base URL. */
  defaultBaseUrl: string;
  /** The ids of the window clients this worker controls. */
  windows(): Promise<string[]>;
  /** For messages: the worker script's path. */
  scriptPath: string;
}

const configurationKeys = Object.keys(inferenceConfigSchema.shape);

/** The page's SetupError names the library; the reason is the message. */
function refuse(reason: string): ConfigureReply {
  return { ok: false, message: reason };
}

export class WorkerConfiguration<App extends Built> {
  readonly #options: ConfigurationOptions<App>;
  readonly #store: ConfigStore | undefined;
  readonly #read: Promise<void>;
  #app: App | undefined;
  #settled: boolean;
  /** Configure requests run one at a time, so two tabs starting together see each other's result. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: ConfigurationOptions<App>) {
    this.#options = options;
    const { fromCode } = options;
    this.#settled = fromCode !== undefined;
    if (fromCode) {
      this.#app = options.build({ baseUrl: options.defaultBaseUrl, ...fromCode });
      this.#read = Promise.resolve();
      return;
    }
    this.#store = options.store();
    this.#read = this.#store.read(options.scope).then(
      (config) => {
        if (config) this.#app = options.build(config);
      },
      (error: unknown) => console.error("[webgpu-inference] the stored configuration could not be read", error),
    );
    void this.#read.then(() => (this.#settled = true));
  }

  /** The app for the configuration in force; undefined until one is known. */
  get app(): App | undefined {
    return this.#app;
  }

  /** False only while a restarted worker is still reading its stored configuration. */
  get settled(): boolean {
    return this.#settled;
  }

  /** The app once any stored configuration is read. */
  async ready(): Promise<App | undefined> {
    await this.#read;
    return this.#app;
  }

  /** A page's `startInference` options: the configuration it gets, or why not. */
  configure(wanted: Partial<InferenceConfig>, requester: string | undefined): Promise<ConfigureReply> {
    const reply = this.#queue.then(async () => {
      await this.#read;
      return this.#options.fromCode ? this.#checkAgainstCode(wanted) : await this.#adopt(wanted, requester);
    });
    this.#queue = reply.catch(() => undefined);
    return reply.catch((error: unknown) => ({ ok: false, message: (error as Error).message ?? String(error) }));
  }

  #checkAgainstCode(wanted: Partial<InferenceConfig>): ConfigureReply {
    const current = this.#app!.config;
    const differing = differingOptions(current, resolveConfig({ ...current, ...wanted }), Object.keys(wanted));
    if (!differing.length) return { ok: true, config: current };
    return refuse(
      `this worker (${this.#options.scriptPath}) sets its configuration in its code, with installInference(), and the page's startInference() asked for other values (${differing.join("; ")}). Give startInference() no configuration options, or the same ones, or change the worker's code.`,
    );
  }

  async #adopt(wanted: Partial<InferenceConfig>, requester: string | undefined): Promise<ConfigureReply> {
    const config = resolveConfig({ baseUrl: this.#options.defaultBaseUrl, ...wanted });
    const current = this.#app;
    if (current) {
      const differing = differingOptions(current.config, config, configurationKeys);
      if (!differing.length) return { ok: true, config: current.config };
      const others = (await this.#options.windows()).filter((id) => id !== requester);
      if (others.length) {
        return refuse(
          `one configuration serves every tab of this app, and ${others.length} other open tab(s) use the current one; this page asked for other options (${differing.join("; ")}). Start every tab with the same options, or close the other tabs first.`,
        );
      }
      await current.engine.dispose?.();
    }
    this.#app = this.#options.build(config);
    await this.#store!.write(this.#options.scope, config);
    return { ok: true, config };
  }
}

/**
 * Engines that run in an open page of the app, for the worker: web-llm for browsers that have
 * WebGPU in pages but not in service workers, and llama.cpp (our WebAssembly build), which needs a Worker that
 * a service worker cannot start. The worker forwards generations to the page over a
 * MessageChannel; everything above the engine (routing, validation, accounts, queueing, SSE) still
 * runs in the worker.
 *
 * Protocol: the worker posts `{type, engine, …}` to a host page with a port; the page answers on
 * that port with `{ok, value}` / `{ok: false, error}` for a call. A generation takes two ports:
 * its parts come on the first (src/engines/part-stream.ts), and the worker posts `{abort: true}`
 * there to stop it. An engine that generates off the page's thread (llama.cpp, `streamTo`) is
 * handed the first port, so its parts skip the page; the page reports on the second a failure
 * that leaves the first silent. A page announces the engines it hosts.
 */
import type { DeviceFeatures } from "../catalogue/builds.js";
import type { ModelEntry } from "../catalogue/entry.js";
import { cannotEmbed, EngineError } from "../core/errors/engine.js";
import type {
  EmbeddingRequest,
  Embeddings,
  Engine,
  GenerationPart,
  GenerationRequest,
  ModelStatus,
} from "./contract.js";
import { noHostMessage } from "./choice.js";
import {
  fromWireError,
  PartInbox,
  toWireError,
  type AbortMessage,
  type PartMessage,
  type WireError,
} from "./part-stream.js";

const prefix = "webgpu-inference:";
export const hostAnnouncement = `${prefix}host`;
/** Sent to every page by a worker that knows no host, e.g. after the browser restarted it. */
const hostQuestion = `${prefix}who-hosts`;
const hostWaitMs = 2_000;
/**
 * The call ports a page keeps open, one per announcement: a worker's calls come on the port it
 * was given, which a direct port carries without the browser's client messaging; old ones close.
 */
const keptCallPorts = 4;
/**
 * How often a worker waiting on a host page checks that the page is still open. A port whose
 * page was closed goes quiet and says nothing, so without the check a generation would wait
 * forever and hold the engine, and every later request would queue behind it.
 */
const hostCheckMs = 1_000;

/** Why a call or generation ended when its host page went away. */
function hostClosedError(engine: string): EngineError {
  return new EngineError(
    "device",
    `The page that ran ${engine} for this request was closed or reloaded before it finished. Keep a page of the app open while it serves; the next request goes to another open page that hosts ${engine}.`,
  );
}

type Call = { engine: string } & (
  | { type: `${typeof prefix}device` }
  | { type: `${typeof prefix}status`; model: ModelEntry }
  | { type: `${typeof prefix}load`; model: ModelEntry }
  | { type: `${typeof prefix}delete`; model: ModelEntry }
  | { type: `${typeof prefix}generate`; request: GenerationRequest }
  | { type: `${typeof prefix}embed`; request: EmbeddingRequest }
);

/** What a host page posts to the worker: the engines it runs. */
export interface HostAnnouncement {
  type: typeof hostAnnouncement;
  engines: string[];
}

type Reply = { ok: true; value: unknown } | { ok: false; error: WireError };

interface SerializedDevice {
  webgpu: boolean;
  features: string[];
  softwareAdapter?: boolean;
  memoryBudgetMB?: number;
  threads?: number;
}

/**
 * Worker side: the open pages that host engines, by engine. A worker restarted by the browser
 * has forgotten them: the first lookup asks every page once and waits briefly for answers; a
 * page that starts hosting later announces itself.
 */
export class PageHosts {
  readonly #clients: Clients;
  /** Client id → the engines it hosts and the port it takes calls on, the latest announcement last. */
  readonly #hosts = new Map<string, { engines: ReadonlySet<string>; calls: MessagePort | undefined }>();
  #asked: Promise<void> | undefined;
  #announced: (() => void) | undefined;

  constructor(clients: Clients) {
    this.#clients = clients;
  }

  /** `calls` is the port the page takes calls on; without one (a page of an older release), calls go to the client. */
  add(clientId: string, engines: readonly string[], calls?: MessagePort): void {
    this.#hosts.get(clientId)?.calls?.close();
    this.#hosts.delete(clientId);
    this.#hosts.set(clientId, { engines: new Set(engines), calls });
    this.#announced?.();
  }

  async #known(engine: string): Promise<Host | undefined> {
    for (const [id, host] of [...this.#hosts].reverse()) {
      if (!host.engines.has(engine)) continue;
      const client = await this.#clients.get(id);
      if (client) return { id, calls: host.calls ?? client };
      this.#hosts.get(id)?.calls?.close();
      this.#hosts.delete(id);
    }
    return undefined;
  }

  #ask(): Promise<void> {
    this.#asked ??= (async () => {
      const answered = new Promise<void>((resolve) => {
        this.#announced = resolve;
        setTimeout(resolve, hostWaitMs);
      });
      for (const client of await this.#clients.matchAll({ type: "window" })) client.postMessage({ type: hostQuestion });
      await answered;
      this.#announced = undefined;
    })();
    return this.#asked;
  }

  /**
   * Calls `onClosed` once if the host page `id` is closed now or closes before the returned
   * function is called (which stops the watch), and forgets the page as a host.
   */
  watch(id: string, onClosed: () => void): () => void {
    let watching = true;
    const check = () =>
      void this.#clients.get(id).then((client) => {
        if (client || !watching) return;
        stop();
        this.#hosts.get(id)?.calls?.close();
        this.#hosts.delete(id);
        onClosed();
      });
    const timer = setInterval(check, hostCheckMs);
    const stop = () => {
      watching = false;
      clearInterval(timer);
    };
    check();
    return stop;
  }

  /**
   * The latest page announced as hosting `engine` on a call port, not looked up: a call to it is
   * watched from the start (`watch`), which finds a page closed since at once.
   */
  remembered(engine: string): Host | undefined {
    for (const [id, host] of [...this.#hosts].reverse())
      if (host.engines.has(engine) && host.calls) return { id, calls: host.calls };
    return undefined;
  }

  /** The latest open page that hosts `engine`, if any. */
  async find(engine: string): Promise<Host | undefined> {
    const known = await this.#known(engine);
    if (known) return known;
    await this.#ask();
    return this.#known(engine);
  }
}

/** A page that hosts engines (its client id), and where its calls are posted. */
interface Host {
  id: string;
  calls: { postMessage(message: unknown, transfer: Transferable[]): void };
}

/** Worker side: an Engine whose work is done by a host page. */
export class PageHostedEngine implements Engine {
  readonly name: string;
  readonly #hosts: PageHosts;
  readonly #engine: string;
  #device: Promise<DeviceFeatures> | undefined;

  /** `engine` is the name the host page runs it under (`webllm`, `llamacpp`, `deterministic`). */
  constructor(options: { hosts: PageHosts; engine: string; name?: string }) {
    this.#hosts = options.hosts;
    this.#engine = options.engine;
    this.name = options.name ?? options.engine;
  }

  /** Whether an open page hosts this engine now. */
  async hosted(): Promise<boolean> {
    return (await this.#hosts.find(this.#engine)) !== undefined;
  }

  async #host(): Promise<Host> {
    const host = await this.#hosts.find(this.#engine);
    if (host) return host;
    throw new EngineError("device", noHostMessage(this.#engine));
  }

  /**
   * A call answered on its port; `signal`'s abort is posted there too, for a call that heeds it
   * (`embed`). It goes to the page last remembered to host the engine, without a lookup; if that
   * page has closed since, to another, once.
   */
  async #call(call: Call, signal?: AbortSignal, remembered = true): Promise<unknown> {
    const known = remembered ? this.#hosts.remembered(this.#engine) : undefined;
    const host = known ?? (await this.#host());
    const channel = new MessageChannel();
    const abort = () => channel.port1.postMessage({ abort: true } satisfies AbortMessage);
    signal?.addEventListener("abort", abort, { once: true });
    let stopWatching = () => {};
    const reply = new Promise<Reply | "closed">((resolve) => {
      channel.port1.onmessage = (event: MessageEvent<Reply>) => resolve(event.data);
      stopWatching = this.#hosts.watch(host.id, () => resolve("closed"));
    });
    host.calls.postMessage(call, [channel.port2]);
    const answer = await reply;
    stopWatching();
    signal?.removeEventListener("abort", abort);
    channel.port1.close();
    if (answer === "closed") {
      if (known) return this.#call(call, signal, false);
      throw hostClosedError(this.#engine);
    }
    if (!answer.ok) throw fromWireError(answer.error);
    return answer.value;
  }

  /**
   * Asked once, for every request's engine choice: one configuration serves every host page,
   * so any host's answer holds. A failure (no host yet) is not kept.
   */
  device(): Promise<DeviceFeatures> {
    this.#device ??= this.#call({ type: `${prefix}device`, engine: this.#engine }).then(
      (value) => {
        const device = value as SerializedDevice;
        return { ...device, features: new Set(device.features) };
      },
      (error: unknown) => {
        this.#device = undefined;
        throw error;
      },
    );
    return this.#device;
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    return (await this.#call({ type: `${prefix}status`, engine: this.#engine, model })) as ModelStatus;
  }

  async load(model: ModelEntry): Promise<void> {
    await this.#call({ type: `${prefix}load`, engine: this.#engine, model });
  }

  async deleteCached(model: ModelEntry): Promise<void> {
    await this.#call({ type: `${prefix}delete`, engine: this.#engine, model });
  }

  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    return (await this.#call({ type: `${prefix}embed`, engine: this.#engine, request }, signal)) as Embeddings;
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    const host = await this.#host();
    const parts = new MessageChannel();
    const failures = new MessageChannel();
    const inbox = new PartInbox().listen(parts.port1).listen(failures.port1);
    // On both ports: the page hears it too, while the engine's thread may be busy in a step.
    const abort = () => {
      parts.port1.postMessage({ abort: true } satisfies AbortMessage);
      failures.port1.postMessage({ abort: true } satisfies AbortMessage);
    };
    signal.addEventListener("abort", abort, { once: true });
    const stopWatching = this.#hosts.watch(host.id, () => inbox.fail(hostClosedError(this.#engine)));
    host.calls.postMessage({ type: `${prefix}generate`, engine: this.#engine, request } satisfies Call, [
      parts.port2,
      failures.port2,
    ]);
    try {
      yield* inbox.parts();
    } finally {
      stopWatching();
      signal.removeEventListener("abort", abort);
      parts.port1.close();
      failures.port1.close();
    }
  }
}

/** The engine a call names, or an error naming what this page hosts. */
function engineFor(engines: Readonly<Record<string, Engine>>, name: string): Engine {
  const engine = Object.hasOwn(engines, name) ? engines[name] : undefined;
  if (engine) return engine;
  throw new EngineError(
    "device",
    `This page hosts ${Object.keys(engines).join(", ") || "no engine"}, not ${name}: pass it in startInference({ pageEngine }).`,
  );
}

async function answerCall(engine: Engine, call: Call, signal: AbortSignal): Promise<unknown> {
  switch (call.type) {
    case `${prefix}device`: {
      const device = await engine.device();
      return { ...device, features: [...device.features] } satisfies SerializedDevice;
    }
    case `${prefix}status`:
      return engine.status(call.model);
    case `${prefix}load`:
      return engine.load(call.model);
    case `${prefix}delete`:
      return engine.deleteCached?.(call.model);
    case `${prefix}embed`:
      if (!engine.embed) throw cannotEmbed(engine.name, call.request.model.id);
      return engine.embed(call.request, signal);
    default:
      throw new Error(`unknown call ${call.type}`);
  }
}

/**
 * Page side: runs `engines` (by name) for the worker. Returns a function that stops hosting.
 * The page announces itself to the worker now and whenever a new worker takes control.
 */
export function hostEngine(
  engines: Readonly<Record<string, Engine>>,
  container: ServiceWorkerContainer = navigator.serviceWorker,
): () => void {
  // The ports calls come on, the newest last: a worker being replaced may still call on its own.
  const callPorts: MessagePort[] = [];
  const announce = () => {
    const controller = container.controller;
    if (!controller) return;
    const calls = new MessageChannel();
    calls.port1.onmessage = onMessage;
    callPorts.push(calls.port1);
    if (callPorts.length > keptCallPorts) callPorts.shift()!.close();
    const announcement: HostAnnouncement = { type: hostAnnouncement, engines: Object.keys(engines) };
    controller.postMessage(announcement, [calls.port2]);
  };
  const onMessage = (event: MessageEvent<Call>) => {
    const port = event.ports[0];
    const call = event.data;
    if ((call as { type?: string } | null)?.type === hostQuestion) {
      announce();
      return;
    }
    if (!port || typeof call?.type !== "string" || !call.type.startsWith(prefix)) return;
    if (call.type === `${prefix}generate`) {
      void serveGeneration(engines, call, port, event.ports[1]);
      return;
    }
    const controller = new AbortController();
    port.onmessage = (message: MessageEvent<AbortMessage | null>) => {
      if (message.data?.abort) controller.abort();
    };
    void (async () => {
      try {
        const value = await answerCall(engineFor(engines, call.engine), call, controller.signal);
        port.postMessage({ ok: true, value } satisfies Reply);
      } catch (error) {
        port.postMessage({ ok: false, error: toWireError(error) } satisfies Reply);
      } finally {
        port.close();
      }
    })();
  };
  container.addEventListener("message", onMessage);
  container.addEventListener("controllerchange", announce);
  announce();
  return () => {
    container.removeEventListener("message", onMessage);
    container.removeEventListener("controllerchange", announce);
    for (const port of callPorts.splice(0)) port.close();
  };
}

/**
 * A generation for the worker: handed whole to an engine that streams onto a port itself, or
 * relayed part by part. `failures` is absent where the worker is of a release before it; once
 * `port` is handed to the engine, a failure can only go there, and the worker's abort comes on
 * it too, for the engine to stop a step its own thread cannot break off.
 */
async function serveGeneration(
  engines: Readonly<Record<string, Engine>>,
  call: Call & { request: GenerationRequest },
  port: MessagePort,
  failures: MessagePort | undefined,
): Promise<void> {
  const controller = new AbortController();
  let errors = port;
  try {
    const engine = engineFor(engines, call.engine);
    if (engine.streamTo && failures) {
      errors = failures;
      failures.onmessage = (event: MessageEvent<AbortMessage | null>) => {
        if (event.data?.abort) controller.abort();
      };
      await engine.streamTo(call.request, port, controller.signal);
      return;
    }
    port.onmessage = (event: MessageEvent<AbortMessage | null>) => {
      if (event.data?.abort) controller.abort();
    };
    for await (const part of engine.generate(call.request, controller.signal))
      port.postMessage({ part } satisfies PartMessage);
  } catch (error) {
    errors.postMessage({ error: toWireError(error) } satisfies PartMessage);
  } finally {
    if (errors === port) port.close();
    failures?.close();
  }
}

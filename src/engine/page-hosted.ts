/**
 * The fallback for browsers that have WebGPU in pages but not in service workers: an open page
 * of the app hosts the engine, and the worker forwards generations to it over a MessageChannel.
 * Everything above the engine (routing, validation, queueing, SSE) still runs in the worker.
 *
 * Protocol, one MessageChannel per call: the worker posts `{type, …}` to the host page with a
 * port; the page answers on that port with `{ok, value}` / `{ok: false, error}` for a call, or
 * a stream of `{part}` ending with a `finish` part (or an `error`) for a generation. The worker
 * posts `{abort: true}` on the port to stop a generation.
 */
import type { DeviceFeatures, ModelEntry } from "../catalogue.js";
import { EngineError, type EngineErrorKind } from "./errors.js";
import type { Engine, GenerationPart, GenerationRequest, ModelStatus } from "./types.js";

const prefix = "webgpu-inference:";
export const hostAnnouncement = `${prefix}host`;
/** Sent to every page by a worker that knows no host, e.g. after the browser restarted it. */
export const hostQuestion = `${prefix}who-hosts`;
const hostWaitMs = 2_000;

type Call =
  | { type: `${typeof prefix}device` }
  | { type: `${typeof prefix}status`; model: ModelEntry }
  | { type: `${typeof prefix}load`; model: ModelEntry }
  | { type: `${typeof prefix}generate`; request: GenerationRequest };

interface WireError {
  kind: EngineErrorKind | null;
  message: string;
  retryAfterSeconds?: number;
}

type Reply = { ok: true; value: unknown } | { ok: false; error: WireError };
type StreamMessage = { part: GenerationPart } | { error: WireError };

function toWireError(error: unknown): WireError {
  if (error instanceof EngineError) return { kind: error.kind, message: error.message, ...(error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : {}) };
  return { kind: null, message: error instanceof Error ? error.message : String(error) };
}

function fromWireError(error: WireError): Error {
  return error.kind ? new EngineError(error.kind, error.message, error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : {}) : new Error(error.message);
}

interface SerializedDevice {
  webgpu: boolean;
  features: string[];
  memoryBudgetMB?: number;
}

/** Worker side: an Engine whose work is done by a host page. */
export class PageHostedEngine implements Engine {
  readonly name: string;
  readonly #clients: Clients;
  readonly #hosts: string[] = [];
  #announced: (() => void) | undefined;

  constructor(options: { clients: Clients; name: string }) {
    this.#clients = options.clients;
    this.name = options.name;
  }

  /** A page announced that it hosts the engine; the latest announcement is preferred. */
  addHost(clientId: string): void {
    const known = this.#hosts.indexOf(clientId);
    if (known >= 0) this.#hosts.splice(known, 1);
    this.#hosts.push(clientId);
    this.#announced?.();
  }

  async #knownHost(): Promise<Client | undefined> {
    for (let index = this.#hosts.length - 1; index >= 0; index--) {
      const client = await this.#clients.get(this.#hosts[index] ?? "");
      if (client) return client;
      this.#hosts.splice(index, 1);
    }
    return undefined;
  }

  async #host(): Promise<Client> {
    const known = await this.#knownHost();
    if (known) return known;
    // A restarted worker has forgotten its hosts: ask the open pages, and wait briefly.
    const announced = new Promise<void>((resolve) => {
      this.#announced = resolve;
      setTimeout(resolve, hostWaitMs);
    });
    for (const client of await this.#clients.matchAll({ type: "window" })) client.postMessage({ type: hostQuestion });
    await announced;
    this.#announced = undefined;
    const found = await this.#knownHost();
    if (found) return found;
    throw new EngineError(
      "device",
      "No open page hosts the engine. This browser has no WebGPU in service workers, so a page of this app must stay open to run the model (startInference() with `pageEngine`).",
    );
  }

  async #call(call: Call): Promise<unknown> {
    const host = await this.#host();
    const channel = new MessageChannel();
    const reply = new Promise<Reply>((resolve) => {
      channel.port1.onmessage = (event: MessageEvent<Reply>) => resolve(event.data);
    });
    host.postMessage(call, [channel.port2]);
    const answer = await reply;
    channel.port1.close();
    if (!answer.ok) throw fromWireError(answer.error);
    return answer.value;
  }

  async device(): Promise<DeviceFeatures> {
    const device = (await this.#call({ type: `${prefix}device` })) as SerializedDevice;
    return { ...device, features: new Set(device.features) };
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    return (await this.#call({ type: `${prefix}status`, model })) as ModelStatus;
  }

  async load(model: ModelEntry): Promise<void> {
    await this.#call({ type: `${prefix}load`, model });
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    const host = await this.#host();
    const channel = new MessageChannel();
    const inbox: StreamMessage[] = [];
    let wake: (() => void) | undefined;
    channel.port1.onmessage = (event: MessageEvent<StreamMessage>) => {
      inbox.push(event.data);
      wake?.();
    };
    const abort = () => channel.port1.postMessage({ abort: true });
    signal.addEventListener("abort", abort, { once: true });
    host.postMessage({ type: `${prefix}generate`, request } satisfies Call, [channel.port2]);
    try {
      for (;;) {
        const message = inbox.shift() ?? (await new Promise<void>((resolve) => (wake = resolve)), inbox.shift());
        if (!message) continue;
        if ("error" in message) throw fromWireError(message.error);
        yield message.part;
        if (message.part.type === "finish") return;
      }
    } finally {
      signal.removeEventListener("abort", abort);
      channel.port1.close();
    }
  }
}

/**
 * Page side: runs `engine` for the worker. Returns a function that stops hosting.
 * The page announces itself to the worker now and whenever a new worker takes control.
 */
export function hostEngine(engine: Engine, container: ServiceWorkerContainer = navigator.serviceWorker): () => void {
  const announce = () => container.controller?.postMessage({ type: hostAnnouncement });
  const onMessage = (event: MessageEvent<Call>) => {
    const port = event.ports[0];
    const call = event.data;
    if ((call as { type?: string } | null)?.type === hostQuestion) {
      announce();
      return;
    }
    if (!port || typeof call?.type !== "string" || !call.type.startsWith(prefix)) return;
    if (call.type === `${prefix}generate`) {
      void serveGeneration(engine, call.request, port);
      return;
    }
    void (async () => {
      try {
        let value: unknown;
        if (call.type === `${prefix}device`) {
          const device = await engine.device();
          value = { ...device, features: [...device.features] } satisfies SerializedDevice;
        } else if (call.type === `${prefix}status`) value = await engine.status(call.model);
        else value = await engine.load(call.model);
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
  };
}

async function serveGeneration(engine: Engine, request: GenerationRequest, port: MessagePort): Promise<void> {
  const controller = new AbortController();
  port.onmessage = (event: MessageEvent<{ abort?: boolean }>) => {
    if (event.data?.abort) controller.abort();
  };
  try {
    for await (const part of engine.generate(request, controller.signal)) port.postMessage({ part } satisfies StreamMessage);
  } catch (error) {
    port.postMessage({ error: toWireError(error) } satisfies StreamMessage);
  } finally {
    port.close();
  }
}

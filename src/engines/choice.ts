/**
 * Which engine runs a model on this device. Under `auto`:
 * - web-llm where WebGPU gives a real adapter with the features and memory of one of the
 *   model's MLC builds (a software or fallback adapter runs WebGPU on the CPU, far slower than
 *   llama.cpp's CPU code, so it does not count);
 * - else llama.cpp, where a page hosts it and one of the model's GGUF builds fits (on
 *   the CPU, with its WebAssembly SIMD kernels);
 * - else none, with each engine's reason (the HTTP layer then routes to the model's upstreams,
 *   if it has any, or answers 503 `model_not_runnable` with the reasons).
 *
 * An app pins an engine for every model (`engine` in the configuration) or for one (`engine` in
 * its catalogue entry); a pinned engine is used even on a software adapter.
 */
import { chooseBuild, chooseGgufBuild, type DeviceFeatures } from "../catalogue/builds.js";
import { type LocalEngine, type ModelEntry } from "../catalogue/entry.js";
import { cannotEmbed, EngineError } from "../core/errors/engine.js";
import type {
  EmbeddingRequest,
  Embeddings,
  Engine,
  GenerationPart,
  GenerationRequest,
  LoadProgress,
  ModelStatus,
} from "./contract.js";

/** An engine that may be missing at run time: llama.cpp needs an open page to host it. */
/** Why no page serves `engine`, and what an app does about it. */
export function noHostMessage(engine: string): string {
  return engine === "llamacpp"
    ? "No open page of this app runs llama.cpp: it runs in a Worker that a page starts (a service worker cannot), so a page must stay open with startInference({ pageEngine: { llamacpp: true } })."
    : `No open page hosts the ${engine} engine. This browser has no WebGPU in service workers, so a page of this app must stay open to run the model (startInference() with \`pageEngine\`).`;
}

export interface HostedEngine extends Engine {
  hosted?(): Promise<boolean>;
}

export type EnginePolicy = "auto" | LocalEngine;

export type EngineChoice = { engine: Engine; name: LocalEngine; reason: string } | { engine: null; reason: string };

/** The chosen engine as `/v1/model/info` and the response headers name it: with llama.cpp, its threads. */
export interface NamedEngine {
  name: string;
  reason: string;
  threads?: number;
}

export class ChoosingEngine implements Engine {
  readonly name: string;
  readonly #engines: Partial<Record<LocalEngine, HostedEngine>>;
  readonly #policy: EnginePolicy;

  constructor(options: { engines: Partial<Record<LocalEngine, HostedEngine>>; policy: EnginePolicy }) {
    this.#engines = options.engines;
    this.#policy = options.policy;
    this.name = options.policy;
  }

  async choose(model: ModelEntry): Promise<EngineChoice> {
    const pinned = model.engine ?? (this.#policy === "auto" ? undefined : this.#policy);
    if (pinned) {
      const engine = this.#engines[pinned];
      const why = model.engine
        ? `${model.id} is pinned to ${pinned} in the catalogue`
        : `the configuration's engine is '${pinned}'`;
      return engine
        ? { engine, name: pinned, reason: why }
        : { engine: null, reason: `${why}, but no ${pinned} engine is configured` };
    }
    const reasons: string[] = [];
    const webllm = await this.#webllm(model, reasons);
    if (webllm) return webllm;
    const llamacpp = await this.#llamacpp(model, reasons);
    if (llamacpp) return { ...llamacpp, reason: `llama.cpp, as ${reasons.join("; ")}` };
    return { engine: null, reason: reasons.join("; ") };
  }

  async choice(model: ModelEntry): Promise<NamedEngine> {
    return this.#named(await this.choose(model));
  }

  async #named(choice: EngineChoice): Promise<NamedEngine> {
    if (!choice.engine) return { name: "none", reason: choice.reason };
    const threads = choice.name === "llamacpp" ? (await choice.engine.device()).threads : undefined;
    return { name: choice.name, reason: choice.reason, ...(threads !== undefined ? { threads } : {}) };
  }

  async #webllm(model: ModelEntry, reasons: string[]): Promise<EngineChoice | null> {
    const engine = this.#engines.webllm;
    if (!engine) return null;
    if (model.builds.length === 0) {
      reasons.push("web-llm: no MLC build");
      return null;
    }
    let device: DeviceFeatures;
    try {
      device = await engine.device();
    } catch (error) {
      reasons.push(`web-llm: ${(error as Error).message}`);
      return null;
    }
    const build = chooseBuild(model, device);
    if (!device.webgpu) reasons.push("web-llm: WebGPU gives no adapter here");
    else if (!build.ok) reasons.push(`web-llm: ${build.reason}`);
    else if (device.softwareAdapter)
      reasons.push("web-llm: the WebGPU adapter is a software one, which runs on the CPU");
    else return { engine, name: "webllm", reason: "web-llm on the WebGPU adapter" };
    return null;
  }

  async #llamacpp(model: ModelEntry, reasons: string[]): Promise<EngineChoice | null> {
    const engine = this.#engines.llamacpp;
    if (!engine) return null;
    if (model.gguf.length === 0) {
      reasons.push("llama.cpp: no GGUF build");
      return null;
    }
    if (engine.hosted && !(await engine.hosted())) {
      reasons.push(`llama.cpp: ${noHostMessage("llamacpp")}`);
      return null;
    }
    const build = chooseGgufBuild(model, await engine.device());
    if (build.ok) return { engine, name: "llamacpp", reason: "llama.cpp" };
    reasons.push(`llama.cpp: ${build.reason}`);
    return null;
  }

  async #chosen(model: ModelEntry): Promise<Engine> {
    const choice = await this.choose(model);
    if (choice.engine) return choice.engine;
    throw new EngineError("device", `${model.id} cannot run on this device: ${choice.reason}.`);
  }

  async device(): Promise<DeviceFeatures> {
    const engine = this.#engines.webllm ?? this.#engines.llamacpp;
    if (!engine) return { webgpu: false, features: new Set() };
    return engine.device();
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    const choice = await this.choose(model);
    if (!choice.engine)
      return {
        downloaded: false,
        loaded: false,
        runnable: { ok: false, reason: choice.reason },
        build: null,
        engine: { name: "none", reason: choice.reason },
      };
    return { ...(await choice.engine.status(model)), engine: await this.#named(choice) };
  }

  async load(model: ModelEntry, onProgress?: (progress: LoadProgress) => void): Promise<void> {
    await (await this.#chosen(model)).load(model, onProgress);
  }

  /** Deletes the model's files from every engine that keeps some (a missing host keeps none it can reach). */
  async deleteCached(model: ModelEntry): Promise<void> {
    for (const engine of Object.values(this.#engines)) {
      if (engine.hosted && !(await engine.hosted())) continue;
      await engine.deleteCached?.(model);
    }
  }

  async dispose(): Promise<void> {
    for (const engine of Object.values(this.#engines)) await engine.dispose?.();
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    const chosen = request.engine ? this.#engines[request.engine] : undefined;
    yield* (chosen ?? (await this.#chosen(request.model))).generate(request, signal);
  }

  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    const chosen = (request.engine ? this.#engines[request.engine] : undefined) ?? (await this.#chosen(request.model));
    if (!chosen.embed) throw cannotEmbed(chosen.name, request.model.id);
    return chosen.embed(request, signal);
  }
}

/**
 * The page's side of the llama.cpp Worker: starts it with the right build (several threads only
 * where the page is cross-origin isolated, which SharedArrayBuffer needs) and turns each call
 * into a promise. A Worker that fails (its script missing, the WebAssembly crashed) fails every
 * call waiting on it, naming what to fix.
 */
import { EngineError, fetchAsset } from "../../core/errors/engine.js";
import type { WorkerCall, WorkerReply } from "./protocol.js";

const assetFix =
  "serve the library's llamacpp/ folder beside the worker script (the Vite plugin and `npx webgpu-inference copy-assets` copy it), or set `pageEngine.llamacppUrl` to where it is";

/** The fix as a sentence of its own, for the end of an error message. */
const assetFixSentence = `${assetFix[0]!.toUpperCase()}${assetFix.slice(1)}`;

/** A build's addresses: 32-bit (4 GB), or Memory64's 64-bit (16 GB in Chromium). */
export type Addressing = "wasm32" | "wasm64";

/** A build's two files, its script and its WebAssembly, by name. */
const filesOf = (name: string) => ({ script: `${name}.js`, wasm: `${name}.wasm` });

/**
 * The files of our llama.cpp builds, relative to their folder, by addressing and threads
 * (`st`, one thread; `mt`, pthreads). Each build comes twice: `relaxed` has relaxed SIMD's 8-bit
 * dot product in the Q4_0 kernel, for browsers that have relaxed SIMD; `plain` has no relaxed
 * instruction, for the rest.
 */
const buildFiles = {
  worker: "llamacpp-worker.js",
  wasm32: {
    single: { plain: filesOf("llamacpp-st"), relaxed: filesOf("llamacpp-st-relaxed") },
    threaded: { plain: filesOf("llamacpp-mt"), relaxed: filesOf("llamacpp-mt-relaxed") },
  },
  wasm64: {
    single: { plain: filesOf("llamacpp-st64"), relaxed: filesOf("llamacpp-st64-relaxed") },
    threaded: { plain: filesOf("llamacpp-mt64"), relaxed: filesOf("llamacpp-mt64-relaxed") },
  },
} as const;

/** Whether this browser's WebAssembly has Memory64: a module with a 64-bit memory validates. */
export function hasMemory64(): boolean {
  // The header, then a memory section: one memory, flags 0x04 (64-bit), at least one page.
  const module = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x05, 0x03, 0x01, 0x04, 0x01];
  try {
    return WebAssembly.validate(new Uint8Array(module));
  } catch {
    return false;
  }
}

/**
 * Whether this browser's WebAssembly has relaxed SIMD's `i16x8.relaxed_dot_i8x16_i7x16_s`, the
 * one relaxed instruction our build uses: a module whose one function returns it validates.
 */
export function hasRelaxedDot(): boolean {
  const zero = (): number[] => [0xfd, 0x0c, ...new Array<number>(16).fill(0)];
  const body = [0x00, ...zero(), ...zero(), 0xfd, 0x92, 0x02, 0x0b];
  const module = [
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...[0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b], // one type: () -> v128
    ...[0x03, 0x02, 0x01, 0x00], // one function of that type
    ...[0x0a, body.length + 2, 0x01, body.length, ...body],
  ];
  try {
    return WebAssembly.validate(new Uint8Array(module));
  } catch {
    return false;
  }
}

/**
 * The threads llama.cpp runs on: one where the page is not cross-origin isolated (the pthreads
 * build needs SharedArrayBuffer), else `wanted`, by default a thread per core, less one for the
 * page where there are more than two (the page's thread is off a token's way: it only starts a generation).
 */
export function usableThreads(wanted: number | undefined): number {
  const isolated = typeof globalThis.crossOriginIsolated === "boolean" && globalThis.crossOriginIsolated;
  if (!isolated) return 1;
  const cores = Math.max(1, globalThis.navigator?.hardwareConcurrency ?? 1);
  return Math.max(1, Math.floor(wanted ?? (cores > 2 ? cores - 1 : cores)));
}

async function wasmBytes(url: string, fetcher?: typeof fetch): Promise<ArrayBuffer> {
  const response = await fetchAsset(url, "llama.cpp's WebAssembly", assetFix, {
    kind: "load_failed",
    ...(fetcher ? { fetcher } : {}),
  });
  const bytes = await response.arrayBuffer();
  const magic = new Uint8Array(bytes, 0, Math.min(4, bytes.byteLength));
  if (magic.join(",") !== "0,97,115,109")
    throw new EngineError(
      "load_failed",
      `Could not load llama.cpp's WebAssembly from ${url}: the file there is not WebAssembly. ${assetFixSentence}.`,
    );
  return bytes;
}

export class LlamaWorker {
  readonly threads: number;
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  #next = 1;
  #failure: Error | undefined;

  private constructor(worker: Worker, threads: number, workerUrl: string) {
    this.#worker = worker;
    this.threads = threads;
    worker.onmessage = (event: MessageEvent<WorkerReply>) => {
      const waiting = this.#pending.get(event.data.id);
      this.#pending.delete(event.data.id);
      if (event.data.ok) waiting?.resolve(event.data.value);
      else waiting?.reject(new Error(event.data.message));
    };
    worker.onerror = (event) => {
      event.preventDefault();
      this.#fail(
        new EngineError(
          "load_failed",
          `llama.cpp's Worker (${workerUrl}) failed: ${event.message || "its script could not be run"}. ${assetFixSentence}.`,
        ),
      );
    };
  }

  /** Starts the Worker and its WebAssembly: `threads` > 1 takes the pthreads build. */
  static async start(
    folder: string,
    threads: number,
    addressing: Addressing,
    fetcher?: typeof fetch,
  ): Promise<LlamaWorker> {
    const threaded = threads > 1;
    const builds = threaded ? buildFiles[addressing].threaded : buildFiles[addressing].single;
    const files = hasRelaxedDot() ? builds.relaxed : builds.plain;
    const workerUrl = new URL(buildFiles.worker, folder).href;
    const wasm = await wasmBytes(new URL(files.wasm, folder).href, fetcher);
    // A missing Worker script only says "error": fetch it first, so the 503 can name it.
    await fetchAsset(workerUrl, "llama.cpp's Worker script", assetFix, {
      kind: "load_failed",
      ...(fetcher ? { fetcher } : {}),
    }).then((response) => response.body?.cancel());
    const worker = new LlamaWorker(new Worker(workerUrl), threaded ? threads : 1, workerUrl);
    try {
      await worker.call({ call: "start", script: new URL(files.script, folder).href, wasm, threads }, [wasm]);
    } catch (error) {
      worker.terminate();
      throw error instanceof EngineError
        ? error
        : new EngineError(
            "load_failed",
            `llama.cpp's WebAssembly did not start: ${(error as Error).message}. ${assetFixSentence}.`,
            { cause: error },
          );
    }
    return worker;
  }

  call<T = unknown>(message: WorkerCall, transfer: Transferable[] = []): Promise<T> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.#worker.postMessage({ id, ...message }, transfer);
    });
  }

  #fail(error: Error): void {
    this.#failure = error;
    for (const waiting of this.#pending.values()) waiting.reject(error);
    this.#pending.clear();
  }

  terminate(): void {
    this.#worker.terminate();
    this.#fail(new Error("llama.cpp's Worker was stopped"));
  }
}

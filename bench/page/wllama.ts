/**
 * wllama, the browser peer that runs llama.cpp in WebAssembly too, from the benchmark's own
 * install (bench/wllama/), on the same GGUF and prompt as our engine: for `npm run bench:cpu`.
 * Its one build has Memory64 and JSPI; it runs on the CPU here (no GPU layers, so it starts no
 * WebGPU). One model at a time: a Wllama instance loads once, so each load makes a new one.
 */
import { renderChat } from "../../src/prompt/templates.js";

interface WllamaSample {
  firstTokenMs: number | null;
  totalMs: number;
  promptTokens: number;
  /** Of the prompt, the tokens wllama reused from its cache (its `timings.cache_n`). */
  cachedTokens: number;
  completionTokens: number;
}

export interface WllamaCalls {
  /** Loads `url` (a GGUF) in a new wllama at `threads` threads; unloads the last one first. */
  wllamaLoad(request: { url: string; threads: number; contextSize: number }): Promise<void>;
  /**
   * A greedy raw completion of the chat `messages` rendered as our engine is given them (Llama 3's
   * template, less its BOS text, which llama.cpp adds as a token), streamed: when its first token
   * came, and its usage.
   */
  wllamaSample(request: { messages: { role: "user"; content: string }[]; maxTokens: number }): Promise<WllamaSample>;
  wllamaUnload(): Promise<void>;
}

interface WllamaInstance {
  loadModelFromUrl(url: string, params: Record<string, unknown>): Promise<void>;
  createCompletion(options: Record<string, unknown>): Promise<
    AsyncIterable<{
      choices: { text: string }[];
      usage?: { prompt_tokens: number; completion_tokens: number } | null;
      timings?: { cache_n: number };
    }>
  >;
  exit(): Promise<void>;
}
interface WllamaModule {
  Wllama: new (paths: { default: string }, config: Record<string, unknown>) => WllamaInstance;
}

/** Where bench/cpu.mjs serves the package's `esm/` folder. */
const folder = "/wllama/";

export function wllamaCalls(): WllamaCalls {
  let wllama: WllamaInstance | undefined;
  return {
    async wllamaLoad({ url, threads, contextSize }) {
      // The last one may have failed and be unusable: its exit may fail too.
      await wllama?.exit().catch(() => undefined);
      const script: string = `${folder}index.js`;
      const library = (await import(/* @vite-ignore */ script)) as WllamaModule;
      const quiet = { debug() {}, log() {}, warn() {}, error: console.error };
      wllama = new library.Wllama({ default: `${folder}wasm/wllama.wasm` }, { logger: quiet, suppressNativeLog: true });
      await wllama.loadModelFromUrl(new URL(url, location.href).href, {
        n_threads: threads,
        n_ctx: contextSize,
        n_batch: 512,
        n_gpu_layers: 0,
        useCache: false,
      });
    },
    async wllamaSample({ messages, maxTokens }) {
      if (!wllama) throw new Error("wllamaLoad() first");
      const prompt = renderChat("llama3", messages).replace(/^<\|begin_of_text\|>/, "");
      const started = performance.now();
      const sample: WllamaSample = {
        firstTokenMs: null,
        totalMs: 0,
        promptTokens: 0,
        cachedTokens: 0,
        completionTokens: 0,
      };
      let chunks = 0;
      const stream = await wllama.createCompletion({ prompt, max_tokens: maxTokens, temperature: 0, stream: true });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.text) {
          sample.firstTokenMs ??= performance.now() - started;
          chunks++;
        }
        if (chunk.usage) {
          sample.promptTokens = chunk.usage.prompt_tokens;
          sample.completionTokens = chunk.usage.completion_tokens;
        }
        if (chunk.timings) sample.cachedTokens = chunk.timings.cache_n;
      }
      sample.totalMs = performance.now() - started;
      sample.completionTokens ||= chunks;
      return sample;
    },
    async wllamaUnload() {
      await wllama?.exit().catch(() => undefined);
      wllama = undefined;
    },
  };
}

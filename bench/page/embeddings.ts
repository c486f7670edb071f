/**
 * The embedding benchmark's calls in the page (bench/embeddings.mjs): `/v1/embeddings` as an app
 * fetches it, the page's llama.cpp engine driven directly, and transformers.js, the library most
 * browser apps embed with today, from the benchmark's own install (bench/transformers/).
 */
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { floatsOfBase64 } from "../../src/core/wire/embeddings.js";
import type { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import type { StartInferenceOptions } from "../../src/index.js";

/** One batch as the page saw it: ms from the call to the vectors in hand. */
interface EmbeddingSample {
  ms: number;
  /** The tokens embedded, as the path counts them (llama.cpp: the GGUF's vocabulary; transformers.js: its tokenizer). */
  promptTokens: number;
  vectors: number;
  dimensions: number;
}

export interface EmbeddingCalls {
  /** `POST /v1/embeddings` with base64 vectors (what the OpenAI SDKs ask for), decoded to floats. */
  embedOurs(request: { model: string; input: string[] }): Promise<EmbeddingSample>;
  /** The same inputs straight into the engine that serves /v1 in this page. */
  embedDirect(request: { model: string; input: string[] }): Promise<EmbeddingSample>;
  /** Loads transformers.js's feature-extraction pipeline on a local ONNX model, at `threads` ONNX Runtime threads. */
  transformersLoad(request: { model: string; dtype: string; threads: number }): Promise<{ threads: number }>;
  /** One batch through it, mean-pooled and normalised, as an app calls it. */
  transformersEmbed(request: { input: string[] }): Promise<EmbeddingSample>;
}

type Tensor = { dims: number[]; data: ArrayLike<number | bigint> };
type Extractor = ((input: string[], options: { pooling: "mean"; normalize: boolean }) => Promise<Tensor>) & {
  tokenizer: (input: string[], options: { padding: boolean }) => { attention_mask: Tensor };
};
interface TransformersModule {
  env: {
    allowRemoteModels: boolean;
    allowLocalModels: boolean;
    localModelPath: string;
    backends: { onnx: { wasm: { wasmPaths: string; numThreads: number } } };
  };
  pipeline(task: string, model: string, options: Record<string, unknown>): Promise<Extractor>;
}

export function embeddingCalls(
  context: () => { baseURL: string; key: string; options: StartInferenceOptions; engine: LlamaCppEngine },
): EmbeddingCalls {
  let extractor: Extractor | undefined;
  return {
    async embedOurs({ model, input }) {
      const { baseURL, key } = context();
      const started = performance.now();
      const response = await fetch(`${baseURL}/embeddings`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model, input, encoding_format: "base64" }),
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
      const body = (await response.json()) as { data: { embedding: string }[]; usage: { prompt_tokens: number } };
      const vectors = body.data.map((item) => floatsOfBase64(item.embedding));
      const ms = performance.now() - started;
      return { ms, promptTokens: body.usage.prompt_tokens, vectors: vectors.length, dimensions: vectors[0]!.length };
    },
    async embedDirect({ model, input }) {
      const { options, engine } = context();
      const entry = Catalogue.create((options.models ?? []) as Parameters<typeof Catalogue.create>[0]).get(model);
      if (!entry) throw new Error(`no model ${model}`);
      const started = performance.now();
      const inputs = input.map((text) => ({ kind: "text" as const, text }));
      const embedded = await engine.embed({ model: entry, inputs }, new AbortController().signal);
      const ms = performance.now() - started;
      const dimensions = embedded.vectors[0]!.length;
      return { ms, promptTokens: embedded.promptTokens, vectors: embedded.vectors.length, dimensions };
    },
    async transformersLoad({ model, dtype, threads }) {
      const url: string = "/transformers/transformers.min.js";
      const library = (await import(/* @vite-ignore */ url)) as TransformersModule;
      library.env.allowRemoteModels = false;
      library.env.allowLocalModels = true;
      library.env.localModelPath = "/onnx-models/";
      library.env.backends.onnx.wasm.wasmPaths = "/onnxruntime/";
      library.env.backends.onnx.wasm.numThreads = threads;
      extractor = await library.pipeline("feature-extraction", model, { device: "wasm", dtype });
      return { threads: library.env.backends.onnx.wasm.numThreads };
    },
    async transformersEmbed({ input }) {
      if (!extractor) throw new Error("transformersLoad() first");
      // Counted before the clock starts: the real tokens, not the batch's padding.
      const mask = extractor.tokenizer(input, { padding: true }).attention_mask.data;
      let promptTokens = 0;
      for (let index = 0; index < mask.length; index++) promptTokens += Number(mask[index]);
      const started = performance.now();
      const output = await extractor(input, { pooling: "mean", normalize: true });
      const ms = performance.now() - started;
      return { ms, promptTokens, vectors: output.dims[0]!, dimensions: output.dims.at(-1)! };
    },
  };
}

/**
 * The messages between the llama.cpp adapter (in a page) and its dedicated Worker, which runs
 * our WebAssembly build of llama.cpp (`native/llamacpp/engine.cpp`). The adapter tokenizes and
 * checks a prompt with one call, then hands the Worker the whole generation with another: the
 * Worker prefills, samples and decodes in a loop of its own and posts each part to the port it
 * was given, so no thread between it and the reader wakes for a token.
 */

/** What the worker needs to start its WebAssembly: the build's script, its bytes, and the threads. */
interface StartCall {
  call: "start";
  /** `llamacpp-st.js`, or `llamacpp-mt.js` (pthreads) where the page is cross-origin isolated; `64` for Memory64; `-relaxed` where WebAssembly has relaxed SIMD. */
  script: string;
  wasm: ArrayBuffer;
  threads: number;
}

interface LoadCall {
  call: "load";
  /** The model's files in order (a split model's parts), from the download cache. */
  files: Blob[];
  contextWindow: number;
  batchSize: number;
  threads: number;
  /** An embedding model: a context that pools each input into one vector (`embed`). */
  embeddings: boolean;
}

export interface SamplerSettings {
  temperature: number;
  topP: number;
  presencePenalty: number;
  frequencyPenalty: number;
  seed: number;
  bias: [number, number][];
  /** GBNF, or "" for none. */
  grammar: string;
}

interface GenerateCall {
  call: "generate";
  /** The prompt's ids; what llama.cpp's KV cache holds of its start is reused. */
  prompt: number[];
  sampler: SamplerSettings;
  maxTokens: number;
  stop: string[];
  /** Log probabilities: -1 for none, else the chosen token's and this many alternatives'. */
  alternatives: number;
  /** Where the parts go (src/engines/part-stream.ts); an `{abort: true}` on it lands between steps. */
  parts: MessagePort;
  /** Whose KV cache this is: a prefix cached for another scope is not reused. */
  cacheScope: string | null;
  /** The longest one token's grammar step may take; past it the request fails (engine.cpp: `wi_sample`). */
  tokenBudgetMs: number;
  /**
   * Set to 1 by the page to stop the generation, read between steps and inside the grammar's
   * step: shared memory, where the page is cross-origin isolated; null elsewhere.
   */
  abortFlag: Int32Array | null;
}

/**
 * Inputs to embed with the loaded embedding model: text (tokenized by the GGUF's own vocabulary,
 * with the special tokens it adds, a control-token string in it staying text) or token ids.
 * Answers an `EmbedResult`, or null when the page set `abortFlag`.
 */
interface EmbedCall {
  call: "embed";
  inputs: ({ text: string } | { tokens: number[] })[];
  abortFlag: Int32Array | null;
}

export interface EmbedResult {
  vectors: Float32Array[];
  /** The tokens embedded, every input's together. */
  promptTokens: number;
}

export type WorkerCall =
  | StartCall
  | LoadCall
  | GenerateCall
  | EmbedCall
  /**
   * The prompt in the model's own vocabulary: a client's raw prompt (BOS first, control tokens
   * parsed), or our template's pieces (control tokens only where the template wrote them).
   */
  | { call: "tokenize"; text: string }
  | { call: "tokenize-pieces"; pieces: { text: string; control: boolean }[] }
  | { call: "free" };

export interface LoadResult {
  addsBos: boolean;
  bos: number;
  threads: number;
  contextWindow: number;
  batchSize: number;
  /** An embedding model's vector size, and the inputs one decode holds; 0 for a chat model. */
  dimensions: number;
  sequences: number;
  /** llama.cpp's system line: the kernels it was built with (`WASM_SIMD = 1`). */
  systemInfo: string;
}

export type WorkerReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string };

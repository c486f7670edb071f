/**
 * The messages between the llama.cpp adapter (in a page) and its dedicated Worker, which runs
 * our WebAssembly build of llama.cpp (`native/llamacpp/engine.cpp`). Each call is one step the
 * adapter drives (decode a batch, sample a token), so an abort lands between steps.
 */

/** What the worker needs to start its WebAssembly: the build's script, its bytes, and the threads. */
interface StartCall {
  call: "start";
  /** `llamacpp-st.js`, or `llamacpp-mt.js` (pthreads) where the page is cross-origin isolated. */
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
}

interface SamplerCall {
  call: "sampler";
  temperature: number;
  topP: number;
  presencePenalty: number;
  frequencyPenalty: number;
  seed: number;
  bias: [number, number][];
  /** GBNF, or "" for none. */
  grammar: string;
}

export type WorkerCall =
  | StartCall
  | LoadCall
  /**
   * The prompt in the model's own vocabulary: a client's raw prompt (BOS first, control tokens
   * parsed), or our template's pieces (control tokens only where the template wrote them).
   */
  | { call: "tokenize"; text: string }
  | { call: "tokenize-pieces"; pieces: { text: string; control: boolean }[] }
  | { call: "forget"; keep: number }
  | { call: "decode"; tokens: number[]; first: number }
  | SamplerCall
  /**
   * Samples a token; decodes it at `position` when `decode` (more may follow), so the next step
   * has its logits: after the reply, so the token streams while it is decoded.
   */
  | { call: "step"; alternatives: number; position: number; decode: boolean }
  | { call: "free" };

export interface LoadResult {
  addsBos: boolean;
  bos: number;
  threads: number;
  contextWindow: number;
  batchSize: number;
  /** llama.cpp's system line: the kernels it was built with (`WASM_SIMD = 1`). */
  systemInfo: string;
}

export interface StepResult {
  token: number;
  bytes: Uint8Array;
  end: boolean;
  /** With `alternatives` ≥ 0: the token's log probability, then the most likely tokens'. */
  logprobs?: { token: number; bytes: Uint8Array; logprob: number }[];
}

export type WorkerReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string };

/**
 * The C API of `native/llamacpp/engine.cpp`, as its Emscripten module exposes it (see
 * scripts/build-llamacpp.mjs): the one typing of it, for the engine's Worker and the build's tests.
 */
export interface LlamaCApi {
  HEAPU8: Uint8Array;
  HEAP32: Int32Array;
  HEAPF32: Float32Array;
  UTF8ToString(pointer: number): string;
  stringToUTF8(text: string, pointer: number, capacity: number): void;
  lengthBytesUTF8(text: string): number;
  _malloc(bytes: number): number;
  _free(pointer: number): void;
  _wi_error(): number;
  _wi_system_info(): number;
  /** `embeddings` 1: a context that pools each input into one vector (`_wi_embed`). */
  _wi_load(paths: number, contextWindow: number, batchSize: number, threads: number, embeddings: number): number;
  _wi_free(): void;
  _wi_info(what: number): number;
  _wi_tokenize(
    text: number,
    length: number,
    addSpecial: number,
    parseSpecial: number,
    out: number,
    capacity: number,
  ): number;
  _wi_piece(token: number, out: number, capacity: number): number;
  _wi_is_end(token: number): number;
  _wi_forget(keep: number): number;
  _wi_decode(tokens: number, count: number, first: number): number;
  /** Embeds `count` inputs in one decode: their ids one after another, each one's length, vectors out. */
  _wi_embed(tokens: number, lengths: number, count: number, out: number): number;
  _wi_sampler(
    temperature: number,
    topP: number,
    presence: number,
    frequency: number,
    seed: number,
    biasIds: number,
    biasValues: number,
    biasCount: number,
    grammar: number,
  ): number;
  _wi_sample(alternatives: number, ids: number, logprobs: number, budgetMs: number): number;
  /** Our kernels on (1) or off (0, every product back to ggml's own: native/llamacpp/tiles.c, kquants.c); the runs since the last call. */
  _wi_tiles(on: number): number;
  /** Read by the grammar's step between slices of candidates (engine.cpp): whether to stop. */
  abortRequested?: () => number;
}

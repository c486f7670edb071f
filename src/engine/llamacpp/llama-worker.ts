/**
 * The dedicated Worker that runs llama.cpp (built to `llamacpp/llamacpp-worker.js`, a classic
 * script: Emscripten's pthreads load the module's script with importScripts). It holds no state
 * of a request: the adapter drives every step, and this only calls our C API in order.
 */
import type { LoadResult, StepResult, WorkerCall, WorkerReply } from "./protocol.js";

/** What the Emscripten module of `native/llamacpp/engine.cpp` exposes (see scripts/build-llamacpp.mjs). */
interface LlamaModule {
  HEAPU8: Uint8Array;
  HEAP32: Int32Array;
  HEAPF32: Float32Array;
  FS: {
    mkdir(path: string): void;
    mount(type: unknown, options: { blobs: { name: string; data: Blob }[] }, path: string): void;
    unmount(path: string): void;
  };
  WORKERFS: { stream_ops: { read: BlobRead } };
  UTF8ToString(pointer: number): string;
  stringToUTF8(text: string, pointer: number, capacity: number): void;
  lengthBytesUTF8(text: string): number;
  _malloc(bytes: number): number;
  _free(pointer: number): void;
  _wi_error(): number;
  _wi_system_info(): number;
  _wi_load(paths: number, contextWindow: number, batchSize: number, threads: number): number;
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
  _wi_sample(alternatives: number, ids: number, logprobs: number): number;
}

type Factory = (options: Record<string, unknown>) => Promise<LlamaModule>;

/** Emscripten's read of a file node (WORKERFS: a Blob read with FileReaderSync). */
type BlobRead = (
  stream: { node: { size: number; contents: Blob } },
  buffer: Uint8Array,
  offset: number,
  length: number,
  position: number,
) => number;

/** 8 MiB: a GGUF's metadata (a vocabulary's strings, read a few bytes at a time) in a handful of reads. */
const readAheadBytes = 8 * 2 ** 20;

/**
 * WORKERFS reads its Blob once per read call, and llama.cpp reads a GGUF's metadata in pieces of
 * a few bytes through a 1 KB stdio buffer: thousands of synchronous Blob reads, seconds per load.
 * This serves small reads from the last 8 MiB read; a large one (a tensor) is read whole, as before.
 */
function readingAhead(): BlobRead {
  const reader = new FileReaderSync();
  let kept: { contents: Blob; start: number; bytes: Uint8Array } | undefined;
  return (stream, buffer, offset, length, position) => {
    const { size, contents } = stream.node;
    if (position >= size) return 0;
    const end = Math.min(size, position + length);
    if (end - position >= readAheadBytes) {
      buffer.set(new Uint8Array(reader.readAsArrayBuffer(contents.slice(position, end))), offset);
      return end - position;
    }
    if (!kept || kept.contents !== contents || position < kept.start || end > kept.start + kept.bytes.length) {
      const slice = contents.slice(position, Math.min(size, position + readAheadBytes));
      kept = { contents, start: position, bytes: new Uint8Array(reader.readAsArrayBuffer(slice)) };
    }
    buffer.set(kept.bytes.subarray(position - kept.start, end - kept.start), offset);
    return end - position;
  };
}

const scope = globalThis as unknown as {
  importScripts(url: string): void;
  createLlamaCpp?: Factory;
  onmessage: ((event: MessageEvent<{ id: number } & WorkerCall>) => void) | null;
  postMessage(message: WorkerReply, transfer?: Transferable[]): void;
};

let module: LlamaModule | undefined;

/**
 * A step's sampled token goes back before the token is decoded: the page streams it while the
 * next step's logits are computed, and the first token arrives a decode sooner. The decode runs
 * before this Worker takes its next message, so calls still see llama.cpp in order; a decode
 * that fails fails the next call.
 */
let decodeAfterReply: (() => void) | undefined;
let decodeFailure: unknown;
let mounted = false;
/** Scratch memory for a call's arguments and results, grown as needed and kept. */
let scratch = { pointer: 0, bytes: 0 };

function memory(bytes: number): number {
  const llama = loaded();
  if (bytes > scratch.bytes) {
    if (scratch.pointer) llama._free(scratch.pointer);
    scratch = { pointer: llama._malloc(bytes), bytes };
  }
  return scratch.pointer;
}

function loaded(): LlamaModule {
  if (!module) throw new Error("llama.cpp's WebAssembly is not started");
  return module;
}

function failure(): Error {
  return new Error(loaded().UTF8ToString(loaded()._wi_error()));
}

/** Calls `body` with `text` as a NUL-terminated C string. */
function withText<T>(text: string, body: (pointer: number, length: number) => T): T {
  const llama = loaded();
  const length = llama.lengthBytesUTF8(text);
  const pointer = llama._malloc(length + 1);
  try {
    llama.stringToUTF8(text, pointer, length + 1);
    return body(pointer, length);
  } finally {
    llama._free(pointer);
  }
}

function piece(token: number): Uint8Array {
  const llama = loaded();
  const pointer = memory(256);
  const length = llama._wi_piece(token, pointer, 256);
  return llama.HEAPU8.slice(pointer, pointer + Math.max(0, length));
}

async function start(call: Extract<WorkerCall, { call: "start" }>): Promise<void> {
  if (module) return;
  scope.importScripts(call.script);
  if (!scope.createLlamaCpp)
    throw new Error(`${call.script} defines no createLlamaCpp: it is not this library's llama.cpp build`);
  module = await scope.createLlamaCpp({
    wasmBinary: call.wasm,
    threads: Math.max(0, call.threads - 1),
    mainScriptUrlOrBlob: call.script,
    locateFile: (path: string) => new URL(path, call.script).href,
    print: () => {},
    printErr: () => {},
  });
}

function load(call: Extract<WorkerCall, { call: "load" }>): LoadResult {
  const llama = loaded();
  llama._wi_free();
  if (mounted) llama.FS.unmount("/models");
  else llama.FS.mkdir("/models");
  // WORKERFS reads the cached files in place (a Blob read on demand): no copy of the weights in JS.
  llama.WORKERFS.stream_ops.read = readingAhead();
  const blobs = call.files.map((data, index) => ({ name: `part-${String(index + 1).padStart(5, "0")}.gguf`, data }));
  llama.FS.mount(llama.WORKERFS, { blobs }, "/models");
  mounted = true;
  const paths = blobs.map((blob) => `/models/${blob.name}`).join("\n");
  const status = withText(paths, (pointer) =>
    llama._wi_load(pointer, call.contextWindow, call.batchSize, call.threads),
  );
  // llama.cpp has read every tensor (it loads without mmap): the read-ahead's 8 MiB can go.
  llama.WORKERFS.stream_ops.read = readingAhead();
  if (status !== 0) throw failure();
  return {
    addsBos: llama._wi_info(2) === 1,
    bos: llama._wi_info(3),
    contextWindow: llama._wi_info(1),
    threads: llama._wi_info(4),
    batchSize: llama._wi_info(5),
    systemInfo: llama.UTF8ToString(llama._wi_system_info()),
  };
}

function tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): number[] {
  const llama = loaded();
  return withText(text, (pointer, length) => {
    // A token is at least one byte, and BOS one more.
    const capacity = length + 2;
    const out = memory(capacity * 4);
    const count = llama._wi_tokenize(pointer, length, addSpecial ? 1 : 0, parseSpecial ? 1 : 0, out, capacity);
    if (count < 0) throw new Error("llama.cpp could not tokenize the prompt");
    return Array.from(llama.HEAP32.subarray(out / 4, out / 4 + count));
  });
}

function decode(tokens: number[], first: number): void {
  const llama = loaded();
  const pointer = memory(tokens.length * 4);
  llama.HEAP32.set(tokens, pointer / 4);
  if (llama._wi_decode(pointer, tokens.length, first) !== 0) throw failure();
}

function sampler(call: Extract<WorkerCall, { call: "sampler" }>): void {
  const llama = loaded();
  const count = call.bias.length;
  const ids = llama._malloc(Math.max(1, count) * 8);
  try {
    call.bias.forEach(([token, value], index) => {
      llama.HEAP32[ids / 4 + index] = token;
      llama.HEAPF32[ids / 4 + count + index] = value;
    });
    const status = withText(call.grammar, (grammar) =>
      llama._wi_sampler(
        call.temperature,
        call.topP,
        call.presencePenalty,
        call.frequencyPenalty,
        call.seed >>> 0,
        ids,
        ids + count * 4,
        count,
        grammar,
      ),
    );
    if (status !== 0) throw failure();
  } finally {
    llama._free(ids);
  }
}

function step(call: Extract<WorkerCall, { call: "step" }>): StepResult {
  const llama = loaded();
  const slots = Math.max(0, call.alternatives) + 1;
  const ids = memory(slots * 8);
  const token = llama._wi_sample(call.alternatives, ids, ids + slots * 4);
  if (token < 0) throw failure();
  // Read before piece() reuses the scratch memory.
  const chosen =
    call.alternatives >= 0
      ? Array.from({ length: slots }, (_, index) => ({
          token: llama.HEAP32[ids / 4 + index]!,
          logprob: llama.HEAPF32[ids / 4 + slots + index]!,
        }))
      : undefined;
  const end = llama._wi_is_end(token) === 1;
  if (call.decode && !end) decodeAfterReply = () => decode([token], call.position);
  return {
    token,
    bytes: piece(token),
    end,
    ...(chosen ? { logprobs: chosen.map((entry) => ({ ...entry, bytes: piece(entry.token) })) } : {}),
  };
}

async function answer(call: WorkerCall): Promise<unknown> {
  switch (call.call) {
    case "start":
      return start(call);
    case "load":
      return load(call);
    case "tokenize":
      return tokenize(call.text, true, true);
    case "tokenize-pieces":
      return call.pieces.flatMap((piece) => tokenize(piece.text, false, piece.control));
    case "forget":
      return loaded()._wi_forget(call.keep) === 0;
    case "decode":
      return decode(call.tokens, call.first);
    case "sampler":
      return sampler(call);
    case "step":
      return step(call);
    case "free":
      return module?._wi_free();
  }
}

function decodeDeferred(): void {
  const deferred = decodeAfterReply;
  decodeAfterReply = undefined;
  try {
    deferred?.();
  } catch (error) {
    decodeFailure = error;
  }
}

scope.onmessage = (event) => {
  const { id } = event.data;
  const failure = decodeFailure;
  decodeFailure = undefined;
  (failure === undefined ? answer(event.data) : Promise.reject(failure)).then(
    (value) => {
      scope.postMessage({ id, ok: true, value });
      decodeDeferred();
    },
    (error: unknown) =>
      scope.postMessage({ id, ok: false, message: error instanceof Error ? error.message : String(error) }),
  );
};

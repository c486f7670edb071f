/**
 * The dedicated Worker that runs llama.cpp (built to `llamacpp/llamacpp-worker.js`, a classic
 * script: Emscripten's pthreads load the module's script with importScripts). It runs a
 * generation whole (prefill, then sample and decode a token at a time), posting each part to
 * the port it was handed as soon as the token is sampled, before the token is decoded: the
 * reader gets it while the next one computes. Calls run one at a time, in order.
 */
import type { FinishReason, GenerationPart, TokenLogprob } from "../contract.js";
import { EngineError } from "../../core/errors/engine.js";
import { toWireError, type AbortMessage, type PartMessage } from "../part-stream.js";
import { StopScanner } from "../stop-text.js";
import { prefillBatches, sharedPrefix } from "./prefill.js";
import type { EmbedResult, LoadResult, SamplerSettings, WorkerCall, WorkerReply } from "./protocol.js";
import type { LlamaCApi } from "./c-api.js";

/** The Emscripten module of `native/llamacpp/engine.cpp`: its C API, and the file system it reads models from. */
interface LlamaModule extends LlamaCApi {
  FS: {
    mkdir(path: string): void;
    mount(type: unknown, options: { blobs: { name: string; data: Blob }[] }, path: string): void;
    unmount(path: string): void;
  };
  WORKERFS: { stream_ops: { read: BlobRead } };
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
/** The loaded model's context window and prefill batch size. */
let shape = { contextWindow: 0, batchSize: 1 };
/**
 * The ids in llama.cpp's KV cache, in order, and whose they are: the next prompt of the same
 * scope reuses their longest shared prefix; another scope's prompt is prefilled whole.
 */
let cached: number[] = [];
let cachedScope: string | null = null;
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
    llama._wi_load(pointer, call.contextWindow, call.batchSize, call.threads, call.embeddings ? 1 : 0),
  );
  // llama.cpp has read every tensor (it loads without mmap): the read-ahead's 8 MiB can go.
  llama.WORKERFS.stream_ops.read = readingAhead();
  cached = [];
  if (status !== 0) throw failure();
  shape = { contextWindow: llama._wi_info(1), batchSize: llama._wi_info(5) };
  return {
    addsBos: llama._wi_info(2) === 1,
    bos: llama._wi_info(3),
    contextWindow: llama._wi_info(1),
    threads: llama._wi_info(4),
    batchSize: llama._wi_info(5),
    dimensions: call.embeddings ? llama._wi_info(6) : 0,
    sequences: call.embeddings ? llama._wi_info(8) : 0,
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

/**
 * The tokens one embedding decode is filled to, at most (and at most the batch). Every token of
 * a decode is scored against every other, the other inputs' tokens masked out but still read,
 * so many short inputs cost more per token the longer their decode; an input longer than this
 * takes a decode of its own. 128 embedded about 5% faster than filling the batch (512 tokens
 * for MiniLM's shapes) in `npm run bench:embeddings`.
 */
const embeddingDecodeTokens = 128;

/**
 * The inputs in groups that one decode holds: at most `sequences` inputs and `limit` tokens,
 * each input whole (an encoder sees an input in one piece), however long.
 */
function groups(lengths: number[], sequences: number, limit: number): [number, number][] {
  const found: [number, number][] = [];
  let start = 0;
  let tokens = 0;
  lengths.forEach((length, index) => {
    if (index > start && (index - start === sequences || tokens + length > limit)) {
      found.push([start, index]);
      start = index;
      tokens = 0;
    }
    tokens += length;
  });
  if (lengths.length > start) found.push([start, lengths.length]);
  return found;
}

/** The ids of an input to embed, checked against the vocabulary and the batch an input must fit in whole. */
function embeddingIds(input: { text: string } | { tokens: number[] }, index: number, vocabulary: number): number[] {
  const ids = "text" in input ? tokenize(input.text, true, false) : input.tokens;
  if (ids.some((id) => id < 0 || id >= vocabulary))
    throw new EngineError(
      "unsupported",
      `Input ${index} has a token id outside this model's vocabulary (0 to ${vocabulary - 1}).`,
    );
  if (ids.length > shape.batchSize)
    throw new EngineError(
      "context_length",
      `This model's maximum context length is ${shape.batchSize} tokens. However, input ${index} resulted in ${ids.length} tokens in its own vocabulary. Please reduce the length of the input.`,
    );
  return ids;
}

/** Every input embedded, as many to a decode as fit; null when the page set the abort flag. */
async function embed(call: Extract<WorkerCall, { call: "embed" }>): Promise<EmbedResult | null> {
  const llama = loaded();
  const dimensions = llama._wi_info(6);
  const vocabulary = llama._wi_info(0);
  const ids = call.inputs.map((input, index) => embeddingIds(input, index, vocabulary));
  const lengths = ids.map((list) => list.length);
  const vectors: Float32Array[] = [];
  for (const [start, end] of groups(lengths, llama._wi_info(8), Math.min(embeddingDecodeTokens, shape.batchSize))) {
    await nextTask();
    if (flagged(call.abortFlag)) return null;
    const flat = ids.slice(start, end).flat();
    const tokens = memory((flat.length + (end - start) + (end - start) * dimensions) * 4);
    const counts = tokens + flat.length * 4;
    const out = counts + (end - start) * 4;
    llama.HEAP32.set(flat, tokens / 4);
    llama.HEAP32.set(lengths.slice(start, end), counts / 4);
    if (llama._wi_embed(tokens, counts, end - start, out) !== 0) throw failure();
    for (let input = 0; input < end - start; input++)
      vectors.push(llama.HEAPF32.slice(out / 4 + input * dimensions, out / 4 + (input + 1) * dimensions));
  }
  return { vectors, promptTokens: lengths.reduce((sum, length) => sum + length, 0) };
}

function decode(tokens: number[], first: number): void {
  const llama = loaded();
  const pointer = memory(tokens.length * 4);
  llama.HEAP32.set(tokens, pointer / 4);
  if (llama._wi_decode(pointer, tokens.length, first) !== 0) throw failure();
}

function sampler(settings: SamplerSettings): void {
  const llama = loaded();
  const count = settings.bias.length;
  const ids = llama._malloc(Math.max(1, count) * 8);
  try {
    settings.bias.forEach(([token, value], index) => {
      llama.HEAP32[ids / 4 + index] = token;
      llama.HEAPF32[ids / 4 + count + index] = value;
    });
    const status = withText(settings.grammar, (grammar) =>
      llama._wi_sampler(
        settings.temperature,
        settings.topP,
        settings.presencePenalty,
        settings.frequencyPenalty,
        settings.seed >>> 0,
        ids,
        ids + count * 4,
        count,
        grammar,
      ),
    );
    if (status !== 0)
      throw new EngineError("unsupported", `llama.cpp could not follow the request's grammar: ${failure().message}`);
  } finally {
    llama._free(ids);
  }
}

const utf8 = new TextDecoder("utf-8");

/** A token's grammar step passed its time budget (engine.cpp: `wi_sample`). */
function tooSlow(budgetMs: number): EngineError {
  return new EngineError(
    "unsupported",
    `The request's grammar took longer than ${budgetMs} ms to follow for one token, so llama.cpp stopped it and the engine went on to other requests. Its schema or pattern is too ambiguous to follow: make the alternatives of each choice differ from their first characters.`,
  );
}

/**
 * Samples a token; with `alternatives` ≥ 0, also its log probability and the likeliest tokens'.
 * Null when an abort stopped the grammar's step.
 */
function sample(alternatives: number, budgetMs: number): { token: number; logprobs: TokenLogprob[] } | null {
  const llama = loaded();
  const slots = Math.max(0, alternatives) + 1;
  const ids = memory(slots * 8);
  const token = llama._wi_sample(alternatives, ids, ids + slots * 4, budgetMs);
  if (token === -3) return null;
  if (token === -2) throw tooSlow(budgetMs);
  if (token < 0)
    throw new EngineError(
      "unsupported",
      `llama.cpp could not sample under the request's grammar: ${failure().message}`,
    );
  if (alternatives < 0) return { token, logprobs: [] };
  // Read before piece() reuses the scratch memory.
  const ranked = Array.from({ length: slots }, (_, index) => ({
    id: llama.HEAP32[ids / 4 + index]!,
    logprob: llama.HEAPF32[ids / 4 + slots + index]!,
  }));
  const entries = ranked.map(({ id, logprob }) => {
    const bytes = piece(id);
    return { token: utf8.decode(bytes), logprob, bytes: [...bytes] };
  });
  const [chosen, ...rest] = entries;
  return { token, logprobs: chosen ? [{ ...chosen, alternatives: alternatives > 0 ? rest : [] }] : [] };
}

/**
 * One task's wait, so that a message already queued (a reader's abort) is taken between steps:
 * a MessageChannel, since a worker's nested setTimeout waits at least 4 ms.
 */
const turn = new MessageChannel();
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    turn.port2.onmessage = () => resolve();
    turn.port1.postMessage(null);
  });
}

interface Run {
  post: (part: GenerationPart) => void;
  aborted: () => boolean;
}

/** Whether the page set the generation's abort flag (shared memory, where the page is cross-origin isolated). */
function flagged(flag: Int32Array | null): boolean {
  return flag !== null && Atomics.load(flag, 0) !== 0;
}

/** Prefills what the KV cache lacks, a batch at a time; returns how many ids were reused, or null on an abort. */
async function prefill(prompt: number[], scope: string | null, run: Run): Promise<number | null> {
  // The last id is always decoded again: its logits are the first token's distribution.
  const shared = scope === cachedScope ? sharedPrefix(cached, prompt) : 0;
  const reused = Math.min(shared, prompt.length - 1);
  if (loaded()._wi_forget(reused) !== 0) throw failure();
  cached = prompt.slice(0, reused);
  cachedScope = scope;
  for (const [first, end] of prefillBatches(reused, prompt.length, shape.batchSize)) {
    await nextTask();
    if (run.aborted()) return null;
    const tokens = prompt.slice(first, end);
    decode(tokens, first);
    cached.push(...tokens);
  }
  return reused;
}

/**
 * Samples from `position` on, posting the text as it settles; each token is decoded (its
 * logits are the next step's) after it is posted, unless it ends the reply.
 */
async function generateFrom(
  position: number,
  call: Extract<WorkerCall, { call: "generate" }>,
  run: Run,
): Promise<{ reason: FinishReason; produced: number }> {
  const stops = new StopScanner(call.stop);
  const decoder = new TextDecoder("utf-8");
  let produced = 0;
  let reason: FinishReason = "length";
  while (produced < call.maxTokens && position < shape.contextWindow) {
    if (run.aborted()) return { reason: "abort", produced };
    const sampled = sample(call.alternatives, call.tokenBudgetMs);
    if (!sampled) return { reason: "abort", produced };
    const { token, logprobs } = sampled;
    produced++;
    const end = loaded()._wi_is_end(token) === 1;
    const { text, stopped } = end
      ? { text: "", stopped: false }
      : stops.push(decoder.decode(piece(token), { stream: true }));
    if (text || logprobs.length) run.post({ type: "text-delta", text, ...(logprobs.length ? { logprobs } : {}) });
    if (stopped) return { reason: "stop", produced };
    if (end) {
      reason = "stop";
      break;
    }
    if (produced >= call.maxTokens || position + 1 >= shape.contextWindow) break;
    decode([token], position);
    cached.push(token);
    position++;
    await nextTask();
  }
  // What was held back as a possible stop sequence (or a character's first bytes) is text after all.
  const rest = stops.push(decoder.decode()).text + stops.flush();
  if (rest && !run.aborted()) run.post({ type: "text-delta", text: rest });
  return { reason, produced };
}

/** A whole generation onto `call.parts`: its parts, then a finish part, or an error. */
async function generate(call: Extract<WorkerCall, { call: "generate" }>): Promise<void> {
  const port = call.parts;
  let aborted = false;
  port.onmessage = (event: MessageEvent<AbortMessage | null>) => (aborted ||= event.data?.abort === true);
  const run: Run = {
    post: (part) => port.postMessage({ part } satisfies PartMessage),
    aborted: () => aborted || flagged(call.abortFlag),
  };
  // The grammar's step reads the flag between slices of candidates: an abort stops it midway.
  loaded().abortRequested = () => (flagged(call.abortFlag) ? 1 : 0);
  try {
    sampler(call.sampler);
    const reused = await prefill(call.prompt, call.cacheScope, run);
    if (reused === null) {
      run.post({ type: "finish", reason: "abort", usage: { promptTokens: null, completionTokens: 0 } });
      return;
    }
    const { reason, produced } = await generateFrom(call.prompt.length, call, run);
    const usage = { promptTokens: call.prompt.length - reused, cachedPromptTokens: reused, completionTokens: produced };
    run.post({ type: "finish", reason: run.aborted() ? "abort" : reason, usage });
  } catch (error) {
    // A failed step can leave llama.cpp's KV cache unlike our record of it: the next prompt is prefilled whole.
    cached = [];
    port.postMessage({ error: toWireError(error) } satisfies PartMessage);
  } finally {
    delete loaded().abortRequested;
    port.close();
  }
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
    case "generate":
      return generate(call);
    case "embed":
      return embed(call);
    case "free":
      cached = [];
      return module?._wi_free();
  }
}

/** Calls run in order, one at a time: a generation's waits between steps let no other call in. */
let queue: Promise<void> = Promise.resolve();

scope.onmessage = (event) => {
  const { id } = event.data;
  queue = queue.then(() =>
    answer(event.data).then(
      (value) => scope.postMessage({ id, ok: true, value }),
      (error: unknown) =>
        scope.postMessage({ id, ok: false, message: error instanceof Error ? error.message : String(error) }),
    ),
  );
};

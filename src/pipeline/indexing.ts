/**
 * Indexing a vector store's files in the background of the worker: each file is read, its text
 * extracted and chunked (one transaction), then embedded a step at a time (one transaction per
 * step), each step admitted and billed to the key that added the file like any embedding
 * request, at the store's embedding model's price. Progress is in the database, so a worker
 * that restarts resumes at the first chunk not yet embedded. Steps take the engine after every
 * waiting request (`Scheduler`), and files take turns, so no account's indexing holds up
 * another's, or anyone's chat.
 */
import { ApiError, AuthenticationError, RateLimitError } from "../core/errors/api.js";
import { EngineError } from "../core/errors/engine.js";
import type { VectorStoreFileRecord } from "../accounts/database.js";
import { chunkText } from "../retrieval/chunk.js";
import { extractText, UnreadableFile } from "../retrieval/extract.js";
import { embedAdmitted, embeddingAdmission, normalised, textEmbeddingCall } from "./embedding.js";
import { admit } from "./metering.js";
import { placementOf } from "./placement.js";
import type { ServeRequest } from "./request.js";
import type { Services } from "./services.js";

/** A step embeds at most this many chunks, and at most `stepTokens` tokens (one chunk at least). */
const stepChunks = 32;
const stepTokens = 2048;

/** How long a file waits after a step that could not run now (the engine's queue full, say), when nothing says how long. */
const retryMs = 1000;

type LastError = NonNullable<VectorStoreFileRecord["lastError"]>;

/** A failure that ends a file's indexing, as its `last_error` says it. */
function lastErrorOf(error: unknown): LastError {
  if (error instanceof UnreadableFile) return { code: error.code, message: error.message };
  if (error instanceof ApiError || error instanceof EngineError)
    return { code: "server_error", message: error.message };
  return {
    code: "server_error",
    message: `Indexing failed unexpectedly: ${(error as Error)?.message ?? String(error)}`,
  };
}

/** How long to wait before trying again, for a failure a wait may cure; undefined for one it cannot. */
function retryAfterMs(error: unknown): number | undefined {
  if (error instanceof RateLimitError) {
    const seconds = Number(error.headers["retry-after"]);
    return Number.isFinite(seconds) ? seconds * 1000 : undefined;
  }
  if (error instanceof EngineError && (error.kind === "busy" || error.retryAfterSeconds !== undefined))
    return error.retryAfterSeconds === undefined ? retryMs : error.retryAfterSeconds * 1000;
  return undefined;
}

const fileKey = (file: VectorStoreFileRecord) => `${file.storeId}\u0000${file.fileId}`;

export class Indexer {
  readonly #services: Services;
  #running: Promise<void> | undefined;
  #again = false;
  /** A pass found nothing pending, and no file was added here since (`wake`). */
  #idle = false;
  /** Files waiting out a limit, and until when. */
  readonly #waiting = new Map<string, number>();

  constructor(services: Services) {
    this.#services = services;
  }

  /**
   * What every request calls once answered: joins the indexing under way, or looks for pending
   * files once per worker (a restart's leftovers) and not again until a file is added here
   * (`wake`), so a request after the first costs no read of the database.
   */
  resume(): Promise<void> {
    if (this.#running || !this.#idle) return this.wake();
    return Promise.resolve();
  }

  /** Indexes whatever is pending, unless that is under way already; settles once nothing is left that can be done. */
  wake(): Promise<void> {
    this.#idle = false;
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = this.#run().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #run(): Promise<void> {
    await this.#services.ready;
    for (;;) {
      this.#again = false;
      const pending = await this.#services.vectorStores.pendingFiles();
      if (pending.length === 0 && !this.#again) {
        this.#idle = true;
        return;
      }
      const now = this.#services.clock();
      const ready = pending.filter((file) => (this.#waiting.get(fileKey(file)) ?? 0) <= now);
      // Each file takes one step a turn, so every account's files move on together.
      for (const file of ready.sort((a, b) => a.createdAt - b.createdAt)) await this.#step(file);
      if (ready.length === 0 && pending.length > 0) {
        const soonest = Math.min(...pending.map((file) => this.#waiting.get(fileKey(file)) ?? now));
        await new Promise((resolve) => setTimeout(resolve, Math.max(10, soonest - now)));
      }
    }
  }

  /** One step of a file's indexing; a failure no wait can cure fails the file, with its reason. */
  async #step(file: VectorStoreFileRecord): Promise<void> {
    try {
      if (file.chunks === null) await this.#chunk(file);
      else await this.#embed(file);
      this.#waiting.delete(fileKey(file));
    } catch (error) {
      const wait = retryAfterMs(error);
      if (wait !== undefined) this.#waiting.set(fileKey(file), this.#services.clock() + wait);
      else await this.#services.vectorStores.failed(file, lastErrorOf(error));
    }
  }

  /** The store's embedding model, from the catalogue. */
  async #model(file: VectorStoreFileRecord) {
    const store = await this.#services.vectorStores.store(file.accountId, file.storeId);
    const model = store && this.#services.catalogue.get(store.embeddingModel);
    if (!model)
      throw new UnreadableFile(
        "invalid_file",
        `The store's embedding model ${store?.embeddingModel ?? ""} is no longer in the catalogue: add the file to a store of a model it has.`,
      );
    return model;
  }

  async #chunk(file: VectorStoreFileRecord): Promise<void> {
    const model = await this.#model(file);
    const stored = await this.#services.files.content(file.accountId, file.fileId);
    if (!stored)
      throw new UnreadableFile("invalid_file", `The file ${file.fileId} was deleted or expired before it was indexed.`);
    const text = await extractText(stored.content, stored.file.filename);
    const tokenizer = await this.#services.tokenizers.forFamily(model.family);
    const chunks = chunkText(text, tokenizer, file.chunking);
    if (chunks.length === 0) throw new UnreadableFile("invalid_file", `${stored.file.filename} has no text to index.`);
    await this.#services.vectorStores.chunked(file, chunks, model.dimensions ?? 0);
  }

  async #embed(file: VectorStoreFileRecord): Promise<void> {
    const services = this.#services;
    const model = await this.#model(file);
    const key = await services.accounts.activeKey(file.keyId);
    if (!key)
      throw new AuthenticationError(
        "The API key that added this file was revoked before it was indexed: add the file again with an active key.",
      );
    const tokenizer = await services.tokenizers.forFamily(model.family);
    const texts: string[] = [];
    let tokens = 0;
    for (const chunk of await services.vectorStores.unembedded(file, stepChunks)) {
      const count = tokenizer.encodeText(chunk.text).length;
      if (texts.length > 0 && tokens + count > stepTokens) break;
      texts.push(chunk.text);
      tokens += count;
    }
    const call = textEmbeddingCall(model, tokenizer, texts);
    const controller = new AbortController();
    const request: ServeRequest = {
      requestId: services.newId("req_"),
      receivedAt: services.clock(),
      key,
      signal: controller.signal,
      origin: file.origin,
    };
    const placement = await placementOf(services.engine, model);
    const meter = await admit(services, request, model, embeddingAdmission(placement, call));
    const embedded = await embedAdmitted(services, request, placement, call, meter, { priority: "background" });
    await services.vectorStores.embeddedChunks(
      file,
      file.embedded,
      embedded.vectors.map((vector) => normalised(vector)),
      embedded.promptTokens,
    );
  }
}

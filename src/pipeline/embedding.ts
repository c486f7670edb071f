/**
 * Embedding on the one engine: queueing for it as a generation does, running every input, and
 * settling the meter with the tokens the model embedded. Vectors leave as the engine gave them;
 * the endpoint normalises and encodes them.
 */
import { cannotEmbed } from "../core/errors/engine.js";
import type { Engine, EmbeddingRequest, Embeddings } from "../engines/contract.js";
import { nothingUsed, type Meter } from "./metering.js";
import type { Scheduler } from "./scheduler.js";

/** What the engine embedded, with the tokens billed: the engine's own count of each input. */
export async function runEmbedding(
  services: { engine: Engine; scheduler: Scheduler },
  meter: Meter,
  request: EmbeddingRequest,
  signal: AbortSignal,
): Promise<Embeddings> {
  const { engine, scheduler } = services;
  const inputs = request.inputs.length;
  if (!engine.embed) {
    await meter.settle("failed", nothingUsed);
    throw cannotEmbed(engine.name, request.model.id);
  }
  let release: () => void;
  try {
    release = await scheduler.acquire(signal);
  } catch (error) {
    await meter.settle(signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
  }
  try {
    const embedded = await engine.embed(request, signal);
    if (embedded.vectors.length !== inputs)
      throw new Error(`the ${engine.name} engine gave ${embedded.vectors.length} vectors for ${inputs} inputs`);
    meter.firstToken();
    settleBehind(meter, embedded.promptTokens);
    return embedded;
  } catch (error) {
    // Nothing was delivered: an embedding is all or nothing, so a failed or abandoned one costs nothing.
    await meter.settle(signal.aborted ? "aborted" : "failed", nothingUsed);
    throw error;
  } finally {
    release();
  }
}

/**
 * Settles a completed embedding without holding its reply for the commit: a search box's query
 * waits for the engine, not for a second transaction. Safe because the settlement's transaction
 * is created before the reply leaves (`Accounts.settle` opens it on its first step), and IndexedDB
 * runs transactions on the same stores in the order they were created, in every tab: whatever a
 * client reads or admits after the reply sees the charge. A settlement that fails keeps its
 * reservation (never an overspend), and a worker that dies first leaves it to the orphan sweep.
 */
function settleBehind(meter: Meter, promptTokens: number): void {
  meter
    .settle("completed", { promptTokens, completionTokens: 0 })
    .catch((error: unknown) => console.error("[webgpu-inference] settling an embedding failed", error));
}

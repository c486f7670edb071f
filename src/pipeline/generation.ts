/**
 * Running a plan on the one engine: queueing for it, running each (prompt, choice) in turn, and
 * totalling the usage the meter settles. Wire formatting is left to the endpoint.
 */
import type { LocalEngine, ModelEntry } from "../catalogue/entry.js";
import type {
  Engine,
  GenerationInput,
  GenerationPart,
  GenerationRequest,
  OutputConstraint,
  SamplingOptions,
  TokenUsage,
} from "../engines/contract.js";
import type { Meter } from "./metering.js";
import type { Scheduler } from "./scheduler.js";

export interface GenerationPlan {
  model: ModelEntry;
  /** One entry per prompt; each is generated `choicesPerPrompt` times. */
  prompts: { input: GenerationInput; promptTokens: number }[];
  choicesPerPrompt: number;
  sampling: SamplingOptions;
  constraint?: OutputConstraint;
  /** The engine chosen for this request (src/pipeline/placement.ts), run without choosing again. */
  engine?: LocalEngine;
  /** Whose cached prefixes the engine may reuse: the account's own (see `GenerationRequest.cacheScope`). */
  cacheScope?: string;
}

export interface ChoicePart {
  choice: number;
  part: GenerationPart;
}

export interface UsageTotals {
  promptTokens: number;
  completionTokens: number;
  /** Of `promptTokens`, those the engine reused from its cache rather than prefilled. */
  cachedTokens?: number;
}

/**
 * Adds one generated prompt's usage to `totals`. The prompt is billed whole, the way the hosted
 * API bills a cached prefix: what the engine saw (prefilled, plus what it says it reused) or what
 * we counted, whichever is more (llama.cpp puts a BOS token before a raw prompt). Of that, what
 * the engine did not prefill is reported as cached: the prefix it reused from its KV cache, and
 * any tokens it never saw, so an engine that saw fewer tokens than were counted shows (a first
 * turn with cached tokens).
 */
function addPromptUsage(totals: UsageTotals, counted: number, usage: TokenUsage): void {
  const prefilled = usage.promptTokens;
  if (prefilled === null) {
    totals.promptTokens += counted;
    return;
  }
  const billed = Math.max(prefilled + (usage.cachedPromptTokens ?? 0), counted);
  totals.promptTokens += billed;
  if (billed > prefilled) totals.cachedTokens = (totals.cachedTokens ?? 0) + billed - prefilled;
}

/** A running generation: its parts, in order, and the usage once they are drained. */
export interface Generation {
  parts: AsyncGenerator<ChoicePart>;
  usage(): UsageTotals;
}

/** Prompt tokens plus the most the plan may generate: what is admitted against limits and reserved. */
export function admittedTokens(plan: GenerationPlan): { promptTokens: number; maxCompletionTokens: number } {
  return {
    promptTokens: plan.prompts.reduce((sum, prompt) => sum + prompt.promptTokens, 0),
    maxCompletionTokens: plan.prompts.length * plan.choicesPerPrompt * plan.sampling.maxTokens,
  };
}

type Status = "completed" | "aborted" | "failed";

/**
 * Runs an admitted plan on the engine, holding the engine until the last part or until the caller
 * stops iterating, and settles `meter` when it ends: `completed`, `aborted` (the client left; the
 * tokens produced are charged) or `failed` (the tokens delivered before the failure are charged).
 * Waiting for a turn happens before any byte is sent, so a full queue is a 503 and not a broken
 * stream.
 */
export async function startGeneration(
  services: { engine: Engine; scheduler: Scheduler },
  meter: Meter,
  plan: GenerationPlan,
  signal: AbortSignal,
): Promise<Generation> {
  const totals: UsageTotals = { promptTokens: 0, completionTokens: 0 };
  let release: () => void;
  try {
    release = await services.scheduler.acquire(signal);
  } catch (error) {
    await meter.settle(signal.aborted ? "aborted" : "failed", totals);
    throw error;
  }
  async function* run(): AsyncGenerator<ChoicePart> {
    const tally = new Tally(totals);
    let status: Status = "completed";
    try {
      // One loop, not a generator delegating to another: each part costs one hop fewer.
      let choice = 0;
      for (const prompt of plan.prompts) {
        for (let copy = 0; copy < plan.choicesPerPrompt; copy++, choice++) {
          for await (const part of services.engine.generate(requestFor(plan, prompt.input, copy), signal)) {
            if (part.type !== "finish") meter.firstToken();
            tally.add(prompt, copy, part);
            yield { choice, part };
          }
          if (signal.aborted) return;
        }
      }
    } catch (error) {
      // A failure once the client has gone (an engine stopped to end its generation) is its abort.
      status = signal.aborted ? "aborted" : "failed";
      tally.billUndelivered();
      // An engine's failure reaches the client through the one translation, `toApiError`.
      throw error;
    } finally {
      if (status === "completed" && signal.aborted) status = "aborted";
      release();
      await meter.settle(status, totals);
    }
  }
  return { parts: run(), usage: () => ({ ...totals }) };
}

/** The engine's request for one of the plan's prompts, for its `copy`th choice. */
function requestFor(plan: GenerationPlan, input: GenerationInput, copy: number): GenerationRequest {
  const seed = choiceSeed(plan.sampling.seed, copy);
  return {
    model: plan.model,
    input,
    sampling: seed === undefined ? plan.sampling : { ...plan.sampling, seed },
    ...(plan.constraint ? { constraint: plan.constraint } : {}),
    ...(plan.engine ? { engine: plan.engine } : {}),
    ...(plan.cacheScope !== undefined ? { cacheScope: plan.cacheScope } : {}),
  };
}

/** The usage totals as parts arrive, and what the choice under way has delivered but not yet billed. */
class Tally {
  readonly #totals: UsageTotals;
  /** The choice under way's prompt count when it is the prompt's first, and one token per delta. */
  #unbilled = { promptTokens: 0, completionTokens: 0 };

  constructor(totals: UsageTotals) {
    this.#totals = totals;
  }

  add(prompt: { promptTokens: number }, copy: number, part: GenerationPart): void {
    if (part.type === "finish") {
      // The prompt is billed once however many choices it has, as the hosted API does.
      if (copy === 0) addPromptUsage(this.#totals, prompt.promptTokens, part.usage);
      this.#totals.completionTokens += part.usage.completionTokens;
      this.#unbilled = { promptTokens: 0, completionTokens: 0 };
    } else {
      // Engines send one delta per token at most (a token that completes no character sends none).
      this.#unbilled = {
        promptTokens: copy === 0 ? prompt.promptTokens : 0,
        completionTokens: this.#unbilled.completionTokens + 1,
      };
    }
  }

  /** Tokens delivered before a failure are billed, as an abort's are. */
  billUndelivered(): void {
    this.#totals.promptTokens += this.#unbilled.promptTokens;
    this.#totals.completionTokens += this.#unbilled.completionTokens;
  }
}

/**
 * The seed of a prompt's `copy`th choice: the client's for the first, and for each further one a
 * seed mixed from it and the copy (32 bits, what llama.cpp keeps). Each choice is sampled afresh,
 * so with one seed for all, `n` seeded choices would be `n` copies of one reply; the hosted
 * API's differ, and a seeded request stays reproducible.
 */
function choiceSeed(seed: number | undefined, copy: number): number | undefined {
  if (seed === undefined || copy === 0) return seed;
  // MurmurHash3's finaliser over the seed's low 32 bits and the copy (golden-ratio spaced).
  let mixed = (seed ^ Math.imul(copy, 0x9e3779b9)) >>> 0;
  mixed = Math.imul(mixed ^ (mixed >>> 16), 0x85ebca6b);
  mixed = Math.imul(mixed ^ (mixed >>> 13), 0xc2b2ae35);
  return (mixed ^ (mixed >>> 16)) >>> 0;
}

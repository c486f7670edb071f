/**
 * The `deterministic` engine: for apps' CI, which has no GPU. Text is a pure function of the
 * rendered prompt and the seed, streamed one real token at a time, and counted with a real
 * tokenizer of the model's family. It honours `maxTokens`, `stop`, aborts, JSON mode, JSON
 * Schemas and tool calls (in the family's own syntax), so every layer above it behaves exactly
 * as it does over WebLLM.
 */
import { StopScanner } from "../stop-text.js";
import { TokenText } from "../token-text.js";
import type { DeviceFeatures } from "../../catalogue/builds.js";
import type { ModelEntry } from "../../catalogue/entry.js";
import { SampleBudget, sampleSchema } from "../../structured/sample.js";
import type { JsonSchema } from "../../structured/schema.js";
import { toolSyntax } from "../../prompt/templates.js";
import type { Tokenizer, Tokenizers } from "../../prompt/tokenizer.js";
import { EngineError } from "../../core/errors/engine.js";
import { rawPromptPrefixTokens } from "../../catalogue/families.js";
import { defaultDimensions, hashedBagOfTokens } from "./embedding.js";
import type {
  EmbeddingRequest,
  Embeddings,
  Engine,
  FinishReason,
  GenerationInput,
  GenerationPart,
  GenerationRequest,
  ModelStatus,
  TokenLogprob,
} from "../contract.js";

export interface DeterministicEngineOptions {
  tokenizers: Tokenizers;
  /** Pause between tokens, so streaming and aborts can be seen; 0 for none. */
  tokenDelayMs?: number;
}

/**
 * More characters than a token of JSON ever spells on average: a schema's instance written to
 * this many per token allowed holds every token the reply may have.
 */
const charactersPerToken = 16;

const lexicon = (
  "the a local model answers every request on this device without any server while keys limits and ledgers " +
  "keep count of tokens streamed from a browser tab through one shared worker quietly offline fast private " +
  "small engine careful plain simple clear useful steady reply text words sentence offline cache graph"
).split(" ");

/** FNV-1a, 32-bit: a stable hash of the prompt to seed the generator. */
function hash(text: string): number {
  let value = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    value ^= text.charCodeAt(index);
    value = Math.imul(value, 0x01000193);
  }
  return value >>> 0;
}

/** mulberry32: small, fast, and the same everywhere. */
export function seededRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function composeProse(random: () => number): string {
  const sentences: string[] = [];
  const count = 2 + Math.floor(random() * 3);
  for (let sentence = 0; sentence < count; sentence++) {
    const words: string[] = [];
    const length = 5 + Math.floor(random() * 8);
    for (let word = 0; word < length; word++) words.push(lexicon[Math.floor(random() * lexicon.length)] ?? "word");
    const text = words.join(" ");
    sentences.push(`${text.charAt(0).toUpperCase()}${text.slice(1)}.`);
  }
  return sentences.join(" ");
}

function sleep(milliseconds: number, signal: AbortSignal): Promise<void> {
  if (milliseconds <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, milliseconds);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

const utf8 = new TextEncoder();

/**
 * A made-up but consistent distribution for `logprobs`: the emitted token is the likeliest, with
 * a probability in [0.5, 0.9) drawn from its id and position; the alternatives share the rest,
 * each half as likely as the one before, so the probabilities never sum past 1.
 */
function tokenLogprob(tokenizer: Tokenizer, id: number, position: number, alternatives: number): TokenLogprob {
  const probability = 0.5 + 0.4 * ((hash(`${id}:${position}`) % 1000) / 1000);
  const entry = (tokenId: number, chance: number) => {
    const token = tokenizer.decode([tokenId]);
    return { token, logprob: Math.log(chance), bytes: [...utf8.encode(token)] };
  };
  const emitted = entry(id, probability);
  const others = Array.from({ length: Math.max(0, alternatives - 1) }, (_, rank) =>
    entry((id + rank + 1) % tokenizer.size, (1 - probability) / 2 ** (rank + 1)),
  );
  return { ...emitted, alternatives: alternatives > 0 ? [emitted, ...others] : [] };
}

export class DeterministicEngine implements Engine {
  readonly name = "deterministic";
  readonly #tokenizers: DeterministicEngineOptions["tokenizers"];
  readonly #tokenDelayMs: number;

  constructor(options: DeterministicEngineOptions) {
    this.#tokenizers = options.tokenizers;
    this.#tokenDelayMs = options.tokenDelayMs ?? 10;
  }

  async device(): Promise<DeviceFeatures> {
    return { webgpu: false, features: new Set() };
  }

  async status(model: ModelEntry): Promise<ModelStatus> {
    void model;
    return { downloaded: true, loaded: true, runnable: { ok: true, reason: null }, build: null };
  }

  async load(model: ModelEntry): Promise<void> {
    await this.#tokenizers.forFamily(model.family);
  }

  /**
   * The whole reply this engine gives to `request`, before `maxTokens` and `stop` are applied.
   * With tools it calls one (two when parallel calls are allowed and required), with arguments
   * drawn from the tool's schema; under `auto` it answers in text once a tool result is in.
   */
  compose(request: GenerationRequest, prompt: string, budget: SampleBudget): string {
    const random = seededRandom(hash(`${request.sampling.seed ?? 0}\u0000${prompt}`));
    const prose = composeProse(random);
    const constraint = request.constraint;
    switch (constraint?.kind) {
      case undefined:
        return prose;
      case "json":
        return jsonReply(constraint.schema, prose, random, budget);
      case "grammar":
        throw new EngineError("unsupported", "The deterministic engine cannot follow an arbitrary grammar.");
      case "tools": {
        const { tools, choice, text } = constraint;
        if (choice === "auto" && constraint.afterToolResult)
          return text ? jsonReply(text.schema, prose, random, budget) : prose;
        const first =
          typeof choice === "object"
            ? tools.find((tool) => tool.name === choice.name)
            : tools[Math.floor(random() * tools.length)];
        if (!first) throw new EngineError("unsupported", "tool_choice names no given tool.");
        const chosen =
          constraint.parallel && choice === "required" && tools.length > 1
            ? [first, tools.find((tool) => tool !== first)!]
            : [first];
        return toolSyntax[request.model.family].write(
          chosen.map((tool) => ({
            name: tool.name,
            arguments: sampleSchema(tool.parameters as JsonSchema, random, budget),
          })),
        );
      }
    }
  }

  /**
   * Each input's hashed bag of tokens (./embedding.ts). Text is counted as the model's tokenizer
   * embeds it: text as text, after the family's BOS where it has one, as llama-server counts.
   */
  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    const tokenizer = await this.#tokenizers.forFamily(request.model.family);
    signal.throwIfAborted();
    const dimensions = request.model.dimensions ?? defaultDimensions;
    const vectors: Float32Array[] = [];
    let promptTokens = 0;
    for (const input of request.inputs) {
      const ids = input.kind === "text" ? tokenizer.encodeText(input.text) : input.tokens;
      vectors.push(hashedBagOfTokens(ids, dimensions));
      promptTokens += ids.length + (input.kind === "text" ? rawPromptPrefixTokens[request.model.family] : 0);
    }
    return { vectors, promptTokens };
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationPart> {
    // logit_bias is accepted and not applied: the reply is composed, not sampled from logits.
    const tokenizer = await this.#tokenizers.forFamily(request.model.family);
    const { prompt, promptTokens } = promptOf(request.input, tokenizer);
    const { maxTokens, stop, logprobs: alternatives } = request.sampling;
    const { ids, cut } = this.#reply(request, prompt, tokenizer);
    let pending: TokenLogprob[] = [];
    /** The log probabilities of the tokens a delta completes, when asked for. */
    const flush = () => {
      const logprobs = pending;
      pending = [];
      return alternatives === undefined ? {} : { logprobs };
    };
    const text = new TokenText(tokenizer);
    const scanner = new StopScanner(stop);
    let produced = 0;
    let stopped = false;
    let reason: FinishReason = "stop";
    while (!stopped) {
      if (!signal.aborted && produced < Math.min(ids.length, maxTokens)) await sleep(this.#tokenDelayMs, signal);
      if (signal.aborted || produced >= Math.min(ids.length, maxTokens)) {
        reason = signal.aborted ? "abort" : produced < ids.length || cut ? "length" : "stop";
        break;
      }
      const id = ids[produced++]!;
      if (alternatives !== undefined) pending.push(tokenLogprob(tokenizer, id, produced, alternatives));
      const piece = scanner.push(text.push(id));
      stopped = piece.stopped;
      if (piece.text) yield { type: "text-delta", text: piece.text, ...flush() };
    }
    if (reason !== "abort" && !stopped) {
      // A character cut short, and what was held back as a possible stop prefix.
      const last = scanner.push(text.finish());
      if (last.stopped) reason = "stop";
      const rest = last.stopped ? last.text : last.text + scanner.flush();
      if (rest) yield { type: "text-delta", text: rest, ...flush() };
    }
    yield { type: "finish", reason, usage: { promptTokens, completionTokens: produced } };
  }

  /**
   * The reply's tokens. A schema's instance is written to about `charactersPerToken` characters
   * a token allowed; one cut there (`cut`) ends as a model would that ran out of tokens.
   */
  #reply(request: GenerationRequest, prompt: string, tokenizer: Tokenizer): { ids: number[]; cut: boolean } {
    const budget = new SampleBudget(request.sampling.maxTokens * charactersPerToken + 1024);
    const ids = tokenizer.encode(this.compose(request, prompt, budget));
    return { ids, cut: budget.cut };
  }
}

/** A JSON reply: an instance of `schema`, or, for JSON mode without one, an object holding the prose. */
function jsonReply(schema: string | undefined, prose: string, random: () => number, budget: SampleBudget): string {
  return schema === undefined
    ? JSON.stringify({ reply: prose, confidence: Math.round(random() * 100) / 100 })
    : JSON.stringify(sampleSchema(JSON.parse(schema) as JsonSchema, random, budget));
}

/** The prompt's text, and its count: our rendering's ids where the request has them (a message's text is text), else the raw prompt's. */
function promptOf(input: GenerationInput, tokenizer: Tokenizer): { prompt: string; promptTokens: number } {
  const prompt = input.kind === "chat" ? input.segments.map((segment) => segment.text).join("") : input.prompt;
  return { prompt, promptTokens: input.tokens?.length ?? tokenizer.encode(prompt).length };
}

/**
 * A streamed answer from an upstream: each event parsed whatever its framing, given our model id,
 * and passed on as a chunk for the one SSE writer (src/http/sse.ts); the usage sent once, last, as
 * OpenAI does, and only when the client asked. What was streamed is billed however it ends.
 */
import { ServiceUnavailableError } from "../../core/errors/api.js";
import type { Upstream } from "../../catalogue/entry.js";
import { maxNesting, nestsTooDeep } from "../../core/wire/nesting.js";
import type { LedgerEntry } from "../../accounts/database.js";
import { upstreamChunkSchema, type UpstreamChoice, type UpstreamUsage } from "../../core/wire/upstream.js";
import type { Meter, Usage } from "../metering.js";
import type { Answering } from "./failover.js";
import type { ForwardPlan } from "./plan.js";
import { readSse } from "./read-sse.js";
import { maxReplyBytes } from "./whole.js";
import {
  asLegacyChoice,
  billed,
  choicesPerCall,
  echoOf,
  producedText,
  sumUsage,
  wireUsageOf,
  withCallIndexes,
  withOpenAiDefaults,
  withRoles,
} from "./shape.js";

type ChunkHead = { id?: string; object?: string; created?: number; system_fingerprint?: string | null };

/** What one upstream stream yields: its chunks, then its usage (null when it sent none). */
type StreamEvent = { chunk: ChunkHead } | { usage: UpstreamUsage | null };

/**
 * Per stream: each choice's text so far (for counting and offsets), the choices whose first chunk
 * was sent, and each choice's tool calls begun (for the indexes an upstream leaves out).
 */
interface StreamState {
  produced: string[];
  /** The characters of text in `produced`, all choices together. */
  characters: number;
  started: Set<number>;
  calls: Map<number, number>;
}

/**
 * The text a stream may carry, all choices together, in characters: as much as a whole reply may
 * be, far past any window. An upstream that streams on past it has ignored `max_tokens`, and one
 * that never stops would otherwise fill the worker's memory.
 */
const maxStreamedCharacters = maxReplyBytes;

/** The chunks to send, the usage chunk last when asked for; the meter settles when the stream ends. */
export async function* streamedAnswer(
  { upstream, responses }: Answering,
  plan: ForwardPlan,
  meter: Meter,
  signal: AbortSignal,
): AsyncGenerator<unknown> {
  const state: StreamState = { produced: [], characters: 0, started: new Set(), calls: new Map() };
  const perPrompt = typeof plan.body.n === "number" ? plan.body.n : 1;
  let status: LedgerEntry["status"] = "failed";
  let usage: UpstreamUsage | null = null;
  /** The bill of a stream that completed: counted once, for its usage chunk and its settlement. */
  let completed: Usage | null = null;
  let last: ChunkHead = {};
  try {
    let prompt = 0;
    for await (const response of responses) {
      for await (const event of eventsOf(response, upstream, prompt * perPrompt, plan, meter, state)) {
        if ("usage" in event) usage = prompt === 0 ? event.usage : sumUsage(usage, event.usage);
        else yield (last = event.chunk);
      }
      prompt++;
    }
    status = "completed";
    completed = billed(plan, usage, state.produced);
    if (plan.includeUsage) {
      yield {
        id: last.id,
        object: last.object,
        created: last.created,
        model: plan.model.id,
        system_fingerprint: last.system_fingerprint ?? null,
        choices: [],
        usage: wireUsageOf(completed, plan),
      };
    }
  } finally {
    if (signal.aborted) status = "aborted";
    // An upstream that broke mid-stream is charged what it delivered (counted here), as a failed local generation is.
    const delivered = state.produced.some((text) => text);
    const bill =
      status === "completed" && completed
        ? completed
        : status === "failed" && !delivered
          ? { promptTokens: 0, completionTokens: 0 }
          : billed(plan, null, state.produced);
    await meter.settle(status, { ...bill, upstream: upstream.name });
  }
}

/** One upstream stream's chunks, its choices indexed from `offset`, then its usage. */
async function* eventsOf(
  response: Response,
  upstream: Upstream,
  offset: number,
  plan: ForwardPlan,
  meter: Meter,
  state: StreamState,
): AsyncGenerator<StreamEvent> {
  let usage: UpstreamUsage | null = null;
  const perCall = choicesPerCall(plan);
  for await (const data of readSse(response.body!, { sender: upstream.name })) {
    if (data.trim() === "[DONE]") break;
    const parsed = chunkOf(data, upstream);
    // Only the choices asked for: an index past `n` is an upstream's extra, not the client's answer.
    const asked = parsed.choices.filter((choice) => isAsked(choice.index ?? 0, perCall));
    const chunk = { ...parsed, choices: asked.map((choice) => ({ ...choice, index: offset + (choice.index ?? 0) })) };
    if (chunk.usage) usage = chunk.usage;
    // Legacy choices are re-written before their text is added: the offsets count the text before.
    const { usage: _usage, ...rest } = chunk;
    const choices =
      plan.endpoint === "chat/completions"
        ? withRoles(withCallIndexes(rest.choices, state.calls), state.started)
        : legacyChoices(rest.choices, plan, state);
    for (const choice of chunk.choices) {
      const text = producedText(choice);
      if (!text) continue;
      meter.firstToken();
      state.produced[choice.index] = (state.produced[choice.index] ?? "") + text;
      state.characters += text.length;
    }
    if (state.characters > maxStreamedCharacters)
      throw new ServiceUnavailableError(
        `${upstream.name} streamed over ${maxStreamedCharacters} characters of text, far more than any completion: the stream was stopped`,
        { code: "upstream_invalid_response" },
      );
    // Usage is sent once, in a last chunk of its own, as OpenAI does; some servers put it on
    // a choice chunk instead, or send it unasked.
    if (chunk.choices.length === 0) continue;
    yield {
      chunk: {
        ...withOpenAiDefaults({ ...rest, choices }, plan.model.id),
        ...(plan.includeUsage ? { usage: null } : {}),
      },
    };
  }
  yield { usage };
}

function isAsked(index: number, perCall: number): boolean {
  return Number.isInteger(index) && index >= 0 && index < perCall;
}

/** A legacy chunk's choices as OpenAI sends them: the echoed prompt on each choice's first chunk, logprobs in the legacy form. */
function legacyChoices(choices: UpstreamChoice[], plan: ForwardPlan, state: StreamState): UpstreamChoice[] {
  return choices.map((choice) => {
    const index = choice.index ?? 0;
    const prompt = echoOf(plan, index);
    const first = !state.started.has(index);
    state.started.add(index);
    // The client's text so far: the echoed prompt (sent on the first chunk), then what streamed.
    const before = (first ? 0 : prompt.length) + (state.produced[index]?.length ?? 0);
    return asLegacyChoice(choice, first ? prompt : "", before);
  });
}

/** An event as a chunk; one that is not a chunk fails the stream (503 in its body), as one that is not JSON does. */
function chunkOf(data: string, upstream: Upstream) {
  const parsed = upstreamChunkSchema.safeParse(eventJson(data, upstream));
  if (parsed.success) return parsed.data;
  throw new ServiceUnavailableError(
    `${upstream.name} sent an event that is not a completion chunk: ${parsed.error.issues[0]?.message ?? "unknown shape"}`,
    { code: "upstream_invalid_response" },
  );
}

/** An event's JSON; an event that is not JSON, or that reports an error, fails the stream (503 in its body). */
function eventJson(data: string, upstream: Upstream): unknown {
  if (nestsTooDeep(data))
    throw new ServiceUnavailableError(
      `${upstream.name} sent an event that nests deeper than ${maxNesting} levels, which no chunk does`,
      { code: "upstream_invalid_response" },
    );
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    throw new ServiceUnavailableError(`${upstream.name} sent an event that is not JSON: ${data.slice(0, 200)}`, {
      code: "upstream_invalid_response",
    });
  }
  const failure = (json as { error?: { message?: unknown } | string } | null)?.error;
  if (failure)
    throw new ServiceUnavailableError(
      `${upstream.name} failed mid-stream: ${typeof failure === "string" ? failure : typeof failure.message === "string" ? failure.message : "no reason given"}`,
      { code: "upstream_error" },
    );
  return json;
}

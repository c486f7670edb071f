/**
 * Embeddings from an upstream: the same failover, credentials and bounds as a completion
 * (failover.ts), the vectors read as floats or base64, checked against the catalogue's size, and
 * billed with the upstream's count of the tokens it embedded (ours where it gives none).
 */
import { ServiceUnavailableError } from "../../core/errors/api.js";
import { floatsOfBase64, upstreamEmbeddingsSchema } from "../../core/wire/embeddings.js";
import { maxNesting, nestsTooDeep } from "../../core/wire/nesting.js";
import type { Upstream } from "../../catalogue/entry.js";
import type { Accounts } from "../../accounts/accounts.js";
import { nothingUsed, type Meter } from "../metering.js";
import { readBounded } from "../read-bounded.js";
import type { ServeRequest } from "../request.js";
import { firstAnswering } from "./failover.js";
import type { UpstreamCall } from "./plan.js";
import { maxReplyBytes } from "./whole.js";

/** The vectors an upstream embedded, one per input in input order, the upstream that did, and the tokens as billed. */
export interface ForwardedEmbeddings {
  vectors: Float32Array[];
  upstream: Upstream;
  promptTokens: number;
}

function invalid(upstream: Upstream, what: string): ServiceUnavailableError {
  return new ServiceUnavailableError(`${upstream.name} sent a reply that is not an embedding list: ${what}`, {
    code: "upstream_invalid_response",
  });
}

function base64Vector(upstream: Upstream, text: string): Float32Array {
  try {
    return floatsOfBase64(text);
  } catch (error) {
    throw invalid(upstream, `a base64 vector that does not decode (${(error as Error).message})`);
  }
}

/** The upstream's vectors, in input order, each of the model's size, and its count of the tokens, where it gives one. */
function readEmbeddings(
  upstream: Upstream,
  text: string,
  inputs: number,
  dimensions: number | undefined,
): { vectors: Float32Array[]; promptTokens: number | undefined } {
  if (nestsTooDeep(text)) throw invalid(upstream, `it nests deeper than ${maxNesting} levels`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw invalid(upstream, `not JSON (${(error as Error).message})`);
  }
  const parsed = upstreamEmbeddingsSchema.safeParse(json);
  if (!parsed.success) throw invalid(upstream, parsed.error.issues[0]?.message ?? "unknown shape");
  const { data } = parsed.data;
  if (data.length !== inputs) throw invalid(upstream, `${data.length} vectors for ${inputs} inputs`);
  const vectors: Float32Array[] = new Array<Float32Array>(inputs);
  data.forEach((item, position) => {
    const index = item.index ?? position;
    if (index >= inputs || vectors[index]) throw invalid(upstream, `index ${index} is out of place`);
    const vector =
      typeof item.embedding === "string" ? base64Vector(upstream, item.embedding) : Float32Array.from(item.embedding);
    if (dimensions !== undefined && vector.length !== dimensions)
      throw invalid(upstream, `a vector of ${vector.length} dimensions, where the catalogue says ${dimensions}`);
    vectors[index] = vector;
  });
  return { vectors, promptTokens: parsed.data.usage?.prompt_tokens };
}

/** Forwards an admitted embedding request; the meter is settled either way. */
export async function forwardEmbeddings(
  services: { accounts: Accounts; fetch: typeof fetch },
  request: ServeRequest,
  plan: UpstreamCall & { inputs: number; promptTokens: number },
  meter: Meter,
): Promise<ForwardedEmbeddings> {
  let upstream: Upstream | undefined;
  try {
    const answering = await firstAnswering(services, request, plan);
    upstream = answering.upstream;
    const first = await answering.responses.next();
    const { text, cut } = await readBounded(first.done ? null : first.value.body, maxReplyBytes);
    if (cut) throw invalid(upstream, `over ${maxReplyBytes} bytes`);
    const { vectors, promptTokens } = readEmbeddings(upstream, text, plan.inputs, plan.model.dimensions);
    const billed = promptTokens ?? plan.promptTokens;
    await meter.settle("completed", {
      promptTokens: billed,
      completionTokens: 0,
      upstream: upstream.name,
      ...(promptTokens === undefined ? { estimated: true } : {}),
    });
    return { vectors, upstream, promptTokens: billed };
  } catch (error) {
    await meter.settle(request.signal.aborted ? "aborted" : "failed", {
      ...nothingUsed,
      ...(upstream ? { upstream: upstream.name } : {}),
    });
    throw error;
  }
}

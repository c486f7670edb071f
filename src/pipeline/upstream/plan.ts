import type { ModelEntry } from "../../catalogue/entry.js";
import type { PlacementDecision } from "../placement.js";

/** A request to forward: the client's validated body, and what was counted and admitted for it. */
export interface ForwardPlan {
  model: ModelEntry;
  decision: PlacementDecision;
  endpoint: "chat/completions" | "completions" | "embeddings";
  /** The client's request as validated; forwarded with the upstream's model name. */
  body: Record<string, unknown>;
  /**
   * A legacy completion's several prompts: sent one call per prompt to the same upstream (Ollama
   * takes one prompt only, llama-server answers several as an array), the choices re-indexed in
   * prompt order and the usages summed into the request's one bill.
   */
  prompts?: (string | number[])[];
  /**
   * A legacy completion's `echo`, done here for every upstream (llama-server and Ollama ignore
   * it): each prompt, in order, put before the text of its choices. The upstream is not asked.
   */
  echo?: string[];
  stream: boolean;
  includeUsage: boolean;
  /** Counted here with the family tokenizer: what is admitted, and the estimate's prompt. */
  promptTokens: number;
  maxCompletionTokens: number;
  countTokens(text: string): number;
}

/** What one call to an upstream needs of a plan: where it goes and what it sends. */
export type UpstreamCall = Pick<
  ForwardPlan,
  "model" | "decision" | "endpoint" | "body" | "stream" | "prompts" | "echo"
>;

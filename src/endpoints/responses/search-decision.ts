/**
 * Whether the model searches, when `tool_choice` leaves it the choice (`auto`, the default): it
 * is offered `file_search` as a function taking the queries it writes, in its family's own tool
 * syntax, and calls it or starts to answer. That first pass is a chat request of its own, billed
 * as one (a ledger entry at the chat model's price), bounded to `decisionTokens`; the answer is
 * a second. Its usage is the response's too, and its output tokens come out of
 * `max_output_tokens`.
 */
import type { ChatCompletion } from "../../core/wire/chat-completion.js";
import type { ResponseRequest } from "../../core/wire/responses-request.js";
import type { Usage } from "../../core/wire/shared.js";
import type { RequestContext } from "../../http/context.js";
import { serveChat } from "../chat/chat.js";
import type { EndpointDependencies } from "../dependencies.js";
import { chatRequestOf, type ConversationItem } from "./input.js";

/** The most tokens the first pass may take: a call with a few queries, or the start of an answer. */
const decisionTokens = 128;

/** The most queries a call is searched for, and the most characters each keeps. */
const queryLimits = { count: 3, characters: 1_000 };

const searchFunctionName = "file_search";

/** `file_search` as the model is offered it: a function of the queries it writes. */
const searchFunction = {
  type: "function" as const,
  name: searchFunctionName,
  description:
    "Search the user's files for passages that answer their request. Call it whenever the answer may be in their files; answer directly only for greetings, small talk, or what this conversation already says.",
  parameters: {
    type: "object",
    properties: {
      queries: {
        type: "array",
        description: "What to search for: the user's question as a search query, and other phrasings of it.",
        items: { type: "string" },
      },
    },
    required: ["queries"],
    additionalProperties: false,
  },
  strict: true,
};

/** What the model decided: the queries it searches for (none: it answers without), and what deciding used. */
export interface SearchDecision {
  queries: string[] | null;
  usage: Usage;
}

/** The queries of a `file_search` call's arguments: its strings, trimmed and bounded, blanks dropped. */
function queriesOf(argumentsJson: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(argumentsJson);
  } catch {
    return [];
  }
  const queries = (parsed as { queries?: unknown } | null)?.queries;
  if (!Array.isArray(queries)) return [];
  return queries
    .filter((query): query is string => typeof query === "string")
    .map((query) => query.trim().slice(0, queryLimits.characters))
    .filter(Boolean)
    .slice(0, queryLimits.count);
}

/** The first pass's chat request: the conversation, the search function alone, under `auto`. */
function decisionRequest(request: ResponseRequest, conversation: readonly ConversationItem[]) {
  const asked: ResponseRequest = {
    model: request.model,
    input: [],
    instructions: request.instructions,
    temperature: request.temperature,
    top_p: request.top_p,
    user: request.user,
    safety_identifier: request.safety_identifier,
    tools: [searchFunction],
    tool_choice: "auto",
    parallel_tool_calls: false,
    max_output_tokens: Math.min(decisionTokens, request.max_output_tokens ?? decisionTokens),
  };
  return chatRequestOf(asked, conversation);
}

/**
 * Asks the model whether to search, and for what. A refusal of the first pass (a window too
 * small, a balance too low, the rate limit) is the response's own.
 */
export async function decideSearch(
  dependencies: EndpointDependencies,
  context: RequestContext,
  request: ResponseRequest,
  conversation: readonly ConversationItem[],
): Promise<SearchDecision> {
  // A request id of its own: the first pass is a ledger entry beside the answer's.
  const decided = await serveChat(
    dependencies,
    { ...context, requestId: dependencies.newId("req_") },
    decisionRequest(request, conversation),
    { legacy: false },
  );
  if ("error" in decided) throw decided.error;
  const completion = (await decided.response.json()) as ChatCompletion;
  const call = completion.choices[0]?.message.tool_calls?.find(
    (each) => each.type === "function" && each.function.name === searchFunctionName,
  );
  return {
    queries: call?.type === "function" ? queriesOf(call.function.arguments) : null,
    usage: completion.usage,
  };
}

/** The usage of a response made of a first pass and its answer: their sum. */
export function addedUsage(first: Usage | null, answer: Usage | null): Usage | null {
  if (!first || !answer) return answer;
  const cached = (first.prompt_tokens_details?.cached_tokens ?? 0) + (answer.prompt_tokens_details?.cached_tokens ?? 0);
  return {
    prompt_tokens: first.prompt_tokens + answer.prompt_tokens,
    completion_tokens: first.completion_tokens + answer.completion_tokens,
    total_tokens: first.total_tokens + answer.total_tokens,
    prompt_tokens_details: { cached_tokens: cached },
  };
}

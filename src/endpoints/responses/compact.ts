/**
 * `POST /v1/responses/compact`, OpenAI's compaction (and Open Responses'): a conversation made
 * shorter for a later request to continue from. The model writes a summary of it, generated and
 * billed as a chat request is; the answer keeps the user's messages as they were and puts one
 * `compaction` item for everything else, its summary sealed for the account (sealing.ts). A
 * later request that sends the item back reads the summary in its place.
 */
import { BadRequestError } from "../../core/errors/api.js";
import type { ChatCompletion } from "../../core/wire/chat-completion.js";
import type { CompactedResponse } from "../../core/wire/response.js";
import { compactRequestSchema } from "../../core/wire/responses-request.js";
import { countChatPrompt, serveChat } from "../chat/chat.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";
import type { Outcome } from "../../http/outcome.js";
import { itemsOf } from "./history.js";
import { chatRequestOf, inResponsesTermsOf, refuseMedia, type ConversationItem } from "./input.js";
import { listedItem, withItemIds, type Identified } from "./items.js";
import type { Reshape } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";

export const compactPath = /^\/responses\/compact\/?$/;

/** The most tokens a summary may take. */
const summaryTokens = 1_024;

const summaryRequest: ConversationItem = {
  role: "user",
  content:
    "Summarize the conversation so far for your own later use: the facts, decisions, open questions and anything the user asked you to remember, briefly and in full sentences. Write only the summary.",
};

/** The compacted conversation: the user's messages as they were, then the summary's sealed item. */
function compacted(
  dependencies: EndpointDependencies,
  accountId: string,
  conversation: readonly Identified[],
): Reshape {
  return {
    whole: async (body): Promise<CompactedResponse> => {
      const completion = body as ChatCompletion;
      const summary = completion.choices[0]?.message.content ?? "";
      const kept = conversation.filter((item) => "role" in item && item.role === "user").map(listedItem);
      const usage = completion.usage;
      return {
        id: dependencies.newId("resp_"),
        object: "response.compaction",
        created_at: Math.floor(dependencies.clock() / 1000),
        output: [
          ...(kept as CompactedResponse["output"]),
          {
            id: dependencies.newId("cmp_"),
            type: "compaction",
            encrypted_content: await dependencies.sealing.seal(accountId, summary),
          },
        ],
        usage: {
          input_tokens: usage.prompt_tokens,
          input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
          output_tokens: usage.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: usage.total_tokens,
        },
      };
    },
    // A compaction is answered whole: the request has no `stream`.
    chunks: (events) => events,
  };
}

async function compact(dependencies: EndpointDependencies, context: RequestContext): Promise<Outcome> {
  const request = parseWith(compactRequestSchema, await readJson(context.body));
  const accountId = context.key.accountId;
  const input = request.input ?? [];
  if (typeof input !== "string") refuseMedia(input, "input", request.model);
  const { earlier, own } = await itemsOf({ ...request, input }, accountId, dependencies);
  const conversation = withItemIds(earlier.concat(own), dependencies.newId);
  if (conversation.length === 0)
    throw new BadRequestError("Nothing to compact: give the conversation as 'input', or 'previous_response_id'.", {
      param: "input",
      code: "missing_required_parameter",
    });
  const asked = { model: request.model, input, instructions: request.instructions };
  const chat = chatRequestOf(asked, [...conversation, summaryRequest]);
  // The summary's room: what the window leaves beside the conversation, at most `summaryTokens`.
  const room =
    findModel(dependencies, request.model, "model", { kind: "chat", endpoint: "v1/responses/compact" }).contextWindow -
    (await countChatPrompt(dependencies, chat));
  const bounded = room > 0 ? { ...chat, max_completion_tokens: Math.min(summaryTokens, room) } : chat;
  return serveChat(dependencies, context, bounded, {
    legacy: false,
    reshape: compacted(dependencies, accountId, conversation),
  });
}

export function compactRoute(dependencies: EndpointDependencies): InferenceRoute {
  return {
    method: "POST",
    path: compactPath,
    handler: (context) => inResponsesTermsOf(() => compact(dependencies, context)),
  };
}

/**
 * `POST /v1/responses`, OpenAI's Responses API, which the Vercel AI SDK's `openai(model)` and the
 * SDKs' `responses.create` speak: served as the chat request it amounts to (the same checks,
 * admission, billing, engines and upstreams), its answer written as a `response` object or as
 * the Responses API's named events. With `store` (the default) the response is kept for its
 * account, so that `previous_response_id` continues it and an `item_reference` finds its items.
 */
import { BadRequestError, NotFoundError, quoted } from "../../core/errors/api.js";
import type { ChatCompletion, ChatCompletionChunk } from "../../core/wire/chat-completion.js";
import type { OutputItem, ResponseObject } from "../../core/wire/response.js";
import { jsonBytes } from "../../accounts/json-bytes.js";
import type { StoredResponseRecord } from "../../accounts/database.js";
import {
  inputItemsQuerySchema,
  inputTokensRequestSchema,
  responseRequestSchema,
  type ResponseRequest,
} from "../../core/wire/responses-request.js";
import { countChatPrompt, serveChat } from "../chat/chat.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import type { EndpointDependencies } from "../dependencies.js";
import { jsonResponse } from "../../http/json-response.js";
import type { Outcome } from "../../http/outcome.js";
import { asInputItem, chatRequestOf, checkSupported, inResponsesTermsOf, type ConversationItem } from "./input.js";
import { runFileSearch, withoutFileSearch, withPassages } from "./file-search.js";
import type { SearchIndexes } from "../../pipeline/store-search.js";
import type { Usage } from "../../core/wire/shared.js";
import { itemsOf } from "./history.js";
import { listQueryOf } from "../../http/list-query.js";
import { addedItems } from "../stored/conversations.js";
import { itemsPage, keptItem, listedItems, withItemIds } from "./items.js";
import { truncatedConversation } from "./truncation.js";
import { responseEvents, responseOf, type ResponseFrame } from "./output.js";
import type { Reshape } from "../../http/serving.js";
import { parseWith, readJson } from "../../http/validate.js";

export const responsesPaths = {
  create: /^\/responses\/?$/,
  inputTokens: /^\/responses\/input_tokens\/?$/,
  one: /^\/responses\/(?<id>[^/]+)\/?$/,
  inputItems: /^\/responses\/(?<id>[^/]+)\/input_items\/?$/,
  cancel: /^\/responses\/(?<id>[^/]+)\/cancel\/?$/,
};

function reshapeFor(frame: ResponseFrame): Reshape {
  return {
    named: true,
    whole: (body) => responseOf(body as ChatCompletion, frame),
    chunks: (events) => responseEvents(events as AsyncGenerator<ChatCompletionChunk>, frame),
  };
}

/** The conversation a response adds its own input items (as identified) and its output to, when it names one. */
function conversationTarget(
  dependencies: EndpointDependencies,
  accountId: string,
  conversationId: string | null,
  own: readonly ConversationItem[],
): ResponseFrame["conversation"] {
  if (conversationId === null) return null;
  return {
    id: conversationId,
    add: async (output) => {
      await addedItems(dependencies, accountId, conversationId, [...own, ...output.map(asInputItem)]);
    },
  };
}

async function serveResponse(
  dependencies: EndpointDependencies,
  indexes: SearchIndexes,
  context: RequestContext,
): Promise<Outcome> {
  const request = parseWith(responseRequestSchema, await readJson(context.body));
  checkSupported(request);
  const accountId = context.key.accountId;
  const { earlier, own, conversationId } = await itemsOf(request, accountId, dependencies);
  // What it is answered over, with ids on every item, is what is kept: its input items are
  // listed by those ids, and a truncated conversation stays as long as a window holds.
  const identified = withItemIds(earlier.concat(own), dependencies.newId);
  const conversation = await truncatedConversation(dependencies, request, identified);
  // Its own items that it answered over (`truncation: "auto"` may drop some), as they are kept.
  const answered = identified.slice(Math.max(earlier.length, identified.length - conversation.length)).map(keptItem);
  const stores = request.store !== false;
  if (stores || conversationId)
    await dependencies.storage.ensureRoom(accountId, {
      bytes: jsonBytes(answered),
      items: (stores ? 1 : 0) + (conversationId ? answered.length : 0),
    });
  const id = dependencies.newId("resp_");
  const searched = await runFileSearch(dependencies, indexes, context, request, conversation);
  const frame: ResponseFrame = {
    id,
    createdAt: Math.floor(dependencies.clock() / 1000),
    clock: dependencies.clock,
    model: request.model,
    request,
    newId: dependencies.newId,
    // Kept only once it has completed: a failed response has nothing to continue from.
    keep: stores
      ? (response) => kept(dependencies, { id, accountId, request, answered, conversation }, response)
      : null,
    conversation: conversationTarget(dependencies, accountId, conversationId, answered),
    fileSearch: searched.run,
    decision: searched.decision,
  };
  const served = afterDecision(withoutFileSearch(request).chat, searched.decision);
  const chat = chatRequestOf(frame.fileSearch ? withPassages(served, frame.fileSearch) : served, conversation);
  return serveChat(dependencies, context, chat, { legacy: false, reshape: reshapeFor(frame) });
}

/** The answer's request: the output tokens the model's decision to search took come out of `max_output_tokens`. */
function afterDecision(request: ResponseRequest, decision: Usage | null): ResponseRequest {
  if (!decision || request.max_output_tokens == null) return request;
  return { ...request, max_output_tokens: Math.max(1, request.max_output_tokens - decision.completion_tokens) };
}

/**
 * Stores a finished response: its own items and output, and what it continued by reference (a
 * stored response's chain), never a copy. One made in a conversation keeps its own items: the
 * conversation keeps the rest.
 */
function kept(
  dependencies: EndpointDependencies,
  made: {
    id: string;
    accountId: string;
    request: ResponseRequest;
    answered: ConversationItem[];
    conversation: readonly ConversationItem[];
  },
  { output, ...response }: ResponseObject,
): Promise<void> {
  const previousResponseId = made.request.previous_response_id ?? null;
  return dependencies.responses.save({
    id: made.id,
    accountId: made.accountId,
    previousResponseId,
    input: made.answered,
    conversationLength: previousResponseId ? made.conversation.length : made.answered.length,
    output,
    response,
  });
}

/** The items a stored response was answered over, in order: its own, after those of the chain it continued. */
async function conversationOf(dependencies: EndpointDependencies, record: StoredResponseRecord) {
  const items: ConversationItem[] = [];
  for await (const item of dependencies.responses.itemsFromEnd(record, false, (output) =>
    asInputItem(output as OutputItem),
  ))
    items.push(item as ConversationItem);
  return items.reverse();
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`Response with id '${quoted(id)}' not found.`);
}

/**
 * `GET` and `DELETE /v1/responses/{id}`: a stored response of the key's account, read back or
 * deleted; `GET /v1/responses/{id}/input_items`: the items it was given, a page at a time.
 */
export function storedResponseRoutes(dependencies: EndpointDependencies): InferenceRoute[] {
  return [
    {
      method: "GET",
      path: responsesPaths.one,
      handler: async ({ key, url }, { id = "" }) => {
        if (url.searchParams.get("stream") === "true")
          throw new BadRequestError(
            "Invalid 'stream': only a response created with 'background' true can be streamed again, and this API generates responses while the request waits. Read it back without 'stream'.",
            { param: "stream", code: "invalid_value" },
          );
        const record = await dependencies.responses.response(key.accountId, id);
        if (!record) throw notFound(id);
        return { response: jsonResponse({ ...(record.response as object), output: record.output }) };
      },
    },
    {
      method: "GET",
      path: responsesPaths.inputItems,
      handler: async ({ key, url }, { id = "" }) => {
        const query = parseWith(inputItemsQuerySchema, listQueryOf(url));
        const record = await dependencies.responses.response(key.accountId, id);
        if (!record) throw notFound(id);
        const items = listedItems(id, await conversationOf(dependencies, record));
        return { response: jsonResponse(itemsPage(id, items, query)) };
      },
    },
    {
      // Only a background response can be cancelled, and there are none: each one here was
      // generated while its request waited, and a client stops one by aborting that request.
      method: "POST",
      path: responsesPaths.cancel,
      handler: async ({ key }, { id = "" }) => {
        if (!(await dependencies.responses.response(key.accountId, id))) throw notFound(id);
        throw new BadRequestError("Cannot cancel a synchronous response.");
      },
    },
    {
      method: "DELETE",
      path: responsesPaths.one,
      handler: async ({ key }, { id = "" }) => {
        if (!(await dependencies.responses.remove(key.accountId, id))) throw notFound(id);
        return { response: jsonResponse({ id, object: "response", deleted: true }) };
      },
    },
  ];
}

/** The input tokens `context`'s request would be billed, counted as serving counts them. */
async function countInput(dependencies: EndpointDependencies, context: RequestContext): Promise<Outcome> {
  const request = parseWith(inputTokensRequestSchema, await readJson(context.body));
  checkSupported(request);
  const { earlier, own } = await itemsOf(request, context.key.accountId, dependencies);
  const conversation = await truncatedConversation(dependencies, request, earlier.concat(own));
  const tokens = await countChatPrompt(dependencies, chatRequestOf(withoutFileSearch(request).chat, conversation));
  return { response: jsonResponse({ object: "response.input_tokens", input_tokens: tokens }) };
}

/**
 * `POST /v1/responses/input_tokens`: the input tokens a response to the request would be billed
 * (`usage.input_tokens`), counted as serving it counts them; nothing is generated or charged.
 */
export function inputTokensRoute(dependencies: EndpointDependencies): InferenceRoute {
  return {
    method: "POST",
    path: responsesPaths.inputTokens,
    handler: (context) => inResponsesTermsOf(() => countInput(dependencies, context)),
  };
}

export function responsesRoute(dependencies: EndpointDependencies, indexes: SearchIndexes): InferenceRoute {
  return {
    method: "POST",
    path: responsesPaths.create,
    handler: (context) => inResponsesTermsOf(() => serveResponse(dependencies, indexes, context)),
  };
}

/**
 * `POST /v1/responses`, OpenAI's Responses API, which the Vercel AI SDK's `openai(model)` and the
 * SDKs' `responses.create` speak: served as the chat request it amounts to (the same checks,
 * admission, billing, engines and upstreams), its answer written as a `response` object or as
 * the Responses API's named events. With `store` (the default) the response is kept for its
 * account, so that `previous_response_id` continues it and an `item_reference` finds its items.
 */
import { BadRequestError, NotFoundError, quoted } from "../errors/api.js";
import type { ChatCompletion, ChatCompletionChunk } from "../wire/chat-completion.js";
import type { OutputItem } from "../wire/response.js";
import {
  inputItemsQuerySchema,
  inputTokensRequestSchema,
  responseRequestSchema,
  type ResponseRequest,
} from "../wire/responses-request.js";
import { countChatPrompt, serveChat } from "./chat.js";
import type { InferenceRoute, RequestContext } from "./context.js";
import type { HttpDependencies } from "./dependencies.js";
import { jsonResponse } from "./json-response.js";
import type { Outcome } from "./outcome.js";
import { asInputItem, chatRequestOf, checkSupported, type ConversationItem } from "./responses-input.js";
import { listQueryOf } from "./list-query.js";
import { addedItems, conversationNotFound } from "./conversations.js";
import { resolvedItems } from "./item-references.js";
import { itemsPage, listedItems, withItemIds } from "./responses-items.js";
import { truncatedConversation } from "./responses-truncation.js";
import { responseEvents, responseOf, type ResponseFrame } from "./responses-output.js";
import type { Reshape } from "./serving.js";
import { parseWith, readJson } from "./validate.js";

export const responsesPaths = {
  create: /^\/responses\/?$/,
  inputTokens: /^\/responses\/input_tokens\/?$/,
  one: /^\/responses\/(?<id>[^/]+)\/?$/,
  inputItems: /^\/responses\/(?<id>[^/]+)\/input_items\/?$/,
  cancel: /^\/responses\/(?<id>[^/]+)\/cancel\/?$/,
};

/**
 * A chat request's param as the Responses request names it. A message's index is not its item's
 * (instructions, continued turns and merged calls come between), so a message is named `input`.
 */
function responsesParam(param: string): string {
  return param
    .replace(/^messages(?:[.[].*)?$/, "input")
    .replace(/^max_completion_tokens$/, "max_output_tokens")
    .replace(/^response_format(?:\.json_schema)?(?=$|\.)/, "text.format")
    .replace(/^tools\[(\d+)\]\.function(?=$|\.)/, "tools[$1]")
    .replace(/^tool_choice\.function(?=$|\.)/, "tool_choice");
}

/** A refusal of the chat request it became, in the Responses request's terms. */
function inResponsesTerms(error: unknown): unknown {
  if (!(error instanceof BadRequestError) || error.param === null) return error;
  const param = responsesParam(error.param);
  if (param === error.param) return error;
  const message = error.message.split(`'${error.param}'`).join(`'${param}'`);
  return new BadRequestError(message, { param, code: error.code });
}

function reshapeFor(frame: ResponseFrame): Reshape {
  return {
    named: true,
    whole: (body) => responseOf(body as ChatCompletion, frame),
    chunks: (events) => responseEvents(events as AsyncGenerator<ChatCompletionChunk>, frame),
  };
}

/** A request's own items, and the earlier ones it continues: a stored response's, or a conversation's. */
interface RequestItems {
  earlier: ConversationItem[];
  own: ConversationItem[];
  /** The conversation it continues and adds to, when it names one. */
  conversationId: string | null;
}

/**
 * The items a request answers: the turns of the response it continues (its input, then its
 * output) or of the conversation it names, then its own input, each `item_reference` replaced by
 * the item it names.
 */
async function itemsOf(
  request: ResponseRequest,
  accountId: string,
  dependencies: HttpDependencies,
): Promise<RequestItems> {
  const input = typeof request.input === "string" ? [{ role: "user" as const, content: request.input }] : request.input;
  const own = await resolvedItems(input, accountId, dependencies.responses, "input");
  return { ...(await earlierItems(request, accountId, dependencies)), own };
}

async function earlierItems(
  request: ResponseRequest,
  accountId: string,
  dependencies: HttpDependencies,
): Promise<Omit<RequestItems, "own">> {
  if (request.conversation != null) {
    if (request.previous_response_id != null)
      throw new BadRequestError(
        "Mutually exclusive parameters. Ensure you are only providing one of: 'previous_response_id' or 'conversation'.",
        { code: "mutually_exclusive_parameters" },
      );
    const id = typeof request.conversation === "string" ? request.conversation : request.conversation.id;
    const items = await dependencies.conversations.items(accountId, id);
    if (!items) throw conversationNotFound(id, "conversation");
    return { earlier: items as ConversationItem[], conversationId: id };
  }
  if (request.previous_response_id == null) return { earlier: [], conversationId: null };
  const previous = await dependencies.responses.response(accountId, request.previous_response_id);
  if (!previous)
    throw new BadRequestError(`Previous response with id '${quoted(request.previous_response_id)}' not found.`, {
      param: "previous_response_id",
      code: "previous_response_not_found",
    });
  const earlier = (previous.input as ConversationItem[]).concat((previous.output as OutputItem[]).map(asInputItem));
  return { earlier, conversationId: null };
}

/** The conversation a response adds its own input items (as identified) and its output to, when it names one. */
function conversationTarget(
  dependencies: HttpDependencies,
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

async function serveResponse(dependencies: HttpDependencies, context: RequestContext): Promise<Outcome> {
  const request = parseWith(responseRequestSchema, await readJson(context.body));
  checkSupported(request);
  const accountId = context.key.accountId;
  const { earlier, own, conversationId } = await itemsOf(request, accountId, dependencies);
  // What it is answered over, with ids on every item, is what is kept: its input items are
  // listed by those ids, and a truncated conversation stays as long as a window holds.
  const identified = withItemIds(earlier.concat(own), dependencies.newId);
  const conversation = await truncatedConversation(dependencies, request, identified);
  const id = dependencies.newId("resp_");
  const frame: ResponseFrame = {
    id,
    createdAt: Math.floor(dependencies.clock() / 1000),
    model: request.model,
    request,
    newId: dependencies.newId,
    // Kept only once it has completed: a failed response has nothing to continue from.
    keep:
      request.store === false
        ? null
        : (response) =>
            dependencies.responses.save({ id, accountId, input: conversation, output: response.output, response }),
    // Its own items that it answered over (`truncation: "auto"` may drop some), then its output.
    conversation: conversationTarget(
      dependencies,
      accountId,
      conversationId,
      identified.slice(Math.max(earlier.length, identified.length - conversation.length)),
    ),
  };
  const chat = chatRequestOf(request, conversation);
  return serveChat(dependencies, context, chat, { legacy: false, reshape: reshapeFor(frame) });
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`Response with id '${quoted(id)}' not found.`);
}

/**
 * `GET` and `DELETE /v1/responses/{id}`: a stored response of the key's account, read back or
 * deleted; `GET /v1/responses/{id}/input_items`: the items it was given, a page at a time.
 */
export function storedResponseRoutes(dependencies: HttpDependencies): InferenceRoute[] {
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
        return { response: jsonResponse(record.response) };
      },
    },
    {
      method: "GET",
      path: responsesPaths.inputItems,
      handler: async ({ key, url }, { id = "" }) => {
        const query = parseWith(inputItemsQuerySchema, listQueryOf(url));
        const record = await dependencies.responses.response(key.accountId, id);
        if (!record) throw notFound(id);
        const items = listedItems(id, record.input as ConversationItem[]);
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

/** A route's answer, its refusals (thrown or answered) in the Responses request's terms. */
async function inResponsesTermsOf(answer: () => Promise<Outcome>): Promise<Outcome> {
  try {
    const outcome = await answer();
    return "error" in outcome ? { ...outcome, error: inResponsesTerms(outcome.error) } : outcome;
  } catch (error) {
    throw inResponsesTerms(error);
  }
}

/** The input tokens `context`'s request would be billed, counted as serving counts them. */
async function countInput(dependencies: HttpDependencies, context: RequestContext): Promise<Outcome> {
  const request = parseWith(inputTokensRequestSchema, await readJson(context.body));
  checkSupported(request);
  const { earlier, own } = await itemsOf(request, context.key.accountId, dependencies);
  const conversation = await truncatedConversation(dependencies, request, earlier.concat(own));
  const tokens = await countChatPrompt(dependencies, chatRequestOf(request, conversation));
  return { response: jsonResponse({ object: "response.input_tokens", input_tokens: tokens }) };
}

/**
 * `POST /v1/responses/input_tokens`: the input tokens a response to the request would be billed
 * (`usage.input_tokens`), counted as serving it counts them; nothing is generated or charged.
 */
export function inputTokensRoute(dependencies: HttpDependencies): InferenceRoute {
  return {
    method: "POST",
    path: responsesPaths.inputTokens,
    handler: (context) => inResponsesTermsOf(() => countInput(dependencies, context)),
  };
}

export function responsesRoute(dependencies: HttpDependencies): InferenceRoute {
  return {
    method: "POST",
    path: responsesPaths.create,
    handler: (context) => inResponsesTermsOf(() => serveResponse(dependencies, context)),
  };
}

/**
 * The items a Responses request answers over: the turns it continues (a stored response's chain,
 * or a conversation's items), read from their end only as far as the model's window could hold
 * them, then its own input, each `item_reference` replaced by the item it names and each
 * compaction opened to the summary it stands for.
 */
import { BadRequestError, quoted } from "../../core/errors/api.js";
import type { OutputItem } from "../../core/wire/response.js";
import type { ResponseRequest } from "../../core/wire/responses-request.js";
import { conversationNotFound } from "../stored/conversations.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";
import { resolvedItems } from "../stored/item-references.js";
import { asInputItem, type ConversationItem } from "./input.js";
import { readBack, WindowBound } from "./truncation.js";

/** What a request continues and gives: the fields of a response request (or of a compaction's) that name them. */
export type ItemsRequest = Pick<
  ResponseRequest,
  "model" | "input" | "instructions" | "truncation" | "conversation" | "previous_response_id"
>;

/** A request's own items, and the earlier ones it continues: a stored response's, or a conversation's. */
interface RequestItems {
  earlier: ConversationItem[];
  own: ConversationItem[];
  /** The conversation it continues and adds to, when it names one. */
  conversationId: string | null;
}

/**
 * The items a request answers: the turns of the response it continues (its conversation, then its
 * output) or of the conversation it names, then its own input, each `item_reference` replaced by
 * the item it names. Earlier turns are read from the end only as far as the model's context
 * window could hold them with the request's own input: past that, with `truncation: "auto"` they
 * would be dropped, and without it the request is refused as too long, before anything else.
 */
export async function itemsOf(
  request: ItemsRequest,
  accountId: string,
  dependencies: EndpointDependencies,
): Promise<RequestItems> {
  const input = typeof request.input === "string" ? [{ role: "user" as const, content: request.input }] : request.input;
  const own = await resolvedItems(input, accountId, dependencies.responses, "input");
  const model = findModel(dependencies, request.model, "model", { kind: "chat", endpoint: "v1/responses" });
  const bound = new WindowBound(model.contextWindow, await dependencies.tokenizers.forFamily(model.family));
  if (request.instructions) bound.add(request.instructions);
  for (const item of own) bound.add(item);
  const { newestFirst, conversationId } = await earlierSource(request, accountId, dependencies);
  const { items: earlier, whole } = await readBack<ConversationItem>(newestFirst, bound);
  if (!whole && request.truncation !== "auto") bound.exceeded();
  const where = request.conversation != null ? "conversation" : "previous_response_id";
  return {
    earlier: await opened(earlier, accountId, dependencies, () => where),
    own: await opened(own, accountId, dependencies, (index) => `input[${index}].encrypted_content`),
    conversationId,
  };
}

/**
 * The items with each compaction opened (its summary read from its seal); one that does not
 * open (another account's, another device's, or altered) is a 400 naming where it is.
 */
async function opened(
  items: ConversationItem[],
  accountId: string,
  dependencies: EndpointDependencies,
  param: (index: number) => string,
): Promise<ConversationItem[]> {
  return Promise.all(
    items.map(async (item, index) => {
      if (!("type" in item) || item.type !== "compaction") return item;
      const summary = await dependencies.sealing.open(accountId, item.encrypted_content);
      if (summary !== null) return { ...item, summary };
      throw new BadRequestError(
        "The encrypted content of a compaction item could not be read: it was made for another account or on another device, or was changed. Send the items /v1/responses/compact returned as they came.",
        { param: param(index), code: "invalid_encrypted_content" },
      );
    }),
  );
}

/** The earlier items a request continues, newest first: a conversation's, or a stored response's chain. */
async function earlierSource(
  request: ItemsRequest,
  accountId: string,
  dependencies: EndpointDependencies,
): Promise<{ newestFirst: AsyncIterable<unknown> | Iterable<unknown>; conversationId: string | null }> {
  if (request.conversation != null) {
    if (request.previous_response_id != null)
      throw new BadRequestError(
        "Mutually exclusive parameters. Ensure you are only providing one of: 'previous_response_id' or 'conversation'.",
        { code: "mutually_exclusive_parameters" },
      );
    const id = typeof request.conversation === "string" ? request.conversation : request.conversation.id;
    const items = await dependencies.conversations.itemsFromEnd(accountId, id);
    if (!items) throw conversationNotFound(id, "conversation");
    return { newestFirst: items, conversationId: id };
  }
  if (request.previous_response_id == null) return { newestFirst: [], conversationId: null };
  const previous = await dependencies.responses.response(accountId, request.previous_response_id);
  if (!previous)
    throw new BadRequestError(`Previous response with id '${quoted(request.previous_response_id)}' not found.`, {
      param: "previous_response_id",
      code: "previous_response_not_found",
    });
  const newestFirst = dependencies.responses.itemsFromEnd(previous, true, (item) => asInputItem(item as OutputItem));
  return { newestFirst, conversationId: null };
}

/**
 * Input items that name a stored response's output item (`item_reference`), as a Responses
 * request and the Conversations API take them: each replaced by the item it names, read once.
 */
import { BadRequestError, quoted } from "../../core/errors/api.js";
import type { StoredResponses } from "../../accounts/stored/responses.js";
import type { OutputItem } from "../../core/wire/response.js";
import type { ResponseInputItem } from "../../core/wire/responses-request.js";
import { asInputItem, type ConversationItem } from "../responses/input.js";

/**
 * The most items one request may refer to: each is a read of the database before the request is
 * admitted, and a conversation that fits a context window has far fewer earlier replies.
 */
const maxReferences = 4096;

/** The stored items the input refers to, each id read once. */
async function referredItems(
  input: readonly ResponseInputItem[],
  accountId: string,
  stored: StoredResponses,
  param: string,
): Promise<Map<string, unknown>> {
  const ids = new Set<string>();
  for (const item of input) if ("type" in item && item.type === "item_reference") ids.add(item.id);
  if (ids.size > maxReferences)
    throw new BadRequestError(
      `Invalid '${param}': it refers to ${ids.size} stored items; at most ${maxReferences} are read for one request. Send the items themselves.`,
      { param, code: "invalid_value" },
    );
  return ids.size ? stored.items(accountId, ids) : new Map();
}

/** The items, each `item_reference` replaced by the account's stored item it names; `param` names the list in a refusal. */
export async function resolvedItems(
  input: readonly ResponseInputItem[],
  accountId: string,
  stored: StoredResponses,
  param: string,
): Promise<ConversationItem[]> {
  const found = await referredItems(input, accountId, stored, param);
  return input.map((item, index): ConversationItem => {
    if (!("type" in item) || item.type !== "item_reference") return item;
    const referred = found.get(item.id) as OutputItem | undefined;
    if (!referred)
      throw new BadRequestError(
        `Item with id '${quoted(item.id)}' not found. Items are kept for 30 days, for the account whose response made them, when the response was stored ('store' true, the default).`,
        { param: `${param}[${index}]`, code: "invalid_value" },
      );
    return asInputItem(referred);
  });
}

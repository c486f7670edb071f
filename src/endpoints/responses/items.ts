/**
 * The items a stored response was given, as `GET /v1/responses/{id}/input_items` lists them: the
 * turns it continued, then its own input with each reference resolved, each with an id. Items are
 * given their ids when the response is stored (`withItemIds`), so an item keeps its id in every
 * later response that continues it, and a page's cursor names exactly one item.
 */
import { BadRequestError, quoted } from "../../core/errors/api.js";
import type { InputItemList, ListedItem } from "../../core/wire/response.js";
import type { InputItemsQuery } from "../../core/wire/responses-request.js";
import { cursorPage } from "../../http/list-query.js";
import type { ConversationItem } from "./input.js";

export type Identified = ConversationItem & { id: string };
type MessageItem = Extract<ConversationItem, { role: string }>;
type Part = Exclude<MessageItem["content"], string>[number];

/** The prefixes OpenAI's item ids have, by the item's type. */
const idPrefix = {
  message: "msg_",
  function_call: "fc_",
  function_call_output: "fco_",
  file_search_call: "fs_",
  compaction: "cmp_",
} as const;

/** A new id for the item, with the prefix OpenAI's ids of its type have. */
export function newItemId(item: ConversationItem, newId: (prefix: string) => string): string {
  return newId(idPrefix["role" in item ? "message" : item.type]);
}

/**
 * The conversation with an id on every item: the item's own, unless it has none or an earlier
 * item has it (a cursor must name one item), in which case a new one.
 */
export function withItemIds(items: readonly ConversationItem[], newId: (prefix: string) => string): Identified[] {
  const seen = new Set<string>();
  return items.map((item) => {
    const own = item.id ?? undefined;
    const id = own !== undefined && !seen.has(own) ? own : newItemId(item, newId);
    seen.add(id);
    return { ...item, id } as Identified;
  });
}

/** A part as it is kept: its text (or a refusal's words), and nothing else a client sent with it. */
function keptPart(part: Part): Part {
  if (part.type === "refusal") return { type: "refusal", refusal: part.refusal };
  if (part.type === "input_text" || part.type === "output_text") return { type: part.type, text: part.text };
  return part;
}

/**
 * An input item as a conversation or a stored response keeps it: only what is read back (its id,
 * role, text, call and status). An earlier reply's annotations and log probabilities, a
 * message's phase, a call's caller and the like are taken from a client and not read, so they are
 * not stored.
 */
export function keptItem(item: ConversationItem): ConversationItem {
  const common = { ...(item.id != null ? { id: item.id } : {}) };
  const status = "status" in item && item.status != null ? { status: item.status } : {};
  const kept = (content: string | Part[]) => (typeof content === "string" ? content : content.map(keptPart));
  if ("role" in item) return { ...common, type: "message", role: item.role, content: kept(item.content), ...status };
  switch (item.type) {
    case "function_call":
      return {
        ...common,
        type: item.type,
        call_id: item.call_id,
        name: item.name,
        arguments: item.arguments,
        ...status,
      };
    case "function_call_output":
      return { ...common, type: item.type, call_id: item.call_id, output: kept(item.output), ...status };
    case "file_search_call":
      // Its queries; what it found is in the response that made it.
      return { id: item.id, type: item.type, queries: item.queries, ...status };
    default:
      // A compaction is kept sealed: its opened summary is never stored.
      return { ...common, type: item.type, encrypted_content: item.encrypted_content };
  }
}

/** A text part's text; a refusal's is what was said. Media parts were refused before a response was stored. */
const textOf = (part: Part) => (part.type === "refusal" ? part.refusal : "text" in part ? String(part.text) : "");

function listedMessage(item: MessageItem & { id: string }): ListedItem {
  const parts: Part[] = typeof item.content === "string" ? [{ type: "input_text", text: item.content }] : item.content;
  const status = item.status ?? "completed";
  if (item.role !== "assistant")
    return {
      id: item.id,
      type: "message",
      status,
      role: item.role,
      content: parts.map((part) => ({ type: "input_text", text: textOf(part) })),
    };
  const content = parts.map((part) =>
    part.type === "refusal"
      ? { type: "refusal" as const, refusal: part.refusal }
      : { type: "output_text" as const, text: textOf(part), annotations: [], logprobs: [] },
  );
  return { id: item.id, type: "message", status, role: "assistant", content };
}

export function listedItem(item: Identified): ListedItem {
  if ("role" in item) return listedMessage(item);
  if (item.type === "compaction") return { id: item.id, type: "compaction", encrypted_content: item.encrypted_content };
  if (item.type === "file_search_call")
    return { id: item.id, type: item.type, status: item.status ?? "completed", queries: item.queries, results: null };
  const { id, call_id } = item;
  const status = item.status ?? "completed";
  if (item.type === "function_call")
    return { id, type: "function_call", status, call_id, name: item.name, arguments: item.arguments };
  const output =
    typeof item.output === "string"
      ? item.output
      : item.output.map((part) => ({ type: "input_text" as const, text: textOf(part) }));
  return { id, type: "function_call_output", status, call_id, output };
}

/**
 * The items response `responseId` was given, as listed. A response stored without ids on its
 * items (by an earlier version) has them made from its own id and each item's place, so that
 * they stay the same from one page to the next.
 */
export function listedItems(responseId: string, input: readonly ConversationItem[]): ListedItem[] {
  let place = 0;
  const madeId = (prefix: string) => `${prefix}${responseId.replace(/^resp_/, "")}_${place++}`;
  return withItemIds(input, madeId).map(listedItem);
}

/** One page of the items response `responseId` was given, after the query's cursor. */
export function itemsPage(responseId: string, items: readonly ListedItem[], query: InputItemsQuery): InputItemList {
  return cursorPage(
    items,
    query,
    (after) =>
      new BadRequestError(
        `Invalid 'after': response '${quoted(responseId)}' has no input item with id '${quoted(after)}'.`,
        { param: "after", code: "invalid_value" },
      ),
  );
}

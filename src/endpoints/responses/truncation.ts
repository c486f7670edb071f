/**
 * `truncation: "auto"`: a conversation too long for the model's context window loses items from
 * its beginning until it fits, as OpenAI drops them; with `disabled` (the default) it is refused.
 */
import type { Tokenizer } from "../../prompt/tokenizer.js";
import { contextExceeded } from "../../pipeline/budget.js";
import { chatFits } from "../chat/chat.js";
import type { EndpointDependencies } from "../dependencies.js";
import { chatRequestOf, type ConversationItem } from "./input.js";
import type { ResponseRequest } from "../../core/wire/responses-request.js";

/** The text of an item that its prompt holds whatever the template (trimmed: some templates trim). */
function itemText(item: ConversationItem): string {
  const texts = (content: string | readonly { type: string }[]) =>
    typeof content === "string"
      ? content
      : content
          .map((part) => ("text" in part ? String(part.text) : "refusal" in part ? String(part.refusal) : ""))
          .join("");
  if ("role" in item) return texts(item.content).trim();
  if (item.type === "function_call") return item.name;
  if (item.type === "function_call_output") return texts(item.output).trim();
  if (item.type === "file_search_call") return "";
  return item.summary ?? "";
}

/**
 * A lower bound of a conversation's tokens, item by item: no template renders an item's text in
 * fewer tokens than its tokenizer's fewest for that text. A conversation whose bound passes the
 * context window cannot fit it, nor can one of more items than the window has tokens (every
 * turn a template renders costs a token at least).
 */
export class WindowBound {
  #tokens = 0;
  #items = 0;

  constructor(
    readonly window: number,
    readonly tokenizer: Pick<Tokenizer, "fewestTokens">,
  ) {}

  /** Counts `item` (or text); whether what was counted could still fit the window. */
  add(item: ConversationItem | string): boolean {
    this.#tokens += this.tokenizer.fewestTokens(typeof item === "string" ? item : itemText(item));
    this.#items += typeof item === "string" ? 0 : 1;
    return this.#tokens <= this.window && this.#items <= this.window;
  }

  /** Refuses the conversation as too long for the window, in the usual words. */
  exceeded(): never {
    throw contextExceeded(this.window, "input", `at least ${Math.max(this.#tokens, this.window + 1)}`);
  }
}

/**
 * A stored conversation's items, read from its end (`newestFirst`) only as far as `bound` says
 * they could still fit the window: in order, and whether they are all of it. Past the window,
 * what came earlier cannot be part of any prompt, so it is never read: the work a request costs
 * follows the window, not what the account has stored.
 */
export async function readBack<Item extends ConversationItem>(
  newestFirst: AsyncIterable<unknown> | Iterable<unknown>,
  bound: WindowBound,
): Promise<{ items: Item[]; whole: boolean }> {
  const items: Item[] = [];
  for await (const item of newestFirst) {
    items.push(item as Item);
    if (!bound.add(item as Item)) return { items: items.reverse(), whole: false };
  }
  return { items: items.reverse(), whole: true };
}

/**
 * The conversation the request is answered over: whole when it fits (or truncation is not
 * `auto`), else the longest end of it that fits with the request's instructions, tools and
 * `max_output_tokens`. That end starts at a message of the user, system or developer, never at a
 * reply or at a call's output whose call would be gone. When no such end fits, the conversation
 * is kept whole, to be refused as too long in the usual words.
 *
 * A shorter end is never a longer prompt, so the starts that fit are the last ones. They are found
 * from the end: ends twice as long each try until one does not fit, then bisection between the
 * last two. No end tried holds more than twice the starts of the longest end that fits (which
 * the context window bounds), plus one, so past the whole conversation's one count the work
 * follows the window, not the conversation's length: a logarithmic number of counts of such ends.
 */
export async function truncatedConversation<Item extends ConversationItem>(
  dependencies: EndpointDependencies,
  request: ResponseRequest,
  conversation: readonly Item[],
): Promise<Item[]> {
  const fits = (start: number) => chatFits(dependencies, chatRequestOf(request, conversation.slice(start)));
  if (request.truncation !== "auto" || (await fits(0))) return [...conversation];
  const starts = conversation.flatMap((item, index) =>
    index > 0 && "role" in item && item.role !== "assistant" ? [index] : [],
  );
  // Every start from `high` on fits (none is known to while it is `starts.length`); none below `low` does.
  let low = 0;
  let high = starts.length;
  for (let span = 1; high > 0; span *= 2) {
    const probe = Math.max(0, high - span);
    if (!(await fits(starts[probe]!))) {
      low = probe + 1;
      break;
    }
    high = probe;
  }
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (await fits(starts[middle]!)) high = middle;
    else low = middle + 1;
  }
  return conversation.slice(high < starts.length ? starts[high] : 0);
}

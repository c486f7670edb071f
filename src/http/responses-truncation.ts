/**
 * `truncation: "auto"`: a conversation too long for the model's context window loses items from
 * its beginning until it fits, as OpenAI drops them; with `disabled` (the default) it is refused.
 */
import { chatFits } from "./chat.js";
import type { HttpDependencies } from "./dependencies.js";
import { chatRequestOf, type ConversationItem } from "./responses-input.js";
import type { ResponseRequest } from "../wire/responses-request.js";

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
  dependencies: HttpDependencies,
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

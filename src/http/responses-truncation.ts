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
 * Found by bisection over those starts (a shorter end is never a longer prompt), so a long
 * conversation is counted a logarithmic number of times, each bounded as any prompt's count is.
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
  let low = 0;
  let high = starts.length;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (await fits(starts[middle]!)) high = middle;
    else low = middle + 1;
  }
  return conversation.slice(low < starts.length ? starts[low] : 0);
}

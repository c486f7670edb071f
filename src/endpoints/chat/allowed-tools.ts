/**
 * `tool_choice: {type: "allowed_tools", allowed_tools: {mode, tools}}` in the terms every engine
 * and upstream takes: `tools` narrowed to the ones allowed, `tool_choice` their mode (`auto` or
 * `required`). A tool left out could not be called anyway; the model is not shown it, which a
 * model this size follows better than an instruction not to call it. OpenAI keeps the others in
 * the prompt for its cache only.
 */
import type { ChatCompletionRequest } from "../../core/wire/chat-request.js";
import { noSuchTool } from "./structured.js";

type AllowedTools = Extract<NonNullable<ChatCompletionRequest["tool_choice"]>, { type: "allowed_tools" }>;
type Reference = AllowedTools["allowed_tools"]["tools"][number];

function nameOf(reference: Reference): string {
  return "function" in reference ? reference.function.name : reference.name;
}

/** The request, and its JSON as forwarded, with an `allowed_tools` choice narrowed; as they were otherwise. */
export function narrowedToAllowedTools(
  request: ChatCompletionRequest,
  json: Record<string, unknown>,
): { request: ChatCompletionRequest; json: Record<string, unknown> } {
  const choice = request.tool_choice;
  // Without tools, the choice is refused as any other is (endpoints/chat/structured.ts).
  if (typeof choice !== "object" || choice?.type !== "allowed_tools" || !request.tools?.length)
    return { request, json };
  const given = new Set(request.tools.map((tool) => tool.function.name));
  const allowed = new Set<string>();
  choice.allowed_tools.tools.forEach((reference, index) => {
    const name = nameOf(reference);
    if (!given.has(name)) throw noSuchTool(name, `tool_choice.allowed_tools.tools[${index}]`);
    allowed.add(name);
  });
  // The JSON's tools are the request's, as sent: the same list, item for item.
  const kept = request.tools.map((tool) => allowed.has(tool.function.name));
  const mode = choice.allowed_tools.mode;
  return {
    request: { ...request, tools: request.tools.filter((_, index) => kept[index]), tool_choice: mode },
    json: { ...json, tools: (json.tools as unknown[]).filter((_, index) => kept[index]), tool_choice: mode },
  };
}

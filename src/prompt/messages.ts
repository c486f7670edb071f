/**
 * A conversation's turns as templates render them: the wire's messages (src/core/wire) converted at
 * the HTTP boundary, with tool calls and their results. Engines take them in this form too.
 */
export interface EngineMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  toolCallId?: string;
  toolCalls?: { id: string; name: string; arguments: string }[];
}

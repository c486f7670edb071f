/**
 * The chats a person returns to, kept through the API's own Conversations API: each chat is a
 * conversation (its title in its metadata), every answered turn is added to it as two items, and
 * an earlier chat is read back from its items. The API lists no conversations, so this browser
 * keeps their ids, per account, as an app keeps its users' conversation ids.
 */
import OpenAI from "openai";
import type { DemoState, Message } from "./state.js";

export interface KeptConversation {
  id: string;
  title: string;
}

const listKey = (accountId: string) => `webgpu-inference-demo-conversations:${accountId}`;

/** This account's chats, newest first. */
export function keptConversations(state: DemoState): KeptConversation[] {
  if (!state.accountId) return [];
  try {
    return JSON.parse(localStorage.getItem(listKey(state.accountId)) ?? "[]") as KeptConversation[];
  } catch {
    return [];
  }
}

function keep(state: DemoState, list: KeptConversation[]): void {
  if (state.accountId) localStorage.setItem(listKey(state.accountId), JSON.stringify(list));
}

/** Forgets a chat the API no longer has. */
export function forget(state: DemoState, id: string): void {
  keep(
    state,
    keptConversations(state).filter((kept) => kept.id !== id),
  );
}

/**
 * Adds an answered turn to the chat's conversation, making the conversation on its first turn;
 * the conversation's id.
 */
export async function recordTurn(
  client: OpenAI,
  state: DemoState,
  conversationId: string | undefined,
  turn: { user: string; assistant: string },
): Promise<string> {
  let id = conversationId;
  if (!id) {
    const title = turn.user.replace(/\s+/g, " ").slice(0, 60);
    id = (await client.conversations.create({ metadata: { title } })).id;
    keep(state, [{ id, title }, ...keptConversations(state)]);
  }
  await client.conversations.items.create(id, {
    items: [
      { type: "message", role: "user", content: turn.user },
      { type: "message", role: "assistant", content: turn.assistant },
    ],
  });
  return id;
}

/** A chat's turns, read back from its conversation's items; undefined when the API no longer has it. */
export async function readConversation(client: OpenAI, id: string): Promise<Message[] | undefined> {
  const messages: Message[] = [];
  try {
    for await (const item of client.conversations.items.list(id, { order: "asc" })) {
      if (item.type !== "message" || (item.role !== "user" && item.role !== "assistant")) continue;
      const content = item.content
        .map((part) => ("text" in part && typeof part.text === "string" ? part.text : ""))
        .join("");
      messages.push({ role: item.role, content });
    }
  } catch (error) {
    if (error instanceof OpenAI.NotFoundError) return undefined;
    throw error;
  }
  return messages;
}

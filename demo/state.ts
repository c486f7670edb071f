/**
 * The demo's shared state, in one place: the running engine's handle and SDK client, the
 * account and the keys this browser made, the conversation and the catalogue as last read. Views
 * read and change it; `changed` tells the others (the rate-limit window after each response, the
 * key after a switch).
 */
import type OpenAI from "openai";
import type { InferenceHandle } from "../src/index.js";
import type { Relay } from "./relay.js";

export type Engine = "auto" | "webllm" | "deterministic";

/** One turn. A user turn whose reply failed is kept (to show and retry) but never sent as context. */
export interface Message {
  role: "user" | "assistant";
  content: string;
  failed?: string;
  /** An assistant turn's facts, kept so they survive a reload. */
  details?: { model: string; stats: string; cut: boolean; simulated: boolean; json: boolean };
  /** The passages an answer from the person's documents cites, each with its file's name. */
  sources?: Source[];
}

export interface Source {
  filename: string;
  text: string;
}

export interface ModelRow {
  id: string;
  kind: "chat" | "embedding";
  context_window: number;
  pricing: { input_per_1m_tokens: number; output_per_1m_tokens: number };
  build: { format: "mlc" | "gguf"; model_id: string; estimated_memory_mb: number; download_mb: number | null } | null;
  builds: string[];
  engine: string;
  engine_reason: string;
  downloaded: boolean;
  loaded: boolean;
  runnable: { ok: boolean; reason: string | null };
}

/** A key this browser created: its secret is shown once by the API, so the demo keeps it to chat with. */
export interface KeptKey {
  id: string;
  key: string;
  prefix: string;
}

export interface DemoState {
  handle?: InferenceHandle;
  client?: OpenAI;
  /** `npm start`'s relay, which takes curl's and servers' requests to this tab. */
  relay?: Relay;
  engine: Engine;
  accountId?: string;
  running?: AbortController;
  rate?: Record<string, string>;
  history: Message[];
  models: ModelRow[];
  // Broadcast progress and a load's own reply travel on different channels, so a progress report
  // can arrive after the load has failed; it must not overwrite the failure.
  failedDownloads: Set<string>;
  changed: EventTarget;
}

export const storageKeys = {
  account: "webgpu-inference-demo-account",
  keys: "webgpu-inference-demo-keys",
  chatKey: "webgpu-inference-demo-chat-key",
  conversation: "webgpu-inference-demo-conversation",
  /** The API's conversation that the chat on screen is kept in. */
  conversationId: "webgpu-inference-demo-conversation-id",
};

export function createState(engine: Engine): DemoState {
  return { engine, history: [], models: [], failedDownloads: new Set(), changed: new EventTarget() };
}

export function keptKeys(): KeptKey[] {
  try {
    return JSON.parse(localStorage.getItem(storageKeys.keys) ?? "[]") as KeptKey[];
  } catch {
    return [];
  }
}

export function keepKey(key: KeptKey): void {
  localStorage.setItem(storageKeys.keys, JSON.stringify([...keptKeys().filter((kept) => kept.id !== key.id), key]));
}

/** Drops every kept secret but those of `active` keys: a revoked key's secret is no longer needed, so it is not kept. */
export function keepOnly(active: ReadonlySet<string>): void {
  localStorage.setItem(storageKeys.keys, JSON.stringify(keptKeys().filter((kept) => active.has(kept.id))));
}

/** Drops one key's secret (it was revoked). */
export function dropKept(id: string): void {
  localStorage.setItem(storageKeys.keys, JSON.stringify(keptKeys().filter((kept) => kept.id !== id)));
}

export function announce(state: DemoState, what: "rate" | "key" | "models" | "relay"): void {
  state.changed.dispatchEvent(new Event(what));
}

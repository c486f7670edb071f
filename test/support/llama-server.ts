/**
 * llama.cpp's own llama-server, built from the same source as our WebAssembly build
 * (scripts/llama-native.mjs), started on a free port of 127.0.0.1 for the peer suite (test/peer/).
 */
// @ts-expect-error: a plain JavaScript module
import { startLlamaServer as start } from "../../scripts/llama-native.mjs";

export interface LlamaServer {
  origin: string;
  /** What the server has written to stderr so far. */
  log(): string;
  stop(): void;
}

/** The server on `model` with `args`, once its `/health` answers (building it first if need be). */
export const startLlamaServer = start as (model: string, args: string[]) => Promise<LlamaServer>;

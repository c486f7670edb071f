import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { Catalogue } from "../../src/catalogue.js";
import { DeterministicEngine } from "../../src/engine/deterministic.js";
import { Scheduler } from "../../src/engine/scheduler.js";
import type { Engine } from "../../src/engine/types.js";
import { InferenceApp } from "../../src/http/app.js";
import { Tokenizers, type TokenizerSource } from "../../src/tokenizer.js";

const directory = resolve(import.meta.dirname, "../../.cache/tokenizers");

export const fileTokenizerSource: TokenizerSource = async (name) => ({
  tokenizer: JSON.parse(await readFile(resolve(directory, name, "tokenizer.json"), "utf8")),
  config: JSON.parse(await readFile(resolve(directory, name, "tokenizer_config.json"), "utf8")),
});

/** Tokenizers are slow to parse; one set serves every test file in a worker. */
export const tokenizers = new Tokenizers(fileTokenizerSource);

export const baseUrl = "https://app.example/openai";

export function makeApp(options: { engine?: Engine; maxQueued?: number; tokenDelayMs?: number } = {}) {
  let counter = 0;
  const engine = options.engine ?? new DeterministicEngine({ tokenizers, tokenDelayMs: options.tokenDelayMs ?? 0 });
  const app = new InferenceApp(baseUrl, {
    catalogue: Catalogue.create(),
    engine,
    scheduler: new Scheduler({ maxQueued: options.maxQueued ?? 4 }),
    tokenizers,
    clock: () => 1_700_000_000_000,
    newId: (prefix) => `${prefix}${String(++counter).padStart(4, "0")}`,
  });
  return { app, engine };
}

export function post(path: string, body: unknown, init: RequestInit = {}): Request {
  return new Request(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

export function sseEvents(text: string): string[] {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((frame) => {
      if (!frame.startsWith("data: ")) throw new Error(`not an SSE data frame: ${frame}`);
      return frame.slice(6);
    });
}

/** Chunks as OpenAI's static strategy cuts them: windows of tokens, neighbours sharing the overlap, every token in one. */
import { describe, expect, it } from "vitest";
import { chunkText } from "../../../src/retrieval/chunk.js";
import { tokenizers } from "../../support/unit-app.js";

describe("chunkText", () => {
  it("cuts windows of at most maxTokens, each starting maxTokens − overlap after the last", async () => {
    const tokenizer = await tokenizers.forFamily("llama3");
    const text = Array.from({ length: 300 }, (_, index) => `word${index}`).join(" ");
    const ids = tokenizer.encodeText(text);
    const chunks = chunkText(text, tokenizer, { maxTokens: 100, overlapTokens: 40 });
    expect(chunks.length).toBe(Math.ceil((ids.length - 100) / 60) + 1);
    for (const chunk of chunks) expect(tokenizer.encodeText(chunk).length).toBeLessThanOrEqual(101);
    expect(chunks[0]).toBe(tokenizer.decode(ids.slice(0, 100)).trim());
    expect(chunks[1]).toBe(tokenizer.decode(ids.slice(60, 160)).trim());
    expect(chunks.at(-1)!.endsWith("word299")).toBe(true);
  });

  it("gives one chunk for a short text and none for an empty one", async () => {
    const tokenizer = await tokenizers.forFamily("llama3");
    expect(chunkText("A short note.", tokenizer, { maxTokens: 800, overlapTokens: 400 })).toEqual(["A short note."]);
    expect(chunkText("   ", tokenizer, { maxTokens: 800, overlapTokens: 400 })).toEqual([]);
  });
});

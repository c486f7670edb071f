/**
 * The fast BPE for long words gives exactly the library's tokens, on every family, for runs of
 * one character, alternations, random words over small and large alphabets, and text that falls
 * back to bytes; and it is linear enough that a long run no longer holds the worker.
 */
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/engine/deterministic.js";
import { tokenizerFromFiles } from "../../src/model/tokenizer.js";
import { fileTokenizerSource } from "./support.js";

const families = ["llama3", "qwen2", "mistral", "gemma"] as const;

/** Long words of many shapes (each at least the fast path's length). */
function words(): string[] {
  const random = seededRandom(7);
  const pick = (alphabet: string, length: number) =>
    Array.from({ length }, () => alphabet[Math.floor(random() * alphabet.length)]).join("");
  const list = ["a", " ", "\n", "!", "1", "é", "Ġ", "▁", "的", "😀"].flatMap((character) =>
    [256, 257, 300, 1000, 1027].map((length) => character.repeat(length)),
  );
  list.push(
    "ab".repeat(300),
    "abc".repeat(200),
    "([{".repeat(150),
    "aaaab".repeat(100),
    "-".repeat(700),
    "/".repeat(400) + "-".repeat(400),
  );
  for (let index = 0; index < 40; index++)
    list.push(
      pick("ab", 256 + index * 37),
      pick("abcdefghij", 300 + index * 11),
      pick("etaoinshrdlu ", 500),
      pick("漢字かなカナ", 400),
      pick("aé😀\u0301 ", 600),
    );
  return list;
}

describe("the fast BPE for long words", () => {
  for (const name of families) {
    it(`${name}: the same tokens as the library's own encoder`, async () => {
      const files = await fileTokenizerSource(name);
      const fast = tokenizerFromFiles(files);
      // The library's own encoder: a second copy whose model keeps its bpe (the fast one only takes words of 256+ characters).
      const { TokenizerLoader } = await import("@lenml/tokenizers");
      const reference = TokenizerLoader.fromPreTrained({
        tokenizerJSON: files.tokenizer as never,
        tokenizerConfig: files.config as never,
      });
      for (const word of words())
        expect(fast.encode(word), JSON.stringify(word.slice(0, 20))).toEqual(
          reference.encode(word, { add_special_tokens: false }),
        );
    });
  }

  it("encodes a run of 400,000 characters several times faster than the library", async () => {
    const files = await fileTokenizerSource("llama3");
    const fast = tokenizerFromFiles(files);
    const { TokenizerLoader } = await import("@lenml/tokenizers");
    const reference = TokenizerLoader.fromPreTrained({
      tokenizerJSON: files.tokenizer as never,
      tokenizerConfig: files.config as never,
    });
    const text = "a".repeat(400_000);
    // The merge table is built once, on the first long word.
    fast.encode("b".repeat(300));
    let started = performance.now();
    const expected = reference.encode(text, { add_special_tokens: false });
    const slow = performance.now() - started;
    started = performance.now();
    expect(fast.encode(text)).toEqual(expected);
    const quick = performance.now() - started;
    console.log(
      `400,000 'a': library ${slow.toFixed(0)} ms, fast ${quick.toFixed(0)} ms (${(slow / quick).toFixed(1)}x)`,
    );
    expect(quick * 3).toBeLessThan(slow);
  });
});

/**
 * Our BPE gives exactly the library's tokens, on every family: for long words (runs of one
 * character, alternations, random words over small and large alphabets, text that falls back to
 * bytes), for short ones (the vocabulary's own entries as text, prose, code, random words), and
 * is linear enough that a long run no longer holds the worker. It also keeps the heap small.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../../src/engines/deterministic/engine.js";
import { tokenizerFromFiles } from "../../../src/prompt/tokenizer.js";
import { fileTokenizerSource } from "../../support/unit-app.js";

const families = ["llama3", "qwen2", "mistral", "gemma"] as const;

/** Random words of a given length over an alphabet, the same ones for the same seed. */
function picker(seed: number): (alphabet: string, length: number) => string {
  const random = seededRandom(seed);
  return (alphabet, length) => Array.from({ length }, () => alphabet[Math.floor(random() * alphabet.length)]).join("");
}

/** Long words of many shapes (each at least 256 characters, past the library's cache). */
function words(): string[] {
  const pick = picker(7);
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

/** Short words: every 11th vocabulary entry as the text it stands for, then prose, code and random words. */
function shortTexts(decode: (ids: number[]) => string, size: number): string[] {
  const pick = picker(11);
  const texts: string[] = [];
  for (let id = 0; id < size; id += 11) texts.push(decode([id]));
  texts.push(
    "The quick brown fox jumps over the lazy dog; it's 3.14159 o'clock, isn't it?",
    "function add(a, b) {\n\treturn a + b; // 1e-9\n}\n",
    "Überprüfung der Straße: naïve café, 東京タワー, Москва, 😀👍🏽.",
  );
  for (let index = 0; index < 400; index++)
    texts.push(pick("abcdefghijklmnopqrstuvwxyz ", 1 + (index % 40)), pick("aé😀字 ▁Ġ\n", 1 + (index % 12)));
  return texts;
}

describe("our BPE", () => {
  for (const name of families) {
    it(`${name}: the same tokens as the library's own encoder, for long words and short`, async () => {
      const files = await fileTokenizerSource(name);
      const fast = tokenizerFromFiles(files);
      // The library's own encoder: a second copy, built with its merges and its own bpe.
      const { TokenizerLoader } = await import("@lenml/tokenizers");
      const reference = TokenizerLoader.fromPreTrained({
        tokenizerJSON: files.tokenizer as never,
        tokenizerConfig: files.config as never,
      });
      const texts = [...words(), ...shortTexts((ids) => reference.decode(ids), fast.size)];
      for (const text of texts)
        expect(fast.encode(text), JSON.stringify(text.slice(0, 20))).toEqual(
          reference.encode(text, { add_special_tokens: false }),
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

  it("holds no merge as a JavaScript object, so a full garbage collection stays short", async () => {
    // V8's own collector, callable here: the heap measured is what a collection has to trace.
    setFlagsFromString("--expose-gc");
    const collect = runInNewContext("gc") as () => void;
    const heapUsed = () => {
      collect();
      collect();
      return process.memoryUsage().heapUsed;
    };
    for (const name of ["llama3", "gemma"] as const) {
      const before = heapUsed();
      // Loaded in a frame of its own, so the parsed file is garbage once it returns.
      const tokenizer = await (async () => tokenizerFromFiles(await fileTokenizerSource(name)))();
      const perEntry = (heapUsed() - before) / tokenizer.size;
      console.log(`${name}: ${perEntry.toFixed(0)} heap bytes per vocabulary entry after load`);
      // The vocabulary itself (a string and a map entry each) is about 70; the library's own
      // merges and the file's vocabulary object held 500–700 more.
      expect(perEntry).toBeLessThan(150);
      expect(tokenizer.decode(tokenizer.encode("still encodes"))).toBe("still encodes");
    }
  });
});

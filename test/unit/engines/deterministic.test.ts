import { describe, expect, it } from "vitest";
import { Catalogue } from "../../../src/catalogue/catalogue.js";
import { DeterministicEngine } from "../../../src/engines/deterministic/engine.js";
import { SampleBudget } from "../../../src/structured/sample.js";
import type { GenerationPart, GenerationRequest } from "../../../src/engines/contract.js";
import { renderChat, renderChatPieces, renderChatSegments } from "../../../src/prompt/templates.js";
import { encodePrompt } from "../../../src/prompt/tokenizer.js";
import { tokenizers } from "../../support/unit-app.js";

const model = Catalogue.create().get("alpha3:8b-instruct-q8_0")!;
const engine = new DeterministicEngine({ tokenizers, tokenDelayMs: 0 });
const llama = await tokenizers.forFamily(model.family);

function request(
  overrides: Partial<GenerationRequest["sampling"]> = {},
  content = "Tell me something.",
): GenerationRequest {
  return {
    model,
    input: {
      kind: "chat",
      messages: [{ role: "user", content }],
      segments: renderChatSegments(model.family, [{ role: "user", content }]).map((segment) => ({
        ...segment,
        tokens: encodePrompt(llama, segment.pieces),
      })),
      tokens: encodePrompt(llama, renderChatPieces(model.family, [{ role: "user", content }])),
      pieces: renderChatPieces(model.family, [{ role: "user", content }]),
    },
    sampling: {
      temperature: 1,
      topP: 1,
      maxTokens: 500,
      stop: [],
      presencePenalty: 0,
      frequencyPenalty: 0,
      ...overrides,
    },
  };
}

async function collect(parts: AsyncIterable<GenerationPart>) {
  let text = "";
  let finish: Extract<GenerationPart, { type: "finish" }> | undefined;
  let deltas = 0;
  for await (const part of parts) {
    if (part.type === "text-delta") {
      text += part.text;
      deltas++;
    } else finish = part;
  }
  return { text, finish: finish!, deltas };
}

describe("deterministic engine", () => {
  it("gives the same text for the same prompt and seed, another for another seed", async () => {
    const a = await collect(engine.generate(request(), new AbortController().signal));
    const b = await collect(engine.generate(request(), new AbortController().signal));
    const c = await collect(engine.generate(request({ seed: 99 }), new AbortController().signal));
    expect(a.text).toBe(b.text);
    expect(a.text).not.toBe(c.text);
    expect(a.finish.reason).toBe("stop");
  });

  it("counts prompt and completion tokens with the family's real tokenizer, one token per delta", async () => {
    const tokenizer = await tokenizers.forFamily("llama3");
    const result = await collect(engine.generate(request(), new AbortController().signal));
    expect(result.finish.usage.promptTokens).toBe(
      tokenizer.encode(renderChat("llama3", [{ role: "user", content: "Tell me something." }])).length,
    );
    expect(result.finish.usage.completionTokens).toBe(tokenizer.encode(result.text).length);
    expect(result.deltas).toBe(result.finish.usage.completionTokens);
  });

  it("honours max_tokens", async () => {
    const full = await collect(engine.generate(request(), new AbortController().signal));
    const cut = await collect(engine.generate(request({ maxTokens: 3 }), new AbortController().signal));
    expect(cut.finish).toMatchObject({ reason: "length", usage: { completionTokens: 3 } });
    expect(full.text.startsWith(cut.text)).toBe(true);
  });

  it("stops before a stop sequence and never leaks its start", async () => {
    const full = await collect(engine.generate(request(), new AbortController().signal));
    const stop = full.text.slice(12, 16);
    const stopped = await collect(engine.generate(request({ stop: [stop] }), new AbortController().signal));
    expect(stopped.text).toBe(full.text.slice(0, full.text.indexOf(stop)));
    expect(stopped.finish.reason).toBe("stop");
    const absent = await collect(engine.generate(request({ stop: ["zzz-never"] }), new AbortController().signal));
    expect(absent.text).toBe(full.text);
  });

  it("stops when aborted and reports the tokens produced so far", async () => {
    const slow = new DeterministicEngine({ tokenizers, tokenDelayMs: 5 });
    const controller = new AbortController();
    let text = "";
    let finish: GenerationPart | undefined;
    for await (const part of slow.generate(request(), controller.signal)) {
      if (part.type === "text-delta") {
        text += part.text;
        if (text.length > 5) controller.abort();
      } else finish = part;
    }
    expect(finish).toMatchObject({ type: "finish", reason: "abort" });
    const produced = (finish as Extract<GenerationPart, { type: "finish" }>).usage.completionTokens;
    expect(produced).toBeGreaterThan(0);
    expect(produced).toBe((await tokenizers.forFamily("llama3")).encode(text).length);
  });

  it("streams exactly the decoded reply, in time linear in its length, on every family's tokenizer", async () => {
    // Long, and with characters that byte-level and SentencePiece tokenizers split across tokens.
    const schema = {
      type: "array",
      minItems: 256,
      maxItems: 256,
      items: { type: "string", pattern: "^(é|😀|日本| word|\\n){40}$" },
    };
    for (const family of ["llama3", "gemma2", "mistral", "qwen2"] as const) {
      const tokenizer = await tokenizers.forFamily(family);
      for (const constraint of [undefined, { kind: "json" as const, schema: JSON.stringify(schema) }]) {
        const asked = {
          ...request({ maxTokens: 8_000 }),
          model: { ...model, family },
          ...(constraint ? { constraint } : {}),
        };
        const started = performance.now();
        const streamed = await collect(engine.generate(asked, new AbortController().signal));
        const elapsed = performance.now() - started;
        // What decoding the whole reply at once gives: the old way, quadratic when done per token.
        const prompt = asked.input.kind === "chat" ? asked.input.segments.map((segment) => segment.text).join("") : "";
        const ids = tokenizer.encode(engine.compose(asked, prompt, new SampleBudget(Infinity)));
        const label = `${family} ${constraint ? "schema" : "prose"}`;
        expect(streamed.text, label).toBe(tokenizer.decode(ids.slice(0, 8_000)));
        expect(streamed.finish.usage.completionTokens, label).toBe(Math.min(ids.length, 8_000));
        if (constraint) expect(streamed.finish.reason, label).toBe("length");
        // Each token decoded once: decoding every prefix again would be quadratic in the reply.
        expect(elapsed, label).toBeLessThan(3_000);
      }
    }
  });

  it("answers JSON mode with JSON, and refuses what it cannot honour", async () => {
    const json = await collect(
      engine.generate({ ...request(), constraint: { kind: "json" } }, new AbortController().signal),
    );
    expect(JSON.parse(json.text)).toMatchObject({ reply: expect.any(String) });
    await expect(
      collect(
        engine.generate(
          { ...request(), constraint: { kind: "grammar", grammar: 'root ::= "x"' } },
          new AbortController().signal,
        ),
      ),
    ).rejects.toMatchObject({ kind: "unsupported" });
  });
});

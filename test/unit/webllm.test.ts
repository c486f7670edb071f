import { describe, expect, it } from "vitest";
import { keepCompletionGrammar, toTokenLogprob, type WebLlmEngineInstance } from "../../src/engine/webllm.js";

/** The shape of web-llm's MLCEngine that matters here: completion() drops response_format on its way to asyncGenerate. */
function fakeEngine() {
  const seen: Record<string, unknown>[] = [];
  const engine = {
    async *asyncGenerate(_request: unknown, _model: string, _pipeline: unknown, _chatConfig: unknown, genConfig: Record<string, unknown>) {
      seen.push(genConfig);
      yield { choices: [] };
    },
    completions: {
      create: (request: { prompt: string; response_format?: unknown; max_tokens?: number }) =>
        engine.asyncGenerate(request, "m", {}, {}, { max_tokens: request.max_tokens }),
    },
    chat: {
      completions: {
        create: (request: { messages: unknown[]; response_format?: unknown }) => engine.asyncGenerate(request, "m", {}, {}, { response_format: request.response_format }),
      },
    },
  };
  return { engine, seen };
}

describe("keepCompletionGrammar", () => {
  it("gives a raw completion's grammar back to the generation config", async () => {
    const { engine, seen } = fakeEngine();
    keepCompletionGrammar(engine as unknown as WebLlmEngineInstance);
    const format = { type: "grammar", grammar: 'root ::= "a"' };
    for await (const _ of engine.completions.create({ prompt: "p", response_format: format, max_tokens: 3 }));
    expect(seen).toEqual([{ max_tokens: 3, response_format: format }]);
  });

  it("leaves completions without a format and chat requests as they were", async () => {
    const { engine, seen } = fakeEngine();
    keepCompletionGrammar(engine as unknown as WebLlmEngineInstance);
    for await (const _ of engine.completions.create({ prompt: "p", max_tokens: 2 }));
    for await (const _ of engine.chat.completions.create({ messages: [], response_format: { type: "json_object" } }));
    expect(seen).toEqual([{ max_tokens: 2 }, { response_format: { type: "json_object" } }]);
  });
});

describe("toTokenLogprob", () => {
  it("reports a token of no chance (web-llm's -Infinity, null once serialised) as OpenAI does, -9999, and fills missing bytes", () => {
    expect(
      toTokenLogprob({
        token: "é",
        logprob: -0.5,
        bytes: null,
        top_logprobs: [
          { token: "é", logprob: -0.5, bytes: [195, 169] },
          { token: "x", logprob: Number.NEGATIVE_INFINITY, bytes: [120] },
          { token: "y", logprob: null, bytes: [121] },
        ],
      }),
    ).toEqual({
      token: "é",
      logprob: -0.5,
      bytes: [195, 169],
      alternatives: [
        { token: "é", logprob: -0.5, bytes: [195, 169] },
        { token: "x", logprob: -9999, bytes: [120] },
        { token: "y", logprob: -9999, bytes: [121] },
      ],
    });
  });
});

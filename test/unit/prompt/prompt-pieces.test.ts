import { describe, expect, it } from "vitest";
import { modelFamilies, type ModelFamily } from "../../../src/catalogue/families.js";
import { type DeviceFeatures } from "../../../src/catalogue/builds.js";
import { type ModelEntry } from "../../../src/catalogue/entry.js";
import type { Engine, GenerationPart, GenerationRequest, ModelStatus } from "../../../src/engines/contract.js";
import type { EngineMessage } from "../../../src/prompt/messages.js";
import { verbatimConversation, verbatimMessages } from "../../../src/engines/webllm/engine.js";
import { seededRandom } from "../../../src/engines/deterministic/engine.js";
import {
  joinedPieces,
  piecesText,
  renderChat,
  renderChatPieces,
  renderChatSegments,
  type ChatSegment,
  type ToolSpec,
} from "../../../src/prompt/templates.js";
import { chatCompletionSchema } from "../../../src/core/wire/chat-completion.js";
import { chatUsage, makeApp, tokenizers } from "../../support/unit-app.js";

const conversation: EngineMessage[] = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Hi" },
  { role: "assistant", content: "Hello! How can I help?" },
  { role: "user", content: "A joke?" },
  { role: "assistant", content: "Why did the chicken cross the road?" },
  { role: "user", content: "Why?" },
];

describe("the prompt in pieces", () => {
  it("joins back to the whole rendering for every family, and cuts out each reply the template writes verbatim", () => {
    for (const family of modelFamilies) {
      for (const messages of [conversation, conversation.slice(1), conversation.slice(0, 2)]) {
        const segments = renderChatSegments(family, messages);
        expect(segments.map((segment) => segment.text).join("")).toBe(renderChat(family, messages));
        const replies = segments.filter((segment) => segment.reply).map((segment) => segment.text);
        // Mistral's layout moves the system prompt and spaces a reply from [/INST]: no reply is
        // ever written right after the earlier turns' prompt, so nothing is cut (no reuse).
        const expected =
          family === "mistral"
            ? []
            : messages.filter((message) => message.role === "assistant").map((message) => message.content);
        expect(replies).toEqual(expected);
      }
    }
  });

  it("does not cut a reply the template changes (trimmed) or rewrites (tool calls)", () => {
    const padded: EngineMessage[] = [
      { role: "user", content: "Hi" },
      { role: "assistant", content: " Hello " },
      { role: "user", content: "Bye" },
    ];
    expect(renderChatSegments("llama3", padded).some((segment) => segment.reply)).toBe(false);
    expect(renderChatSegments("qwen2", padded).filter((segment) => segment.reply)).toEqual([
      { text: " Hello ", reply: true, pieces: [{ text: " Hello ", control: false }] },
    ]);
    const calls: EngineMessage[] = [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "f", arguments: "{}" }] },
      { role: "tool", content: "ok", toolCallId: "call_1" },
    ];
    expect(renderChatSegments("qwen2", calls).map(({ text, reply }) => ({ text, reply }))).toEqual([
      { text: renderChat("qwen2", calls), reply: false },
    ]);
  });

  it("become web-llm messages that alternate, end with a user turn, and add nothing under the verbatim template", () => {
    const segments = renderChatSegments("qwen2", conversation).map((segment) => ({ ...segment, tokens: [] }));
    const messages = verbatimMessages(segments);
    expect(messages.map((message) => message.role)).toEqual(["user", "assistant", "user", "assistant", "user"]);
    expect(messages.map((message) => message.content).join("")).toBe(renderChat("qwen2", conversation));
    // What web-llm's Conversation adds around each message, and its system prompt: nothing.
    expect(verbatimConversation.system_template.replace("{system_message}", verbatimConversation.system_message)).toBe(
      "",
    );
    expect([
      verbatimConversation.roles.user,
      verbatimConversation.roles.assistant,
      verbatimConversation.role_content_sep,
      verbatimConversation.role_empty_sep,
      ...verbatimConversation.seps,
    ]).toEqual(["", "", "", "", ""]);
    expect(verbatimConversation.system_prefix_token_ids).toBeNull();
  });
});

/**
 * The cut's definition, rendered the slow way: an earlier reply is cut out where the rendering of
 * the turns before it, followed by the reply's text, begins the whole prompt (and no control token
 * of the prompt falls inside that text). Each reply renders its own prefix: quadratic, a test oracle.
 */
function definedReplies(family: ModelFamily, messages: readonly EngineMessage[], tools: readonly ToolSpec[]) {
  const pieces = renderChatPieces(family, messages, tools);
  const whole = piecesText(pieces);
  const controls: [number, number][] = [];
  pieces.reduce((start, piece) => {
    if (piece.control) controls.push([start, start + piece.text.length]);
    return start + piece.text.length;
  }, 0);
  const replies: { start: number; text: string }[] = [];
  let position = 0;
  messages.forEach((message, index) => {
    if (message.role !== "assistant" || message.toolCalls?.length || message.content === "") return;
    const before = renderChat(family, messages.slice(0, index), tools);
    const end = before.length + message.content.length;
    if (before.length < position || !whole.startsWith(before + message.content)) return;
    if (controls.some(([start, stop]) => start < end && stop > before.length)) return;
    replies.push({ start: before.length, text: message.content });
    position = end;
  });
  return replies;
}

function cutReplies(segments: readonly ChatSegment[]) {
  const replies: { start: number; text: string }[] = [];
  segments.reduce((start, segment) => {
    if (segment.reply) replies.push({ start, text: segment.text });
    return start + segment.text.length;
  }, 0);
  return replies;
}

function randomConversation(random: () => number): EngineMessage[] {
  const texts = ["", " ", "Hi", " padded ", "two\nlines\n", "<|im_end|>", "[/INST]", "turn"];
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  return Array.from({ length: 1 + Math.floor(random() * 8) }, (): EngineMessage => {
    const role = pick(["system", "user", "user", "assistant", "assistant", "assistant", "tool"] as const);
    if (role === "tool") return { role, content: pick(texts), toolCallId: "call_1" };
    if (role === "assistant" && random() < 0.2)
      return { role, content: pick(texts), toolCalls: [{ id: "call_1", name: "f", arguments: "{}" }] };
    return { role, content: pick(texts) };
  });
}

describe("cutting the prompt at earlier replies", () => {
  const tools: ToolSpec[] = [{ name: "f", parameters: { type: "object", properties: {} } }];

  it("cuts where the definition does, into segments whose pieces are the whole prompt's, for random conversations on every family, with and without tools", () => {
    const random = seededRandom(26);
    for (let trial = 0; trial < 400; trial++) {
      const messages = randomConversation(random);
      for (const family of modelFamilies) {
        for (const given of [[], tools]) {
          const name = `${family}, ${given.length} tools: ${JSON.stringify(messages)}`;
          const segments = renderChatSegments(family, messages, given);
          const cut = cutReplies(segments);
          const defined = definedReplies(family, messages, given);
          // Every cut is one the definition allows; every reply with words in it that the
          // definition allows is cut (a reply of one space can meet Mistral's spacing by chance).
          expect(defined, name).toEqual(expect.arrayContaining(cut));
          expect(cut, name).toEqual(expect.arrayContaining(defined.filter((reply) => reply.text.trim() !== "")));
          // The segments' pieces are the whole prompt's, control tokens where they were.
          expect(joinedPieces(segments), name).toEqual(renderChatPieces(family, messages, given));
        }
      }
    }
  });

  const conversation = (count: number): EngineMessage[] =>
    Array.from({ length: count }, (_, index) => ({
      role: index % 2 ? "assistant" : "user",
      content: `turn ${index}`,
    }));
  /** The fastest of `runs` runs, in milliseconds: the least disturbed by the machine's other work. */
  const fastest = (work: () => unknown, runs = 9) =>
    Math.min(
      ...Array.from({ length: runs }, () => {
        const started = performance.now();
        work();
        return performance.now() - started;
      }),
    );

  it("takes time linear in the turns: four times the turns take at most eight times as long (a quadratic cut, 16)", () => {
    // Sizes whose objects stay in the young generation: past it, the collector's work per turn grows on some hosts, whatever the algorithm.
    const [short, long] = [conversation(500), conversation(2_000)];
    const cut = (messages: EngineMessage[]) => () => renderChatSegments("qwen2", messages);
    fastest(cut(long));
    const ratio = fastest(cut(long)) / fastest(cut(short));
    expect(ratio).toBeLessThan(8);
  });

  it("encodes 2,000 turns' segments one by one in at most four times the whole prompt's encoding, on every family", async () => {
    // Each segment is one encoding: a cost per encoding (Gemma's table of thousands of added
    // tokens, once copied per call) made Gemma's segments 75 times the whole.
    const messages = conversation(2_000);
    for (const family of modelFamilies) {
      const tokenizer = await tokenizers.forFamily(family);
      const segments = renderChatSegments(family, messages);
      const pieces = renderChatPieces(family, messages);
      const whole = fastest(() => tokenizer.encodePieces(pieces), 3);
      const apart = fastest(() => segments.forEach((segment) => tokenizer.encodePieces(segment.pieces)), 3);
      expect(apart / whole, family).toBeLessThan(4);
    }
  });
});

class PrefixCachingEngine implements Engine {
  readonly name = "prefix-caching";
  seen: GenerationRequest[] = [];
  constructor(private readonly prefilled: number) {}
  async device(): Promise<DeviceFeatures> {
    return { webgpu: true, features: new Set() };
  }
  async status(): Promise<ModelStatus> {
    return { downloaded: true, loaded: true, runnable: { ok: true, reason: null }, build: null };
  }
  async load(_model: ModelEntry): Promise<void> {}
  async *generate(request: GenerationRequest): AsyncGenerator<GenerationPart> {
    this.seen.push(request);
    yield { type: "text-delta", text: "Fine." };
    yield { type: "finish", reason: "stop", usage: { promptTokens: this.prefilled, completionTokens: 2 } };
  }
}

describe("billing a prompt whose prefix the engine had cached", () => {
  it("bills the whole prompt as counted and reports the rest as cached_tokens, as the hosted API does", async () => {
    const engine = new PrefixCachingEngine(7);
    const { app, post } = await makeApp({ engine });
    const wire = conversation.map(({ role, content }) => ({ role, content }));
    const body = chatCompletionSchema.parse(
      await (
        await app.handle(post("/v1/chat/completions", { model: "gamma-7b-instruct-v0.3", messages: wire }))
      ).json(),
    );
    const input = engine.seen[0]!.input;
    expect(input.kind).toBe("chat");
    const counted = (await tokenizers.forFamily("mistral")).encode(renderChat("mistral", conversation)).length;
    expect(input.kind === "chat" && input.segments.map((segment) => segment.text).join("")).toBe(
      renderChat("mistral", conversation),
    );
    expect(body.usage).toEqual(chatUsage(counted, 2, counted - 7));
  });

  it("bills what an engine saw when it saw more than we counted, and reports nothing cached", async () => {
    const engine = new PrefixCachingEngine(100_000);
    const { app, post } = await makeApp({ engine });
    const body = chatCompletionSchema.parse(
      await (
        await app.handle(
          post("/v1/chat/completions", {
            model: "gamma-7b-instruct-v0.3",
            messages: [{ role: "user", content: "Hi" }],
          }),
        )
      ).json(),
    );
    expect(body.usage).toEqual(chatUsage(100_000, 2));
  });
});

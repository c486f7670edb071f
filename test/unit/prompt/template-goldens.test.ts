/**
 * Our renderer against each family's official chat template, rendered by a Jinja engine
 * (@huggingface/jinja, which follows transformers: `tojson` writes Python's spacing and a string
 * `is iterable`). The templates are test data in test/fixtures/templates/, sources in SOURCES.md.
 * Where an official template defines nothing (Gemma's tools, Llama's parallel calls, a system
 * message for Gemma), the documented choice is checked in structured.test.ts instead.
 */
import { Template } from "@huggingface/jinja";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { ModelFamily } from "../../../src/catalogue/families.js";
import type { EngineMessage } from "../../../src/prompt/messages.js";
import { pythonJson } from "../../../src/prompt/python-json.js";
import { renderChat, type ToolSpec } from "../../../src/prompt/templates.js";
import { tokenizers } from "../../support/unit-app.js";

function template(file: string): Template {
  return new Template(readFileSync(resolve(import.meta.dirname, "../../fixtures/templates", file), "utf8"));
}

const official = {
  llama3: template("meta-llama-Meta-Llama-3-8B-Instruct.jinja"),
  llama31: template("meta-llama-Llama-3.1-8B-Instruct.jinja"),
  gemma2: template("google-gemma-2-9b-it.jinja"),
  mistral: template("mistralai-Mistral-7B-Instruct-v0.3.jinja"),
  qwen2: template("Qwen-Qwen2-7B-Instruct.jinja"),
  qwen25: template("Qwen-Qwen2.5-7B-Instruct.jinja"),
};

const specialTokens = {
  llama3: { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" },
  gemma2: { bos_token: "<bos>", eos_token: "<eos>" },
  mistral: { bos_token: "<s>", eos_token: "</s>" },
  qwen2: { bos_token: "", eos_token: "<|im_end|>" },
} satisfies Record<ModelFamily, unknown>;

/** Messages as transformers takes them: calls with their arguments as objects. */
function templateMessages(messages: readonly EngineMessage[]) {
  return messages.map((message) => ({
    role: message.role,
    content: message.content,
    ...(message.toolCalls?.length
      ? {
          tool_calls: message.toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: JSON.parse(call.arguments) },
          })),
        }
      : {}),
    ...(message.toolCallId ? { tool_call_id: message.toolCallId } : {}),
  }));
}

function renderOfficial(
  which: keyof typeof official,
  family: ModelFamily,
  messages: readonly EngineMessage[],
  tools: readonly ToolSpec[] = [],
): string {
  return official[which].render({
    ...specialTokens[family],
    messages: templateMessages(messages),
    ...(tools.length ? { tools: tools.map((tool) => ({ type: "function", function: tool })) } : {}),
    add_generation_prompt: true,
  });
}

const weather: ToolSpec = {
  name: "get_weather",
  description: "Current weather in a city, with the unit to use",
  parameters: {
    type: "object",
    properties: { city: { type: "string", description: "A city's name" }, unit: { enum: ["celsius", "fahrenheit"] } },
    required: ["city"],
  },
};
const lights: ToolSpec = {
  name: "set_lights",
  description: "Turns the lights on or off",
  parameters: {
    type: "object",
    properties: {
      on: { type: "boolean" },
      level: { type: "number" },
      rooms: { type: "array", items: { type: "string" } },
    },
    required: ["on"],
  },
};
const tools = [weather, lights];

/** Ids of nine alphanumerics, which Mistral's template requires. */
const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) });

const plain: Record<string, EngineMessage[]> = {
  "one user turn": [{ role: "user", content: "Hi" }],
  "multi-turn": [
    { role: "user", content: "Hi" },
    { role: "assistant", content: "Hello! How can I help?" },
    { role: "user", content: "Tell me a joke.\nA short one." },
    { role: "assistant", content: "Why did the chicken cross the road?" },
    { role: "user", content: "  Why?  " },
  ],
  unicode: [
    { role: "user", content: 'Ça va? 日本語 🙂 "quoted" \\ back' },
    { role: "assistant", content: "Très bien." },
    { role: "user", content: "Et toi?" },
  ],
};
const withSystem: Record<string, EngineMessage[]> = {
  "system, then one user turn": [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Hi" },
  ],
  "system and multi-turn": [{ role: "system", content: "Answer in French." }, ...plain["multi-turn"]!],
};

const toolConversations: Record<string, EngineMessage[]> = {
  "tools, one user turn": [{ role: "user", content: "Weather in Oslo?" }],
  "a call and its JSON result": [
    { role: "user", content: "Weather in Oslo?" },
    {
      role: "assistant",
      content: "",
      toolCalls: [call("a1b2c3d4e", "get_weather", { city: "Oslo", unit: "celsius" })],
    },
    { role: "tool", content: '{"temperature": 3, "sky": "clear"}', toolCallId: "a1b2c3d4e" },
  ],
  "a call, its result, an answer and a new question": [
    { role: "user", content: "Weather in Oslo?" },
    { role: "assistant", content: "", toolCalls: [call("a1b2c3d4e", "get_weather", { city: "Oslo" })] },
    { role: "tool", content: '{"temperature": 3}', toolCallId: "a1b2c3d4e" },
    { role: "assistant", content: "It is 3 degrees in Oslo." },
    { role: "user", content: "Turn the lights on in the hall, at 0.5." },
  ],
  "arguments with nesting, numbers and unicode": [
    { role: "user", content: "Lights!" },
    {
      role: "assistant",
      content: "",
      toolCalls: [call("z9y8x7w6v", "set_lights", { on: true, level: 0.25, rooms: ["hall", "kök"] })],
    },
    { role: "tool", content: '[1, 2, {"ok": true}]', toolCallId: "z9y8x7w6v" },
  ],
};
const parallel: EngineMessage[] = [
  { role: "user", content: "Weather in Oslo and Rome, and lights on." },
  {
    role: "assistant",
    content: "",
    toolCalls: [
      call("a1b2c3d4e", "get_weather", { city: "Oslo" }),
      call("f5g6h7i8j", "get_weather", { city: "Rome" }),
      call("k1l2m3n4o", "set_lights", { on: true }),
    ],
  },
  { role: "tool", content: '{"temperature": 3}', toolCallId: "a1b2c3d4e" },
  { role: "tool", content: '{"temperature": 21}', toolCallId: "f5g6h7i8j" },
  { role: "tool", content: "done", toolCallId: "k1l2m3n4o" },
];
const system = (conversation: EngineMessage[]): EngineMessage[] => [
  { role: "system", content: "You control a smart home." },
  ...conversation,
];

describe("official templates, byte for byte", () => {
  it("Llama 3: plain chat, with and without a system message (Meta-Llama-3-8B-Instruct)", () => {
    for (const conversation of [...Object.values(plain), ...Object.values(withSystem)]) {
      expect(renderChat("llama3", conversation)).toBe(renderOfficial("llama3", "llama3", conversation));
    }
  });

  it("Llama 3 with tools: Llama 3.1's JSON tool calling, results as JSON-encoded ipython turns", () => {
    const text = { role: "tool", content: "sunny, 3 degrees", toolCallId: "a1b2c3d4e" } as const;
    const textResult = [...toolConversations["a call and its JSON result"]!.slice(0, 2), text];
    for (const conversation of [...Object.values(toolConversations), textResult]) {
      for (const messages of [conversation, system(conversation)]) {
        expect(renderChat("llama3", messages, tools)).toBe(renderOfficial("llama31", "llama3", messages, tools));
      }
    }
    // An assistant turn with text beside its call: 3.1 keeps only the call.
    const both: EngineMessage[] = [
      { role: "user", content: "Oslo?" },
      { role: "assistant", content: "Let me check.", toolCalls: [call("a1b2c3d4e", "get_weather", { city: "Oslo" })] },
    ];
    expect(renderChat("llama3", both, tools)).toBe(renderOfficial("llama31", "llama3", both, tools));
  });

  it("Gemma 2: plain chat (google/gemma-2-9b-it, which has no system role)", () => {
    for (const conversation of Object.values(plain)) {
      expect(renderChat("gemma2", conversation)).toBe(renderOfficial("gemma2", "gemma2", conversation));
    }
  });

  it("Mistral v0.3: plain chat, system before the last user turn, tools, calls with ids, JSON results as values, parallel calls", () => {
    for (const conversation of [...Object.values(plain), ...Object.values(withSystem)]) {
      expect(renderChat("mistral", conversation)).toBe(renderOfficial("mistral", "mistral", conversation));
    }
    const jsonResults = [
      ...Object.values(toolConversations),
      parallel.slice(0, 4).concat([{ role: "tool", content: '"done"', toolCallId: "k1l2m3n4o" }]),
    ];
    for (const conversation of jsonResults)
      expect(renderChat("mistral", conversation, tools)).toBe(
        renderOfficial("mistral", "mistral", conversation, tools),
      );
    // The template puts the system message only into a conversation that ends with a user turn.
    const endsWithUser = toolConversations["a call, its result, an answer and a new question"]!;
    expect(renderChat("mistral", system(endsWithUser), tools)).toBe(
      renderOfficial("mistral", "mistral", system(endsWithUser), tools),
    );
  });

  it("Mistral v0.3 where the template and mistral-common differ: mistral-common's way", () => {
    // InstructTokenizerV3._prepare_tool_result: a result that is not JSON is a JSON string.
    const text: EngineMessage[] = [
      ...toolConversations["a call and its JSON result"]!.slice(0, 2),
      { role: "tool", content: "sunny", toolCallId: "a1b2c3d4e" },
    ];
    expect(
      renderChat("mistral", text, tools).endsWith(
        '[TOOL_RESULTS] {"content": "sunny", "call_id": "a1b2c3d4e"}[/TOOL_RESULTS]',
      ),
    ).toBe(true);
    // The system prompt goes before the last user message even when tool turns follow it.
    const afterTools = renderChat("mistral", system(toolConversations["a call and its JSON result"]!), tools);
    expect(afterTools).toContain("[INST] You control a smart home.\n\nWeather in Oslo?[/INST]");
    // Tool.model_dump() writes a missing description as "".
    expect(
      renderChat(
        "mistral",
        [{ role: "user", content: "Hi" }],
        [{ name: "noop", parameters: { type: "object", properties: {} } }],
      ),
    ).toBe(
      '<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "noop", "description": "", "parameters": {"type": "object", "properties": {}}}}][/AVAILABLE_TOOLS][INST] Hi[/INST]',
    );
  });

  it("Qwen2: plain chat (Qwen2-7B-Instruct), and Hermes tools (Qwen2.5's template with Qwen2's default system message)", () => {
    for (const conversation of [...Object.values(plain), ...Object.values(withSystem)]) {
      expect(renderChat("qwen2", conversation)).toBe(renderOfficial("qwen2", "qwen2", conversation));
    }
    const both: EngineMessage[] = [
      { role: "user", content: "Oslo?" },
      { role: "assistant", content: "Let me check.", toolCalls: [call("a1b2c3d4e", "get_weather", { city: "Oslo" })] },
    ];
    for (const conversation of [...Object.values(toolConversations), parallel, both]) {
      for (const messages of [conversation, system(conversation)]) {
        const expected = renderOfficial("qwen25", "qwen2", messages, tools).replace(
          "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
          "You are a helpful assistant.",
        );
        expect(renderChat("qwen2", messages, tools)).toBe(expected);
      }
    }
  });

  it("count the same tokens as the official rendering, control tokens included", async () => {
    const conversation = toolConversations["a call and its JSON result"]!;
    const llama = await tokenizers.forFamily("llama3");
    expect(llama.encode(renderChat("llama3", conversation, tools))).toEqual(
      llama.encode(renderOfficial("llama31", "llama3", conversation, tools)),
    );
    const qwen = await tokenizers.forFamily("qwen2");
    const qwenOfficial = renderOfficial("qwen25", "qwen2", conversation, tools).replace(
      "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
      "You are a helpful assistant.",
    );
    expect(qwen.encode(renderChat("qwen2", conversation, tools))).toEqual(qwen.encode(qwenOfficial));
  });
});

describe("Python's json.dumps spacing", () => {
  it("matches the Jinja engine's tojson, compact and indented", () => {
    const tojson = new Template("{{ value | tojson }}|{{ value | tojson(indent=4) }}");
    const values: unknown[] = [
      { a: 1, b: [1, 2.5, "x", null, true], c: {}, d: [], e: { nested: { deep: ["é", '\n\t"\\'] } } },
      [],
      "plain",
      -0.001,
      1e21,
    ];
    for (const value of values) expect(`${pythonJson(value)}|${pythonJson(value, 4)}`).toBe(tojson.render({ value }));
  });
});

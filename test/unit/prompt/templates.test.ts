import { describe, expect, it } from "vitest";
import type { EngineMessage } from "../../../src/prompt/messages.js";
import { renderChat } from "../../../src/prompt/templates.js";
import { tokenizers } from "../../support/unit-app.js";

const conversation: EngineMessage[] = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Hi" },
  { role: "assistant", content: "Hello!" },
  { role: "user", content: "Bye" },
];

describe("chat templates", () => {
  it("render each family's published template", () => {
    expect(renderChat("llama3", conversation)).toBe(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" +
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    );
    expect(renderChat("gemma2", conversation)).toBe(
      "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n",
    );
    expect(renderChat("mistral", conversation)).toBe("<s>[INST] Hi[/INST] Hello!</s>[INST] Be brief.\n\nBye[/INST]");
    expect(renderChat("qwen2", conversation)).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n",
    );
    expect(renderChat("qwen2", [{ role: "user", content: "Hi" }])).toBe(
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
  });
});

describe("family tokenizers", () => {
  it("encode each family's control tokens as single tokens", async () => {
    const llama = await tokenizers.forFamily("llama3");
    expect(llama.encode("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello world")).toEqual([
      128000, 128006, 882, 128007, 271, 9906, 1917,
    ]);
    const qwen = await tokenizers.forFamily("qwen2");
    expect(qwen.encode("<|im_start|>user\nHello world<|im_end|>")).toEqual([151644, 872, 198, 9707, 1879, 151645]);
    const gemma = await tokenizers.forFamily("gemma2");
    expect(gemma.encode("<start_of_turn>user\nHello world")).toEqual([105, 2364, 107, 9259, 1902]);
  });

  it("derive Mistral v0.3's vocabulary exactly: 768 control tokens, then v0.1's pieces", async () => {
    const mistral = await tokenizers.forFamily("mistral");
    // [INST]=3, [/INST]=4, "▁Hello"=23325 (22557 in v0.1, shifted by 768).
    expect(mistral.encode("<s>[INST] Hello world![/INST]")).toEqual([1, 3, 23325, 2294, 29576, 4]);
    expect(mistral.decode([1, 3, 23325, 2294, 29576, 4])).toBe("<s>[INST] Hello world![/INST]");
    expect(mistral.encode("[TOOL_CALLS]")).toEqual([5]);
  });
});

/** The model families and the tokenizer file each counts with (scripts/tokenizers.mjs says where each comes from). */
export const modelFamilies = ["llama3", "gemma2", "mistral", "qwen2"] as const;
export type ModelFamily = (typeof modelFamilies)[number];

export const tokenizerNames: Record<ModelFamily, string> = {
  llama3: "llama3",
  gemma2: "gemma",
  mistral: "mistral",
  qwen2: "qwen2",
};

/**
 * Control tokens of a family's later releases that its tokenizer file names otherwise: Llama 3.1
 * named three of Llama 3's reserved tokens. An upstream serving such a release reads them as
 * control tokens, so the text it is sent is defused of them too (`Tokenizer.defuse`).
 */
export const laterControlTokens: Record<ModelFamily, readonly string[]> = {
  llama3: ["<|finetune_right_pad_id|>", "<|eom_id|>", "<|python_tag|>"],
  gemma2: [],
  mistral: [],
  qwen2: [],
};

/** Where each tokenizer file is, below the tokenizer base URL. */
export function tokenizerFileName(name: string): string {
  return `${name}.json.gz`;
}

/**
 * The special tokens put before a client's raw text prompt (a legacy completion's): each family's
 * BOS where its tokenizer adds one (Llama 3's post-processor, Gemma's and Mistral's
 * `add_bos_token`; `tokenizer.ggml.add_bos_token` in their GGUFs), as llama.cpp, llama-server and
 * vLLM tokenize a text prompt. Qwen2 has no BOS. A prompt of token ids is fed as it is, with none.
 */
export const rawPromptPrefixTokens: Record<ModelFamily, number> = {
  llama3: 1,
  gemma2: 1,
  mistral: 1,
  qwen2: 0,
};

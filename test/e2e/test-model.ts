import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { ModelEntryInput } from "../../src/index.js";

const template = readFileSync(resolve(import.meta.dirname, "../../scripts/test-model-entry.json"), "utf8");

/** The generated random-weight Qwen2 model, as a catalogue entry whose artifacts `origin` serves under `/<weights>/`. */
export function testModelEntry(origin: string, weights = "test-model"): ModelEntryInput {
  return JSON.parse(template.replaceAll("{origin}", origin).replaceAll("{weights}", weights)) as ModelEntryInput;
}

export const testModelId = (JSON.parse(template) as ModelEntryInput).id;

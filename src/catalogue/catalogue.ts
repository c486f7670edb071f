/**
 * The model catalogue: the seed (src/catalogue/seed.ts) plus an app's entries, each validated as a
 * model that can serve, looked up by public ID.
 */
import { seedCatalogue } from "./seed.js";
import { servableModelSchema, type ModelEntry, type ModelEntryInput } from "./entry.js";

export class Catalogue {
  readonly #models: Map<string, ModelEntry>;

  constructor(models: Iterable<ModelEntry>) {
    this.#models = new Map([...models].map((model) => [model.id, model]));
  }

  /**
   * The seed plus an app's entries. An entry with a seed ID replaces fields of that model;
   * a new ID must be complete.
   */
  static create(additions: readonly (Partial<ModelEntryInput> & { id: string })[] = []): Catalogue {
    const merged = new Map<string, Partial<ModelEntryInput>>(seedCatalogue.map((model) => [model.id, model]));
    for (const addition of additions) merged.set(addition.id, { ...merged.get(addition.id), ...addition });
    return new Catalogue([...merged.values()].map((model) => servableModelSchema.parse(model)));
  }

  get(id: string): ModelEntry | undefined {
    return this.#models.get(id);
  }

  list(): ModelEntry[] {
    return [...this.#models.values()];
  }
}

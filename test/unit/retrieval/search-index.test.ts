/**
 * The hybrid index: scores in [0, 1], words and meaning mixed by weight, the best first, and
 * OpenAI's attribute filters.
 */
import { describe, expect, it } from "vitest";
import { matchesFilter } from "../../../src/retrieval/filters.js";
import { SearchIndex } from "../../../src/retrieval/search-index.js";
import { rewrittenQuery } from "../../../src/endpoints/vector-stores/search.js";

const unit = (...values: number[]) => {
  const length = Math.hypot(...values);
  return Float32Array.from(values, (value) => value / length);
};

const chunks = [
  { fileId: "a", text: "descale the kettle with vinegar", vector: unit(1, 0, 0) },
  { fileId: "b", text: "bake bread with flour and yeast", vector: unit(0, 1, 0) },
  { fileId: "c", text: "kettle warranty covers two years", vector: unit(0.6, 0.8, 0) },
];

describe("SearchIndex", () => {
  const index = new SearchIndex(chunks, 3);
  const all = { limit: 10, threshold: 0, allows: () => true };

  it("ranks by meaning alone, by words alone, and by both mixed", () => {
    const query = { vector: unit(0, 1, 0), text: "kettle" };
    const order = (weights: { embedding: number; text: number }) =>
      index.search([query], { ...all, weights }).map((hit) => chunks[hit.chunk]!.fileId);
    expect(order({ embedding: 1, text: 0 })).toEqual(["b", "c"]);
    // Both say "kettle" once in five words: a tie, in chunk order.
    expect(order({ embedding: 0, text: 1 })).toEqual(["a", "c"]);
    expect(order({ embedding: 0.5, text: 0.5 })[0]).toBe("c");
    for (const hit of index.search([query], { ...all, weights: { embedding: 0.5, text: 0.5 } })) {
      expect(hit.score).toBeGreaterThan(0);
      expect(hit.score).toBeLessThanOrEqual(1);
    }
  });

  it("keeps the limit, the threshold and the files allowed", () => {
    const query = { vector: unit(1, 1, 0), text: "kettle bread" };
    const weights = { embedding: 0.7, text: 0.3 };
    expect(index.search([query], { ...all, weights, limit: 1 })).toHaveLength(1);
    expect(index.search([query], { ...all, weights, threshold: 1.01 })).toEqual([]);
    const found = index.search([query], { ...all, weights, allows: (id) => id !== "c" });
    expect(found.map((hit) => chunks[hit.chunk]!.fileId).sort()).toEqual(["a", "b"]);
  });
});

describe("matchesFilter", () => {
  const attributes = { year: 2024, kind: "manual", public: true };
  it("compares as OpenAI's filters do, and combines with and/or", () => {
    expect(matchesFilter({ type: "eq", key: "kind", value: "manual" }, attributes)).toBe(true);
    expect(matchesFilter({ type: "ne", key: "missing", value: 1 }, attributes)).toBe(true);
    expect(matchesFilter({ type: "gt", key: "year", value: 2023 }, attributes)).toBe(true);
    expect(matchesFilter({ type: "lte", key: "year", value: 2023 }, attributes)).toBe(false);
    expect(matchesFilter({ type: "gt", key: "kind", value: 3 }, attributes)).toBe(false);
    expect(matchesFilter({ type: "in", key: "kind", value: ["faq", "manual"] }, attributes)).toBe(true);
    expect(matchesFilter({ type: "nin", key: "kind", value: ["manual"] }, attributes)).toBe(false);
    expect(
      matchesFilter(
        {
          type: "and",
          filters: [
            { type: "eq", key: "public", value: true },
            {
              type: "or",
              filters: [
                { type: "lt", key: "year", value: 2000 },
                { type: "eq", key: "kind", value: "manual" },
              ],
            },
          ],
        },
        attributes,
      ),
    ).toBe(true);
  });
});

describe("rewrittenQuery", () => {
  it("keeps the words that carry the subject, and a query of nothing else as it was", () => {
    expect(rewrittenQuery("How do I descale the kettle?")).toBe("descale kettle");
    expect(rewrittenQuery("What is it?")).toBe("What is it?");
  });
});

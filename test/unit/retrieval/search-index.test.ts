/**
 * The hybrid index: scores in [0, 1], words and meaning mixed by weight, the best first, and
 * OpenAI's attribute filters.
 */
import { describe, expect, it, vi } from "vitest";
import { dotsWasm } from "../../../src/retrieval/dots-wasm.js";
import { matchesFilter } from "../../../src/retrieval/filters.js";
import { SearchIndex } from "../../../src/retrieval/search-index.js";
import { VectorScan } from "../../../src/retrieval/vector-scan.js";
// @ts-expect-error: a plain JavaScript build script
import { assembleDots, dotsSource } from "../../../scripts/dots-wasm.mjs";
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

describe("VectorScan", () => {
  /** Random vectors of a seeded generator, each of `dimensions` values in [-1, 1]. */
  function vectors(count: number, dimensions: number, seed = 7): Float32Array[] {
    let state = seed;
    const random = () => ((state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32) * 2 - 1;
    return Array.from({ length: count }, () => Float32Array.from({ length: dimensions }, random));
  }

  it("is the module its text assembles to (node scripts/dots-wasm.mjs writes it)", async () => {
    expect(dotsSource(await assembleDots())).toBe(
      `// Written by scripts/dots-wasm.mjs from dots.wat: do not edit.\nexport const dotsWasm = "${dotsWasm}";\n`,
    );
  });

  it("gives each vector's dot product with the query, in SIMD and in the fallback alike, for any width", () => {
    for (const dimensions of [3, 16, 100, 384]) {
      const rows = vectors(37, dimensions, dimensions);
      const [query] = vectors(1, dimensions, 99);
      const exact = rows.map((row) => row.reduce((sum, value, index) => sum + value * query![index]!, 0));
      const scanned = (scan: VectorScan) => {
        rows.forEach((row, place) => scan.set(place, row));
        return [...scan.dots(query!)];
      };
      const simd = scanned(new VectorScan(rows.length, dimensions));
      const validate = vi.spyOn(WebAssembly, "validate").mockReturnValue(false);
      const fallback = scanned(new VectorScan(rows.length, dimensions));
      validate.mockRestore();
      simd.forEach((value, place) => expect(value).toBeCloseTo(exact[place]!, 4));
      fallback.forEach((value, place) => expect(value).toBeCloseTo(exact[place]!, 4));
    }
  });

  // Sizes past the processor's caches both: from one that fits them, the other's misses alone look superlinear.
  it("searches in time linear in the chunks: four times the chunks take at most ten times as long (a quadratic search, 16)", () => {
    const timed = (count: number) => {
      const index = new SearchIndex(
        vectors(count, 384).map((vector, place) => ({ fileId: `f${place % 7}`, text: `note ${place % 50}`, vector })),
        384,
      );
      const query = { vector: vectors(1, 384, 3)[0]!, text: "note 7" };
      const options = { limit: 10, threshold: 0, weights: { embedding: 0.7, text: 0.3 }, allows: () => true };
      for (let warm = 0; warm < 3; warm++) index.search([query], options);
      return Math.min(
        ...Array.from({ length: 9 }, () => {
          const started = performance.now();
          index.search([query], options);
          return performance.now() - started;
        }),
      );
    };
    expect(timed(40_000) / timed(10_000)).toBeLessThan(10);
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

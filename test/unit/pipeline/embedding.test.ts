/** Vectors as the endpoint writes them: cut to a size and scaled to length 1. */
import { describe, expect, it } from "vitest";
import { normalised } from "../../../src/pipeline/embedding.js";

describe("normalised", () => {
  it("scales a vector's first values to length 1, never past the vector's end, and leaves a zero vector zero", () => {
    expect(Array.from(normalised(Float32Array.of(3, 4, 12)))).toEqual([3 / 13, 4 / 13, 12 / 13].map(Math.fround));
    expect(Array.from(normalised(Float32Array.of(3, 4, 12), 2))).toEqual([0.6, 0.8].map(Math.fround));
    expect(Array.from(normalised(Float32Array.of(3, 4), 8))).toEqual([0.6, 0.8].map(Math.fround));
    expect(Array.from(normalised(new Float32Array(3)))).toEqual([0, 0, 0]);
  });
});

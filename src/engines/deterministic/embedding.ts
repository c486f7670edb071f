/**
 * The deterministic engine's vectors: a hashed bag of tokens. Each token adds ±1 to a few of the
 * vector's places, each place and sign drawn from a hash of its id, so a vector is a pure function
 * of the text, and texts that share tokens (words) point the same way: an app's CI can test its
 * search. A few places per token keep a short text's vector from being empty once cut short
 * (`dimensions`).
 */

/** The size of a vector when the catalogue gives none. */
export const defaultDimensions = 384;

/** The places each token adds to. */
const placesPerToken = 8;

/** A 32-bit mix of a token id and a place's number (MurmurHash3's finaliser): the place and its sign. */
function mixed(id: number, place: number): number {
  let value = Math.imul(id ^ Math.imul(place + 1, 0x9e3779b9), 0x85ebca6b);
  value = Math.imul(value ^ (value >>> 13), 0xc2b2ae35);
  return (value ^ (value >>> 16)) >>> 0;
}

export function hashedBagOfTokens(ids: readonly number[], dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  for (const id of ids) {
    for (let place = 0; place < placesPerToken; place++) {
      const hash = mixed(id, place);
      vector[hash % dimensions]! += hash & 0x8000_0000 ? -1 : 1;
    }
  }
  return vector;
}

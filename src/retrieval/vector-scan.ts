/**
 * An index's vectors, and the dot products of a query with every one of them: exact, and linear in
 * the index. The vectors live in the memory of a small WebAssembly SIMD module (./dots.wat), where
 * the scan runs four lanes at a time; where WebAssembly SIMD is missing, the same scan runs in
 * JavaScript over the same layout.
 */
import { dotsWasm } from "./dots-wasm.js";

/** Floats a vector takes in memory: its dimensions, padded to the module's 16 lanes. */
const strideOf = (dimensions: number) => Math.ceil(dimensions / 16) * 16;

type Dots = (vectors: number, query: number, count: number, stride: number, out: number) => void;

function base64Bytes(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  return Uint8Array.from(binary, (character) => character.charCodeAt(0));
}

export class VectorScan {
  readonly count: number;
  readonly dimensions: number;
  readonly #stride: number;
  readonly #memory: ArrayBuffer | WebAssembly.Memory;
  /** Byte offsets in the memory: the query, the products, the vectors. */
  readonly #query = 0;
  readonly #out: number;
  readonly #vectors: number;
  readonly #dots: Dots | undefined;

  constructor(count: number, dimensions: number) {
    this.count = count;
    this.dimensions = dimensions;
    this.#stride = strideOf(dimensions);
    this.#out = this.#stride * 4;
    this.#vectors = this.#out + Math.ceil(count / 4) * 16;
    const bytes = this.#vectors + count * this.#stride * 4;
    const module = base64Bytes(dotsWasm);
    if (WebAssembly.validate(module)) {
      const memory = new WebAssembly.Memory({ initial: Math.max(1, Math.ceil(bytes / 65_536)) });
      const instance = new WebAssembly.Instance(new WebAssembly.Module(module), { index: { memory } });
      this.#memory = memory;
      this.#dots = instance.exports.dots as Dots;
    } else this.#memory = new ArrayBuffer(bytes);
  }

  #buffer(): ArrayBuffer {
    return this.#memory instanceof WebAssembly.Memory ? this.#memory.buffer : this.#memory;
  }

  /** What the vectors take in memory. */
  get bytes(): number {
    return this.#buffer().byteLength;
  }

  /** Sets the vector at `place` (its first `dimensions` values). */
  set(place: number, vector: Float32Array): void {
    const row = new Float32Array(this.#buffer(), this.#vectors + place * this.#stride * 4, this.dimensions);
    row.set(vector.subarray(0, this.dimensions));
  }

  /** Each vector's dot product with `query`, in place order; the array is overwritten by the next scan. */
  dots(query: Float32Array): Float32Array {
    const buffer = this.#buffer();
    const padded = new Float32Array(buffer, this.#query, this.#stride);
    padded.fill(0);
    padded.set(query.subarray(0, this.dimensions));
    const out = new Float32Array(buffer, this.#out, this.count);
    if (this.#dots) {
      this.#dots(this.#vectors, this.#query, this.count, this.#stride, this.#out);
      return out;
    }
    const vectors = new Float32Array(buffer, this.#vectors, this.count * this.#stride);
    for (let place = 0, offset = 0; place < this.count; place++, offset += this.#stride) {
      let sum = 0;
      for (let index = 0; index < this.dimensions; index++) sum += vectors[offset + index]! * padded[index]!;
      out[place] = sum;
    }
    return out;
  }
}

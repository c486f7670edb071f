/** The indexer's reads of the database: what a request costs once nothing is left to index. */
import { describe, expect, it } from "vitest";
import { Indexer } from "../../../src/pipeline/indexing.js";
import type { Services } from "../../../src/pipeline/services.js";

describe("Indexer", () => {
  it("looks for pending files on a worker's first request and after a file is added, not on every request", async () => {
    let reads = 0;
    const services = {
      ready: Promise.resolve(),
      clock: () => 0,
      vectorStores: {
        pendingFiles: async () => {
          reads++;
          return [];
        },
      },
    } as unknown as Services;
    const indexer = new Indexer(services);
    await indexer.resume();
    await indexer.resume();
    expect(reads).toBe(1);
    await indexer.wake();
    await indexer.resume();
    expect(reads).toBe(2);
  });
});

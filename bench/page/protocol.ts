/** Messages between the benchmark page and its worker. */
export type BenchRequest =
  | { type: "bench:raw"; request: Record<string, unknown> }
  | { type: "bench:reload"; modelId: string; request: Record<string, unknown> }
  | { type: "bench:policy"; key: string; keyId: string; accountId: string; sizes: number[]; iterations: number }
  | { type: "bench:zero-setup" }
  | { type: "bench:zero-direct"; tokens: number };

export type BenchReply =
  | { kind: "chunk"; body: unknown }
  | { kind: "result"; body: unknown }
  | { kind: "done" }
  | { kind: "error"; message: string };

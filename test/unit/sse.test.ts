import { describe, expect, it } from "vitest";
import { frame, sseStream } from "../../src/http/sse.js";

async function* from(values: unknown[], failAfter?: number) {
  let index = 0;
  for (const value of values) {
    if (failAfter !== undefined && index++ === failAfter) throw new Error("engine exploded");
    yield value;
  }
}

describe("SSE writer", () => {
  it("writes data frames and ends with [DONE]", async () => {
    const stream = sseStream({ events: from([{ a: 1 }, { b: "x\ny" }]), onError: () => ({ error: { message: "", type: "server_error", code: null, param: null } }), onCancel: () => {} });
    expect(await new Response(stream).text()).toBe('data: {"a":1}\n\ndata: {"b":"x\\ny"}\n\ndata: [DONE]\n\n');
  });

  it("reports a failure after the first byte as an error frame, then stops", async () => {
    const stream = sseStream({
      events: from([{ a: 1 }, { a: 2 }], 1),
      onError: (error) => ({ error: { message: (error as Error).message, type: "server_error", code: "internal_error", param: null } }),
      onCancel: () => {},
    });
    const text = await new Response(stream).text();
    expect(text).toBe('data: {"a":1}\n\ndata: {"error":{"message":"engine exploded","type":"server_error","code":"internal_error","param":null}}\n\n');
  });

  it("tells the producer when the reader goes away, and drains the source to its end", async () => {
    let cancelled = false;
    let drained = false;
    async function* untilCancelled() {
      for (let index = 0; !cancelled; index++) yield { index };
      yield { final: true };
      drained = true;
    }
    const reader = sseStream({ events: untilCancelled(), onError: () => ({ error: { message: "", type: "server_error", code: null, param: null } }), onCancel: () => (cancelled = true) }).getReader();
    await reader.read();
    await reader.cancel();
    expect(cancelled).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(drained).toBe(true);
  });

  it("encodes one frame", () => {
    expect(new TextDecoder().decode(frame("[DONE]"))).toBe("data: [DONE]\n\n");
  });
});

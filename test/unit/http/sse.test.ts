import { describe, expect, it } from "vitest";
import { frame, mergeTextChunks, sseStream } from "../../../src/http/sse.js";
import { readSse } from "../../../src/pipeline/upstream/read-sse.js";

async function* from(values: unknown[], failAfter?: number) {
  let index = 0;
  for (const value of values) {
    if (failAfter !== undefined && index++ === failAfter) throw new Error("engine exploded");
    yield value;
  }
}

describe("SSE writer", () => {
  it("writes data frames and ends with [DONE]", async () => {
    const stream = sseStream({
      events: from([{ a: 1 }, { b: "x\ny" }]),
      onError: () => ({ error: { message: "", type: "server_error", code: null, param: null } }),
      onCancel: () => {},
    });
    expect(await new Response(stream).text()).toBe('data: {"a":1}\n\ndata: {"b":"x\\ny"}\n\ndata: [DONE]\n\n');
  });

  it("reports a failure after the first byte as an error frame, then stops", async () => {
    const stream = sseStream({
      events: from([{ a: 1 }, { a: 2 }], 1),
      onError: (error) => ({
        error: { message: (error as Error).message, type: "server_error", code: "internal_error", param: null },
      }),
      onCancel: () => {},
    });
    const text = await new Response(stream).text();
    expect(text).toBe(
      'data: {"a":1}\n\ndata: {"error":{"message":"engine exploded","type":"server_error","code":"internal_error","param":null}}\n\n',
    );
  });

  it("frames the Responses API's events by name, with no [DONE], and a failure as its numbered error event", async () => {
    const stream = sseStream({
      named: true,
      events: from([{ type: "response.created", sequence_number: 0 }, { type: "response.in_progress" }, {}], 2),
      onError: (error) => ({
        error: { message: (error as Error).message, type: "server_error", code: "internal_error", param: null },
      }),
      onCancel: () => {},
    });
    expect(await new Response(stream).text()).toBe(
      'event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n' +
        'event: response.in_progress\ndata: {"type":"response.in_progress"}\n\n' +
        'event: error\ndata: {"type":"error","code":"internal_error","message":"engine exploded","param":null,"sequence_number":2}\n\n',
    );
    const whole = sseStream({
      named: true,
      events: from([{ type: "response.completed" }]),
      onError: () => ({ error: { message: "", type: "server_error", code: null, param: null } }),
      onCancel: () => {},
    });
    expect(await new Response(whole).text()).toBe('event: response.completed\ndata: {"type":"response.completed"}\n\n');
  });

  it("tells the producer when the reader goes away, and drains the source to its end", async () => {
    let cancelled = false;
    let drained = false;
    async function* untilCancelled() {
      for (let index = 0; !cancelled; index++) yield { index };
      yield { final: true };
      drained = true;
    }
    const reader = sseStream({
      events: untilCancelled(),
      onError: () => ({ error: { message: "", type: "server_error", code: null, param: null } }),
      onCancel: () => (cancelled = true),
    }).getReader();
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const errorBody = () => ({ error: { message: "", type: "server_error" as const, code: null, param: null } });
const base = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m" };
const text = (content: string) => ({
  ...base,
  choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }],
  usage: null,
});
/** A reply as the chat handler streams it: the role, text pieces, the finish, the usage. */
function reply(pieces: string[]) {
  return [
    {
      ...base,
      choices: [
        { index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null },
      ],
      usage: null,
    },
    ...pieces.map(text),
    { ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "length" }], usage: null },
    {
      ...base,
      choices: [],
      usage: { prompt_tokens: 3, completion_tokens: pieces.length, total_tokens: pieces.length + 3 },
    },
  ];
}

async function* paced(values: unknown[], delayMs: () => number) {
  for (const value of values) {
    const delay = delayMs();
    if (delay > 0) await sleep(delay);
    yield value;
  }
}

/** Reads every write of the stream (each a batch of frames), pausing `pauseMs()` before each read. */
async function readWrites(stream: ReadableStream<Uint8Array>, pauseMs: () => number): Promise<string[]> {
  const reader = stream.getReader();
  const writes: string[] = [];
  for (;;) {
    const pause = pauseMs();
    if (pause > 0) await sleep(pause);
    const { done, value } = await reader.read();
    if (done) return writes;
    writes.push(new TextDecoder().decode(value));
  }
}

async function events(writes: string[]): Promise<unknown[]> {
  const all: unknown[] = [];
  for await (const data of readSse(new Response(writes.join("")).body!))
    all.push(data === "[DONE]" ? data : JSON.parse(data));
  return all;
}

describe("SSE frame coalescing", () => {
  const pieces = Array.from({ length: 60 }, (_, index) => ` w${index}`);

  it("a reader that keeps up gets every chunk in its own write, as it comes", async () => {
    const writes = await readWrites(
      sseStream({ events: paced(reply(pieces), () => 2), onError: errorBody, onCancel: () => {} }),
      () => 0,
    );
    expect(writes).toHaveLength(reply(pieces).length + 1);
    expect(await events(writes)).toEqual([...reply(pieces), "[DONE]"]);
  });

  it("a reader that fell behind gets the text that waited in one frame, every character in order", async () => {
    const writes = await readWrites(
      sseStream({ events: paced(reply(pieces), () => 0), onError: errorBody, onCancel: () => {} }),
      () => 20,
    );
    const received = await events(writes);
    expect(received.length).toBeLessThan(reply(pieces).length);
    const texts = received.flatMap((event) =>
      (event as { choices?: { delta?: { content?: string; role?: string } }[] }).choices?.[0]?.delta?.role
        ? []
        : [(event as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content ?? ""],
    );
    expect(texts.join("")).toBe(pieces.join(""));
    // The role, the finish and the usage stay chunks of their own, in their places.
    expect(received[0]).toEqual(reply(pieces)[0]);
    expect(received.slice(-3)).toEqual([...reply(pieces).slice(-2), "[DONE]"]);
  });

  it("under random timing on both sides, nothing is lost, reordered or merged across what may not merge", async () => {
    for (let run = 0; run < 5; run++) {
      const values = [...reply(pieces.slice(0, 20)), ...reply(pieces.slice(20, 40))];
      const writes = await readWrites(
        sseStream({
          events: paced(values, () => (Math.random() < 0.3 ? Math.floor(Math.random() * 3) : 0)),
          onError: errorBody,
          onCancel: () => {},
        }),
        () => (Math.random() < 0.3 ? Math.floor(Math.random() * 4) : 0),
      );
      const received = await events(writes);
      // Un-merge: split each text chunk back into nothing; compare the sequence of non-text chunks and the text between them.
      const shape = (list: unknown[]) => {
        const out: unknown[] = [];
        for (const event of list) {
          const content = (event as { choices?: { delta?: Record<string, unknown> }[] }).choices?.[0]?.delta;
          const isText = content && Object.keys(content).length === 1 && typeof content.content === "string";
          if (isText && typeof out.at(-1) === "string")
            out[out.length - 1] = `${out.at(-1) as string}${content.content as string}`;
          else out.push(isText ? (content.content as string) : event);
        }
        return out;
      };
      expect(shape(received)).toEqual(shape([...values, "[DONE]"]));
    }
  });

  it("merges only plain text of one choice", () => {
    expect(mergeTextChunks(text("a"), text("b"))).toEqual(text("ab"));
    const legacy = (value: string) => ({
      id: "cmpl-1",
      object: "text_completion",
      choices: [{ index: 0, text: value, logprobs: null, finish_reason: null }],
    });
    expect(mergeTextChunks(legacy("a"), legacy("b"))).toEqual(legacy("ab"));
    expect(
      mergeTextChunks(text("a"), {
        ...text("b"),
        choices: [{ index: 1, delta: { content: "b" }, logprobs: null, finish_reason: null }],
      }),
    ).toBeNull();
    expect(
      mergeTextChunks(text("a"), {
        ...text("b"),
        choices: [{ index: 0, delta: { content: "b" }, logprobs: { content: [] }, finish_reason: null }],
      }),
    ).toBeNull();
    expect(mergeTextChunks(text("a"), reply([])[0])).toBeNull();
    expect(mergeTextChunks(text("a"), reply([]).at(-1))).toBeNull();
  });
});

import { describe, expect, it } from "vitest";
import { EngineError } from "../../../src/core/errors/engine.js";
import { Scheduler } from "../../../src/pipeline/scheduler.js";

describe("scheduler", () => {
  it("runs one at a time, first come first served", async () => {
    const scheduler = new Scheduler({ maxQueued: 5 });
    const order: string[] = [];
    const signal = new AbortController().signal;
    const first = await scheduler.acquire(signal);
    const waiting = ["b", "c", "d"].map((name) =>
      scheduler.acquire(signal).then((release) => (order.push(name), release)),
    );
    expect(scheduler.queued).toBe(3);
    first();
    for (const next of waiting) (await next)();
    expect(order).toEqual(["b", "c", "d"]);
    expect(scheduler.busy).toBe(false);
  });

  it("runs background work after every request waiting, whenever each came", async () => {
    const scheduler = new Scheduler({ maxQueued: 1 });
    const order: string[] = [];
    const signal = new AbortController().signal;
    const first = await scheduler.acquire(signal, "background");
    const indexing = scheduler.acquire(signal, "background").then((release) => (order.push("indexing"), release));
    const chat = scheduler.acquire(signal).then((release) => (order.push("chat"), release));
    // Background work takes no place in the bounded queue of requests.
    expect(scheduler.queued).toBe(1);
    first();
    (await chat)();
    (await indexing)();
    expect(order).toEqual(["chat", "indexing"]);
  });

  it("refuses at once past the bounded queue", async () => {
    const scheduler = new Scheduler({ maxQueued: 1 });
    const signal = new AbortController().signal;
    const release = await scheduler.acquire(signal);
    const queued = scheduler.acquire(signal);
    await expect(scheduler.acquire(signal)).rejects.toBeInstanceOf(EngineError);
    await expect(scheduler.acquire(signal)).rejects.toMatchObject({ kind: "busy" });
    release();
    (await queued)();
  });

  it("drops a waiter whose client aborts, and a double release is harmless", async () => {
    const scheduler = new Scheduler({ maxQueued: 2 });
    const release = await scheduler.acquire(new AbortController().signal);
    const controller = new AbortController();
    const abandoned = scheduler.acquire(controller.signal);
    controller.abort(new Error("gone"));
    await expect(abandoned).rejects.toThrow("gone");
    expect(scheduler.queued).toBe(0);
    release();
    release();
    expect(scheduler.busy).toBe(false);
  });
});

import "fake-indexeddb/auto";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ResolvedConfig } from "../../../src/runtime/config/config.js";
import { createAdmin, installInference, type InstallOptions } from "../../../src/worker.js";
import { configureMessage, type ConfigureReply } from "../../../src/runtime/bridge/messages.js";

let scopes = 0;

/** Just enough of a ServiceWorkerGlobalScope: listeners, the tabs it controls, its registration. */
class FakeScope {
  readonly listeners = new Map<string, ((event: unknown) => void)[]>();
  readonly location: URL;
  readonly registration: { scope: string };
  readonly navigator = {};
  windows: { id: string }[] = [];
  readonly clients = { matchAll: async () => this.windows, claim: async () => undefined };
  constructor(scopeUrl: string) {
    this.location = new URL(`${scopeUrl}inference-sw.js`);
    this.registration = { scope: scopeUrl };
  }
  skipWaiting = async () => undefined;
  addEventListener(type: string, listener: (event: unknown) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  /** What the worker asked to be kept alive for (`waitUntil`) after answering fetches. */
  readonly extended: Promise<unknown>[] = [];
  dispatch(type: string, event: unknown) {
    for (const listener of this.listeners.get(type) ?? []) listener(event);
  }
  configure(options: Record<string, unknown>, from = "tab-a"): Promise<ConfigureReply> {
    return new Promise((resolve) => {
      const port = { postMessage: resolve };
      this.dispatch("message", {
        data: { type: configureMessage, options },
        source: { id: from },
        ports: [port],
        waitUntil: () => undefined,
      });
    });
  }
  /** The response if the worker answered the fetch, else undefined (the browser's network would). */
  async fetch(url: string, init?: RequestInit): Promise<Response | undefined> {
    let answer: Promise<Response> | undefined;
    this.dispatch("fetch", {
      request: new Request(url, init),
      respondWith: (response: Promise<Response>) => (answer = Promise.resolve(response)),
      waitUntil: (work: Promise<unknown>) => this.extended.push(work),
    });
    return answer;
  }
}

function install(scopeUrl: string, options: InstallOptions = {}) {
  const scope = new FakeScope(scopeUrl);
  return { scope, worker: installInference(scope as unknown as ServiceWorkerGlobalScope, options) };
}

const refused = (reply: ConfigureReply) => (reply.ok ? "" : reply.message);
const config = (reply: ConfigureReply) => (reply.ok ? reply.config : ({} as ResolvedConfig));

afterEach(() => vi.unstubAllGlobals());

describe("the worker's configuration", () => {
  it("takes the first page's options, keeps them for a restart, and answers under their base URL", async () => {
    const scopeUrl = `https://app${++scopes}.example/`;
    const { scope } = install(scopeUrl);
    scope.windows = [{ id: "tab-a" }];
    const reply = await scope.configure({ engine: "deterministic", baseUrl: `${scopeUrl}api` });
    expect(config(reply)).toMatchObject({ engine: "deterministic", baseUrl: `${scopeUrl}api`, maxQueued: 32 });
    expect((await scope.fetch(`${scopeUrl}api/v1/models`))?.status).toBe(401);
    expect(await scope.fetch(`${scopeUrl}index.html`)).toBeUndefined();

    // A restarted worker reads the stored configuration. Meanwhile it claims only what ends like an
    // endpoint, passing through what turns out not to be its own; pages and assets stay the app's.
    const network = vi.fn(async () => new Response("elsewhere"));
    vi.stubGlobal("fetch", network);
    const restarted = install(scopeUrl);
    expect(restarted.worker.handles(new URL(`${scopeUrl}index.html`))).toBe(false);
    const [api, other, page] = await Promise.all([
      restarted.scope.fetch(`${scopeUrl}api/v1/models`),
      restarted.scope.fetch(`${scopeUrl}other/v1/chat/completions`, { method: "POST" }),
      restarted.scope.fetch(`${scopeUrl}index.html`),
    ]);
    expect(api?.status).toBe(401);
    expect(await other?.text()).toBe("elsewhere");
    expect(page).toBeUndefined();
    expect(network).toHaveBeenCalledTimes(1);
    expect(restarted.worker.installed?.config.engine).toBe("deterministic");
    expect(restarted.worker.handles(new URL(`${scopeUrl}other/v1/chat/completions`))).toBe(false);
  });

  it("refuses other options while another tab uses the configuration, naming each; takes them when alone", async () => {
    const scopeUrl = `https://app${++scopes}.example/`;
    const { scope, worker } = install(scopeUrl);
    scope.windows = [{ id: "tab-a" }, { id: "tab-b" }];
    expect((await scope.configure({ engine: "deterministic" }, "tab-a")).ok).toBe(true);
    expect((await scope.configure({ engine: "deterministic" }, "tab-b")).ok).toBe(true);
    const message = refused(await scope.configure({ engine: "webllm", maxQueued: 4 }, "tab-b"));
    expect(message).toContain('engine: "deterministic" → "webllm"');
    expect(message).toContain("maxQueued: 32 → 4");
    expect(message).toContain("1 other open tab(s)");
    expect(worker.installed?.config.engine).toBe("deterministic");

    scope.windows = [{ id: "tab-b" }];
    expect(config(await scope.configure({ engine: "deterministic", maxQueued: 4 }, "tab-b")).maxQueued).toBe(4);
    expect(worker.installed?.config.maxQueued).toBe(4);
  });

  it("names an invalid option", async () => {
    const { scope } = install(`https://app${++scopes}.example/`);
    expect(refused(await scope.configure({ engine: "gpt-9" }))).toMatch(/the option `engine` is invalid/);
    expect(refused(await scope.configure({ baseUrl: "http://api.example/openai" }))).toMatch(/must use https:/);
  });

  it("a worker configured in its code refuses other values and accepts none or the same", async () => {
    const scopeUrl = `https://app${++scopes}.example/`;
    const { scope } = install(scopeUrl, { engine: "deterministic", maxQueued: 3 });
    expect(config(await scope.configure({})).maxQueued).toBe(3);
    expect(config(await scope.configure({ engine: "deterministic" })).baseUrl).toBe(`${scopeUrl}openai`);
    const message = refused(await scope.configure({ engine: "webllm" }));
    expect(message).toMatch(/sets its configuration in its code, with installInference\(\)/);
    expect(message).toContain('engine: "deterministic" → "webllm"');
    expect((await scope.fetch(`${scopeUrl}openai/v1/models`))?.status).toBe(401);
  });
});

describe("keys kept in the worker's memory", () => {
  it("a key revoked through the worker's own createAdmin is refused on its next request", async () => {
    const scopeUrl = `https://app${++scopes}.example/`;
    const databaseName = `keys-in-memory-${scopes}`;
    const { scope } = install(scopeUrl, { engine: "deterministic", baseUrl: `${scopeUrl}api`, databaseName });
    const admin = createAdmin({ databaseName });
    const account = await admin.createAccount({ name: "app", creditUsd: 1 });
    const created = await admin.createKey({ accountId: account.id });
    const models = async () =>
      (await scope.fetch(`${scopeUrl}api/v1/models`, { headers: { authorization: `Bearer ${created.key}` } }))?.status;
    expect([await models(), await models()]).toEqual([200, 200]);
    const started = performance.now();
    await admin.revokeKey(created.id);
    // The worker answered the broadcast: no wait for the 250 ms bound.
    expect(performance.now() - started).toBeLessThan(200);
    expect(await models()).toBe(401);
  });
});

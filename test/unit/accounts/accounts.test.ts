import { describe, expect, it } from "vitest";
import { Catalogue } from "../../../src/catalogue/catalogue.js";
import { hashKey } from "../../../src/accounts/keys.js";
import { costNano } from "../../../src/accounts/money.js";
import { broadcastKeyChange, listenForKeyChanges } from "../../../src/runtime/bridge/key-changes.js";
import { durationText } from "../../../src/core/wire/duration.js";
import { keyMemoryMs, lastUseIntervalMs, orphanSweepMs, Accounts } from "../../../src/accounts/accounts.js";
import { webLocksLiveness } from "../../../src/accounts/liveness.js";
import { openAccountsDatabase } from "../../../src/accounts/database.js";
import { checkLedgerInvariant, makeApp, makePolicy, sseEvents } from "../../support/unit-app.js";

const catalogue = Catalogue.create();
const llama = catalogue.get("alpha3:8b-instruct-q8_0")!;

async function setup(creditUsd = 1, limits: { rpm?: number; tpm?: number } = {}) {
  const context = await makePolicy();
  const account = await context.admin.createAccount({ name: "acme", creditUsd });
  const created = await context.admin.createKey({ accountId: account.id, ...limits });
  return { ...context, account, created, authorization: `Bearer ${created.key}` };
}

/** Counts a request as the HTTP layer does: the key as authenticated, then its window. */
const count = async (accounts: Accounts, secret: string) =>
  accounts.countRequest(await accounts.authenticate(`Bearer ${secret}`));

let requestCounter = 0;
const admitOne = (accounts: Accounts, keyId: string, overrides: Partial<Parameters<Accounts["admit"]>[0]> = {}) =>
  accounts.admit({
    keyId,
    requestId: `req_${++requestCounter}`,
    model: llama.id,
    price: llama.price,
    promptTokens: 10,
    maxCompletionTokens: 20,
    ...overrides,
  });

describe("keys", () => {
  it("are sk- and 32+ random bytes, shown once and stored only as a SHA-256 hash", async () => {
    const { admin, database, created } = await setup();
    expect(created.key).toMatch(/^sk-[A-Za-z0-9_-]{43}$/);
    expect(created.prefix).toBe(`${created.key.slice(0, 7)}…`);
    const stored = await database.get("keys", created.id);
    expect(stored?.hash).toBe(await hashKey(created.key));
    expect(JSON.stringify(await database.getAll("keys"))).not.toContain(created.key);
    const listed = await admin.listKeys();
    expect(listed).toHaveLength(1);
    expect(listed[0]).not.toHaveProperty("hash");
    expect(listed[0]).toMatchObject({ status: "active", rpm: 60, tpm: 150_000, lastUsedAt: null });
  });

  it("401s a missing, malformed, unknown or revoked key", async () => {
    const { accounts, admin, created, authorization } = await setup();
    expect((await accounts.authenticate(authorization)).id).toBe(created.id);
    for (const header of [
      null,
      "",
      "Basic abc",
      "Bearer",
      `Bearer ${created.key}x`,
      "Bearer sk-short",
      `Bearer sk-${"A".repeat(43)}`,
    ]) {
      await expect(accounts.authenticate(header)).rejects.toMatchObject({
        status: 401,
        type: "invalid_request_error",
        code: "invalid_api_key",
      });
    }
    await admin.revokeKey(created.id);
    await expect(accounts.authenticate(authorization)).rejects.toMatchObject({ status: 401, code: "invalid_api_key" });
    await expect(admitOne(accounts, created.id)).rejects.toMatchObject({ status: 401 });
  });
});

describe("revocation", () => {
  it("holds for a request authenticated before revokeKey resolved and admitted after it", async () => {
    const { accounts, admin, created, authorization } = await setup();
    // Both within the minute a key's last use is written: the second admission would read no key.
    const first = await accounts.authenticate(authorization);
    await admitOne(accounts, created.id, { key: first });
    const early = await accounts.authenticate(authorization);
    await admin.revokeKey(created.id);
    await expect(admitOne(accounts, created.id, { key: early })).rejects.toMatchObject({
      status: 401,
      code: "invalid_api_key",
    });
  });
});

describe("keys kept in memory", () => {
  it("answer without the store once read, until the admin API tells the accounts of a change", async () => {
    const { accounts, database, created, authorization } = await setup();
    await accounts.authenticate(authorization);
    // Revoked around the admin API: the remembered key still answers.
    const stored = (await database.get("keys", created.id))!;
    await database.put("keys", { ...stored, status: "revoked" });
    expect((await accounts.authenticate(authorization)).id).toBe(created.id);
    accounts.forgetKey(created.id);
    await expect(accounts.authenticate(authorization)).rejects.toMatchObject({ status: 401 });
  });

  it("are read again after keyMemoryMs, so a change made around the admin API is seen within it", async () => {
    const { accounts, database, clock, created, authorization } = await setup();
    await accounts.authenticate(authorization);
    await database.put("keys", { ...(await database.get("keys", created.id))!, rpm: 7 });
    expect((await accounts.authenticate(authorization)).rpm).toBe(60);
    clock.now += keyMemoryMs;
    expect((await accounts.authenticate(authorization)).rpm).toBe(7);
  });

  it("a lookup that began before a change was forgotten does not remember what it read", async () => {
    const { accounts, database, created, authorization } = await setup();
    const lookup = accounts.authenticate(authorization);
    accounts.forgetKey(created.id);
    // It began first, so it answers with the key as it read it; it must not keep it.
    expect((await lookup).id).toBe(created.id);
    await database.put("keys", { ...(await database.get("keys", created.id))!, status: "revoked" });
    await expect(accounts.authenticate(authorization)).rejects.toMatchObject({ status: 401 });
  });

  it("setLimits through the admin API counts at once against a remembered key", async () => {
    const { accounts, admin, created } = await setup();
    await count(accounts, created.key);
    await admin.setLimits(created.id, { rpm: 1 });
    await expect(count(accounts, created.key)).rejects.toMatchObject({ status: 429 });
  });

  it("an admission that finds the key revoked forgets it", async () => {
    const { accounts, database, created, authorization } = await setup();
    await accounts.authenticate(authorization);
    await database.put("keys", { ...(await database.get("keys", created.id))!, status: "revoked" });
    await expect(admitOne(accounts, created.id)).rejects.toMatchObject({ status: 401 });
    await expect(accounts.authenticate(authorization)).rejects.toMatchObject({ status: 401 });
  });

  it("an admission given the authenticated key reads and writes the key only once a minute, for its last use", async () => {
    const { accounts, database, clock, created, authorization } = await setup();
    const key = await accounts.authenticate(authorization);
    const lastUse = async () => (await database.get("keys", created.id))?.lastUsedAt;
    const first = clock.now;
    await admitOne(accounts, created.id, { key });
    expect(await lastUse()).toBe(first);
    clock.now += lastUseIntervalMs - 1;
    await admitOne(accounts, created.id, { key });
    expect(await lastUse()).toBe(first);
    clock.now += 1;
    await admitOne(accounts, created.id, { key });
    expect(await lastUse()).toBe(clock.now);
  });
});

describe("key changes broadcast", () => {
  it("resolve at the listener's acknowledgement, and after the wait with no listener", async () => {
    const forgotten: string[] = [];
    const stop = listenForKeyChanges("broadcast-test", (keyId) => forgotten.push(keyId));
    try {
      const started = performance.now();
      await broadcastKeyChange("broadcast-test", "key_1", 5_000);
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(forgotten).toEqual(["key_1"]);
    } finally {
      stop();
    }
    const started = performance.now();
    await broadcastKeyChange("broadcast-test", "key_2", 200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(forgotten).toEqual(["key_1"]);
  });
});

describe("reservation and settlement", () => {
  it("reserve → settle arithmetic at every catalogue price, with the ledger invariant after each", async () => {
    for (const model of catalogue.list()) {
      const { accounts, database, account, created } = await setup(1);
      const admission = await admitOne(accounts, created.id, {
        model: model.id,
        price: model.price,
        promptTokens: 1000,
        maxCompletionTokens: 500,
      });
      const reserved = 1000 * model.price.inputNanoUsdPerToken + 500 * model.price.outputNanoUsdPerToken;
      expect(admission.reservation.amountNanoUsd).toBe(reserved);
      expect((await database.get("accounts", account.id))?.reservedNanoUsd).toBe(reserved);
      await checkLedgerInvariant(database);
      const entry = await accounts.settle(admission, {
        promptTokens: 1000,
        completionTokens: 123,
        status: "completed",
      });
      const charged = 1000 * model.price.inputNanoUsdPerToken + 123 * model.price.outputNanoUsdPerToken;
      expect(entry).toMatchObject({
        kind: "charge",
        status: "completed",
        amountNanoUsd: charged,
        promptTokens: 1000,
        completionTokens: 123,
        model: model.id,
      });
      const after = await database.get("accounts", account.id);
      expect(after).toMatchObject({ balanceNanoUsd: 1_000_000_000 - charged, reservedNanoUsd: 0 });
      await checkLedgerInvariant(database);
      // Settling again changes nothing.
      expect(
        await accounts.settle(admission, { promptTokens: 1000, completionTokens: 123, status: "completed" }),
      ).toBeNull();
      await checkLedgerInvariant(database);
    }
    // 0.001 USD per 1M tokens is exactly 1 nano-USD per token.
    expect(costNano(catalogue.get("gamma-7b-instruct-v0.3")!.price, 1_000_000, 1_000_000)).toBe(3_000_000);
  });

  it("charges aborted and failed requests for what they delivered, and a failure that delivered nothing nothing", async () => {
    const { accounts, database, account, created } = await setup(1);
    const aborted = await admitOne(accounts, created.id);
    const failed = await admitOne(accounts, created.id);
    const empty = await admitOne(accounts, created.id);
    await accounts.settle(aborted, { promptTokens: 10, completionTokens: 3, status: "aborted" });
    await accounts.settle(failed, { promptTokens: 10, completionTokens: 7, status: "failed" });
    await accounts.settle(empty, { promptTokens: 0, completionTokens: 0, status: "failed" });
    const ledger = await database.getAll("ledger");
    expect(
      ledger.filter((entry) => entry.kind === "charge").map((entry) => [entry.status, entry.amountNanoUsd]),
    ).toEqual(
      expect.arrayContaining([
        ["aborted", 10 * 10 + 3 * 20],
        ["failed", 10 * 10 + 7 * 20],
        ["failed", 0],
      ]),
    );
    expect((await database.get("accounts", account.id))?.balanceNanoUsd).toBe(1_000_000_000 - 160 - 240);
    await checkLedgerInvariant(database);
  });

  it("403s what the balance less open reservations cannot cover, to the nano-dollar", async () => {
    // 30 tokens at 10/20 nano per token: 10×10 + 20×20 = 500 nano-USD per request.
    const { accounts, database, created } = await setup(0.000001); // 1000 nano-USD: exactly two requests.
    const first = await admitOne(accounts, created.id);
    await admitOne(accounts, created.id);
    // The cause, in money and tokens, and the two ways out.
    await expect(admitOne(accounts, created.id)).rejects.toMatchObject({
      status: 403,
      type: "insufficient_quota",
      code: "insufficient_quota",
      message:
        "This key's account has insufficient balance for this request: it may cost up to $0.000000500 " +
        "(10 prompt tokens and up to 20 completion tokens), and $0.000000000 is free (a balance of $0.000001000, " +
        "less $0.000001000 held for requests in progress). Credit the account (admin.credit), or ask for fewer tokens (max_tokens).",
    });
    await checkLedgerInvariant(database);
    // Settling releases the unused part of the reservation: 10 prompt + 5 completion = 200.
    await accounts.settle(first, { promptTokens: 10, completionTokens: 5, status: "completed" });
    // 800 left, 500 reserved: 300 available, exactly 10 prompt + 10 completion tokens.
    await expect(admitOne(accounts, created.id, { maxCompletionTokens: 10 })).resolves.toBeDefined();
    await expect(admitOne(accounts, created.id, { promptTokens: 1, maxCompletionTokens: 0 })).rejects.toMatchObject({
      status: 403,
    });
    await checkLedgerInvariant(database);
  });

  it("never overspends under concurrency: exactly as many admissions as the balance covers", async () => {
    const { accounts, database, account, created } = await setup(0.0000075, { rpm: 1000 }); // 7,500 nano-USD: 15 requests of 500.
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => admitOne(accounts, created.id)));
    const admitted = results.filter((result) => result.status === "fulfilled");
    expect(admitted).toHaveLength(15);
    expect(
      results
        .filter((result) => result.status === "rejected")
        .every((result) => (result as PromiseRejectedResult).reason.status === 403),
    ).toBe(true);
    expect((await database.get("accounts", account.id))?.reservedNanoUsd).toBe(7_500);
    await Promise.all(
      admitted.map((result) =>
        accounts.settle((result as PromiseFulfilledResult<Awaited<ReturnType<typeof admitOne>>>).value, {
          promptTokens: 10,
          completionTokens: 20,
          status: "completed",
        }),
      ),
    );
    expect(await database.get("accounts", account.id)).toMatchObject({ balanceNanoUsd: 0, reservedNanoUsd: 0 });
    await checkLedgerInvariant(database);
  });

  it("releases reservations a killed worker left open, charging nothing, exactly once", async () => {
    const { database, account, created, clock } = await setup(1);
    const killed = new Accounts({ database, clock: () => clock.now, holder: "worker_old" });
    await admitOne(killed, created.id);
    await admitOne(killed, created.id);
    const restarted = new Accounts({ database, clock: () => clock.now, holder: "worker_new" });
    const live = await admitOne(restarted, created.id);
    expect(await restarted.releaseOrphans()).toBe(2);
    expect(await restarted.releaseOrphans()).toBe(0);
    expect((await database.get("accounts", account.id))?.reservedNanoUsd).toBe(live.reservation.amountNanoUsd);
    expect((await database.getAll("ledger")).filter((entry) => entry.status === "failed")).toHaveLength(2);
    await checkLedgerInvariant(database);
  });
});

describe("reservations of an instance still alive", () => {
  /** Web Locks as the browser keeps them: a lock per live holder, dropped when its instance dies. */
  function fakeLocks() {
    const held = new Set<string>();
    return {
      held,
      locks: {
        request: async (name: string) => void held.add(name),
        query: async () => ({ held: [...held].map((name) => ({ name })) }),
      },
    };
  }

  it("stay with it: a new instance releases only those of instances that are gone, and finds one that died later", async () => {
    const { database, account, created, clock } = await setup(1);
    const { held, locks } = fakeLocks();
    const old = new Accounts({
      database,
      clock: () => clock.now,
      holder: "worker_old",
      liveness: webLocksLiveness(locks),
    });
    const streaming = await admitOne(old, created.id);
    const fresh = new Accounts({
      database,
      clock: () => clock.now,
      holder: "worker_new",
      liveness: webLocksLiveness(locks),
    });
    // The old instance is still finishing its stream when the new one starts.
    expect(await fresh.releaseOrphans()).toBe(0);
    const entry = await old.settle(streaming, { promptTokens: 10, completionTokens: 5, status: "completed" });
    expect(entry?.amountNanoUsd).toBe(10 * 10 + 5 * 20);
    // A request it had admitted, then it died: the next sweep (at most a minute on) releases it.
    await admitOne(old, created.id);
    held.delete("webgpu-inference-holder:worker_old");
    clock.now += orphanSweepMs;
    await admitOne(fresh, created.id);
    await expect
      .poll(async () => (await database.getAllFromIndex("reservations", "holder", "worker_old")).length)
      .toBe(0);
    expect((await database.get("accounts", account.id))?.reservedNanoUsd).toBe(costNano(llama.price, 10, 20));
    await checkLedgerInvariant(database);
  });
});

describe("rate limits", () => {
  it("the 60th request in a window passes, the 61st gets 429 with Retry-After, and the window resets on time", async () => {
    const { accounts, created, clock } = await setup(1);
    const start = clock.now;
    for (let index = 1; index <= 60; index++) {
      clock.now = start + index * 100;
      const state = await count(accounts, created.key);
      expect(state.remainingRequests).toBe(60 - index);
    }
    clock.now = start + 59_500;
    const refused = await count(accounts, created.key).catch((error: unknown) => error);
    // OpenAI's words, type and duration form: 600 ms from the window's end.
    expect(refused).toMatchObject({
      status: 429,
      type: "requests",
      code: "rate_limit_exceeded",
      headers: { "retry-after": "1" },
      message: `Rate limit reached for key ${created.prefix} on requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again in 600ms.`,
    });
    // The window opened with the first request, at start + 100.
    clock.now = start + 100 + 59_999;
    await expect(count(accounts, created.key)).rejects.toMatchObject({ status: 429 });
    clock.now = start + 100 + 60_000;
    expect((await count(accounts, created.key)).remainingRequests).toBe(59);
  });

  it("per-key limits, set at creation or later; a refused request counts nothing", async () => {
    const { accounts, admin, created } = await setup(1, { rpm: 2 });
    await count(accounts, created.key);
    await count(accounts, created.key);
    await expect(count(accounts, created.key)).rejects.toMatchObject({ status: 429 });
    await admin.setLimits(created.id, { rpm: 100 });
    expect((await count(accounts, created.key)).remainingRequests).toBe(97);
    await expect(admin.setLimits(created.id, { rpm: 0 })).rejects.toMatchObject({
      name: "SetupError",
      code: "invalid_option",
    });
  });

  it("counts in memory within a stored lease: most requests write nothing, and the stored figure never falls below what was admitted", async () => {
    const { accounts, database, created } = await setup(1, { rpm: 16 });
    const stored = async () => (await database.get("windows", created.id))?.requests ?? 0;
    let admitted = 0;
    const writes: number[] = [];
    for (let index = 0; index < 16; index++) {
      const before = await stored();
      await count(accounts, created.key);
      admitted++;
      if ((await stored()) !== before) writes.push(index);
      expect(await stored()).toBeGreaterThanOrEqual(admitted);
    }
    // Leases of an eighth of the limit (2) past the request that needs one: one write in about three.
    expect(writes.length).toBeLessThanOrEqual(6);
    await expect(count(accounts, created.key)).rejects.toMatchObject({ status: 429 });
  });

  it("a restarted worker counts the dead one's whole lease as used, and two live instances together never pass the limit", async () => {
    const { accounts, database, created, clock } = await setup(1, { rpm: 16 });
    for (let index = 0; index < 4; index++) await count(accounts, created.key);
    const lease = (await database.get("windows", created.id))!.requests;
    expect(lease).toBeGreaterThanOrEqual(4);
    // A new instance (the browser stopped the worker; its memory is gone) admits only past the lease.
    const restarted = new Accounts({ database, clock: () => clock.now, holder: "worker_restarted" });
    let more = 0;
    while (
      await count(restarted, created.key).then(
        () => true,
        () => false,
      )
    )
      more++;
    expect(more).toBe(16 - lease);
    // A fresh window, and two instances taking turns: never more than the limit between them.
    clock.now += 60_000;
    const other = new Accounts({ database, clock: () => clock.now, holder: "worker_other" });
    let together = 0;
    for (let round = 0; round < 20; round++) {
      for (const instance of [restarted, other])
        if (
          await count(instance, created.key).then(
            () => true,
            () => false,
          )
        )
          together++;
    }
    expect(together).toBeLessThanOrEqual(16);
    expect(together).toBeGreaterThanOrEqual(16 - 2 * 2);
  });

  it("concurrent requests in one worker take exactly the limit, with no lost count", async () => {
    const { accounts, created } = await setup(10, { rpm: 25, tpm: 10_000_000 });
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => count(accounts, created.key)));
    expect(results.filter((result) => result.status === "fulfilled")).toHaveLength(25);
    expect(
      results
        .filter((result) => result.status === "rejected")
        .every((result) => (result as PromiseRejectedResult).reason.status === 429),
    ).toBe(true);
  });

  it("concurrent admissions in one worker take exactly the tokens per minute, with no lost count", async () => {
    const { accounts, created } = await setup(10, { tpm: 25 * 30 });
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => admitOne(accounts, created.id)));
    expect(results.filter((result) => result.status === "fulfilled")).toHaveLength(25);
    expect(
      results
        .filter((result) => result.status === "rejected")
        .every((result) => (result as PromiseRejectedResult).reason.status === 429),
    ).toBe(true);
  });

  it("admits tokens as prompt + max_tokens and corrects them to the real count at settlement", async () => {
    const { accounts, created } = await setup(1, { tpm: 100 });
    const first = await admitOne(accounts, created.id, { promptTokens: 30, maxCompletionTokens: 50 });
    expect(first.rate.remainingTokens).toBe(20);
    await expect(admitOne(accounts, created.id, { promptTokens: 10, maxCompletionTokens: 20 })).rejects.toMatchObject({
      status: 429,
      message: expect.stringContaining("tokens"),
    });
    await accounts.settle(first, { promptTokens: 30, completionTokens: 5, status: "completed" });
    expect((await accounts.state(created.id))?.remainingTokens).toBe(65);
    await expect(admitOne(accounts, created.id, { promptTokens: 10, maxCompletionTokens: 20 })).resolves.toBeDefined();
  });
});

describe("the database's version", () => {
  it("a connection lets go when a newer version of the app upgrades the database, so the upgrade does not wait on an old tab", async () => {
    const name = `versions-${Math.random()}`;
    const old = await openAccountsDatabase(name);
    const warnings: unknown[] = [];
    const warn = console.warn;
    console.warn = (...message: unknown[]) => warnings.push(message.join(" "));
    try {
      const newer = await new Promise<IDBDatabase>((resolve, reject) => {
        const request = indexedDB.open(name, old.version + 1);
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
        setTimeout(() => reject(new Error("the upgrade waited on the older connection")), 2_000);
      });
      expect(newer.version).toBe(old.version + 1);
      newer.close();
    } finally {
      console.warn = warn;
    }
    expect(String(warnings[0])).toMatch(/A newer version of this app upgraded the database .* Reload this tab/);
    await expect(old.get("accounts", "any")).rejects.toThrow();
  });
});

describe("admin", () => {
  it("credits, reads accounts and exports the ledger as JSON and CSV", async () => {
    const { admin, accounts, database, account, created } = await setup(2.5);
    expect(account).toEqual({
      id: account.id,
      name: "acme",
      balanceNanoUsd: 2_500_000_000,
      reservedNanoUsd: 0,
      createdAt: expect.any(Number),
    });
    await admin.credit(account.id, 0.5);
    const admission = await admitOne(accounts, created.id);
    await accounts.settle(admission, { promptTokens: 10, completionTokens: 20, status: "completed" });
    expect((await admin.getAccount(account.id))?.balanceNanoUsd).toBe(3_000_000_000 - 500);
    const ledger = await admin.ledger({ accountId: account.id });
    expect(ledger.map((entry) => [entry.kind, entry.amountNanoUsd])).toEqual([
      ["charge", 500],
      ["credit", 500_000_000],
      ["credit", 2_500_000_000],
    ]);
    expect(await admin.ledger({ keyId: created.id })).toHaveLength(1);
    expect(await admin.ledger({ limit: 1 })).toHaveLength(1);
    const csv = await admin.exportLedger("csv");
    expect(csv.split("\n")[0]).toBe(
      "id,kind,status,createdAt,accountId,keyId,requestId,model,promptTokens,completionTokens,amountNanoUsd",
    );
    expect(csv.trim().split("\n")).toHaveLength(4);
    expect(JSON.parse(await admin.exportLedger("json"))).toHaveLength(3);
    await checkLedgerInvariant(database);
    await expect(admin.credit(account.id, -1)).rejects.toMatchObject({ name: "SetupError", code: "invalid_option" });
    // Two credits that each count exactly, but not together: the second is refused, the balance kept.
    const rich = await admin.createAccount({ name: "rich", creditUsd: 5_000_000 });
    await expect(admin.credit(rich.id, 5_000_000)).rejects.toMatchObject({ code: "invalid_option" });
    expect((await admin.getAccount(rich.id))?.balanceNanoUsd).toBe(5_000_000 * 1e9);
    await checkLedgerInvariant(database);
  });
});

describe("over HTTP", () => {
  it("puts the X-RateLimit headers on successes and on errors once the key is known", async () => {
    const { app, post, get, clock } = await makeApp({ rpm: 3 });
    const ok = await app.handle(get("/v1/models"));
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("3");
    expect(ok.headers.get("x-ratelimit-remaining-requests")).toBe("2");
    // When the window starts again, as an ISO 8601 UTC timestamp (the seed's words).
    const reset = new Date(clock.now + 60_000).toISOString();
    expect(ok.headers.get("x-ratelimit-reset-requests")).toBe(reset);
    expect(ok.headers.get("x-ratelimit-limit-tokens")).toBe("150000");
    expect(ok.headers.get("x-ratelimit-remaining-tokens")).toBe("150000");
    expect(ok.headers.get("x-ratelimit-reset-tokens")).toBe(reset);
    // A refused request counts as any other does.
    const invalid = await app.handle(post("/v1/chat/completions", { model: "x" }));
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    const chat = await app.handle(
      post("/v1/chat/completions", {
        model: "gamma-7b-instruct-v0.3",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 4,
      }),
    );
    expect(chat.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const refused = await app.handle(get("/v1/models"));
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("60");
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    clock.now += 51_360;
    const later = await app.handle(get("/v1/models"));
    expect([later.status, later.headers.get("x-ratelimit-reset-requests")]).toEqual([429, reset]);
    const anonymous = await app.handle(new Request("https://app.example/openai/v1/models"));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("x-ratelimit-limit-requests")).toBeNull();
  });

  it("writes the resets as the hosted API's durations when configured so", async () => {
    const { app, get, clock } = await makeApp({ rpm: 2, rateLimitResets: "duration" });
    const ok = await app.handle(get("/v1/models"));
    expect([ok.headers.get("x-ratelimit-reset-requests"), ok.headers.get("x-ratelimit-reset-tokens")]).toEqual([
      "1m0s",
      "1m0s",
    ]);
    await app.handle(get("/v1/nothing-here"));
    clock.now += 51_360;
    const refused = await app.handle(get("/v1/models"));
    expect([refused.status, refused.headers.get("x-ratelimit-reset-requests")]).toEqual([429, "8.64s"]);
  });

  it("counts every authenticated request against its requests per minute, whatever its answer", async () => {
    const { app, post, get } = await makeApp({ rpm: 3, creditUsd: 0 });
    const answers = [
      await app.handle(post("/v1/chat/completions", "{not json")),
      await app.handle(post("/v1/chat/completions", { model: "gamma-7b-instruct-v0.3", messages: [] })),
      // A $0 account: 403.
      await app.handle(
        post("/v1/chat/completions", {
          model: "gamma-7b-instruct-v0.3",
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 4,
        }),
      ),
      await app.handle(get("/v1/models")),
    ];
    expect(answers.map((response) => response.status)).toEqual([400, 400, 403, 429]);
    expect(answers.map((response) => response.headers.get("x-ratelimit-remaining-requests"))).toEqual([
      "2",
      "1",
      "0",
      "0",
    ]);
  });

  it("a request larger than the key's tokens per minute: OpenAI's 'Request too large', not worth a retry", async () => {
    const { app, post, key } = await makeApp({ tpm: 40 });
    const ask = (maxTokens: number) =>
      app.handle(
        post("/v1/chat/completions", {
          model: "gamma-7b-instruct-v0.3",
          messages: [{ role: "user", content: "hi" }],
          max_tokens: maxTokens,
        }),
      );
    const large = await ask(100);
    expect(large.status).toBe(429);
    expect([large.headers.get("retry-after"), large.headers.get("x-should-retry")]).toEqual([null, "false"]);
    const { error } = (await large.json()) as { error: { message: string; type: string; code: string } };
    expect(error).toMatchObject({ type: "tokens", code: "rate_limit_exceeded" });
    expect(error.message).toMatch(
      new RegExp(
        `^Request too large for key ${key.slice(0, 6)}.* on tokens per min \\(TPM\\): Limit 40, Requested \\d+\\. The input or output tokens must be reduced`,
      ),
    );
    // Within the limit, but not with what the window has used: a wait helps, and says how long.
    expect((await ask(20)).status).toBe(200);
    const later = await ask(20);
    expect([later.status, later.headers.get("retry-after"), later.headers.get("x-should-retry")]).toEqual([
      429,
      "60",
      null,
    ]);
    expect(((await later.json()) as { error: { message: string } }).error.message).toMatch(
      /on tokens per min \(TPM\): Limit 40, Used \d+, Requested \d+\. Please try again in 1m0s\.$/,
    );
  });

  it("writes a ledger entry per generation and bills an abandoned stream for the tokens it streamed", async () => {
    const { app, post, database, keyId } = await makeApp({ tokenDelayMs: 2 });
    const full = await app.handle(
      post("/v1/chat/completions", {
        model: "alpha3:8b-instruct-q8_0",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 50,
      }),
    );
    const body = (await full.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const response = await app.handle(
      post("/v1/chat/completions", {
        model: "alpha3:8b-instruct-q8_0",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 50,
        stream: true,
      }),
    );
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while ((text.match(/"content":"[^"]+"/g) ?? []).length < 3) text += decoder.decode((await reader.read()).value);
    await reader.cancel();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const streamed = sseEvents(text).filter(
      (event) => event.includes('"content":"') && !event.includes('"content":""'),
    ).length;
    const entries = (await database.getAll("ledger")).filter((entry) => entry.keyId === keyId);
    expect(entries.map((entry) => entry.status)).toEqual(["completed", "aborted"]);
    expect(entries[0]).toMatchObject({
      promptTokens: body.usage.prompt_tokens,
      completionTokens: body.usage.completion_tokens,
      amountNanoUsd: body.usage.prompt_tokens * 10 + body.usage.completion_tokens * 20,
    });
    // One token per delta on this engine; a token produced but not yet read when the reader left is still produced.
    expect(entries[1]?.completionTokens).toBeGreaterThanOrEqual(streamed);
    expect(entries[1]?.completionTokens).toBeLessThanOrEqual(streamed + 2);
    expect(entries[1]?.amountNanoUsd).toBe(
      (entries[1]?.promptTokens ?? 0) * 10 + (entries[1]?.completionTokens ?? 0) * 20,
    );
    expect(entries[1]?.timings?.firstTokenAt).toBeDefined();
    await checkLedgerInvariant(database);
  });

  it("403s a request the balance cannot cover, via the HTTP surface", async () => {
    const { app, post } = await makeApp({ creditUsd: 0 });
    const response = await app.handle(
      post("/v1/chat/completions", {
        model: "gamma-7b-instruct-v0.3",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 4,
      }),
    );
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({
      error: {
        message: expect.stringMatching(
          /^This key's account has insufficient balance for this request: .* \$0\.000000000 is free/,
        ),
        type: "insufficient_quota",
        code: "insufficient_quota",
        param: null,
      },
    });
  });
});

describe("reset durations", () => {
  it("are written as the hosted API writes them: Go's duration form", () => {
    const cases: [number, string][] = [
      [0, "0s"],
      [-5, "0s"],
      [12, "12ms"],
      [0.2, "1ms"],
      [1_000, "1s"],
      [8_640, "8.64s"],
      [60_000, "1m0s"],
      [90_500, "1m30.5s"],
      [3_723_000, "1h2m3s"],
    ];
    for (const [milliseconds, written] of cases)
      expect([milliseconds, durationText(milliseconds)]).toEqual([milliseconds, written]);
  });
});

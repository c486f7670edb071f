/**
 * `npm start`'s server as an attacker on this machine meets it: a local process with any Origin
 * or Host, a socket that claims another path or answers another tab's request, malformed frames
 * and escapes. Real sockets on loopback.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
// @ts-expect-error: a plain JavaScript script
import { createRelay } from "../../../scripts/relay.mjs";
// @ts-expect-error: a plain JavaScript script
import { startStaticServer } from "../../../scripts/static-server.mjs";

interface Server {
  origin: string;
  close(): Promise<void>;
}

let server: Server | undefined;
const sockets: WebSocket[] = [];
/** What the latest server's relay logged, as `npm start` prints it. */
let logged: string[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await server?.close();
});

async function start(): Promise<Server> {
  const root = mkdtempSync(join(tmpdir(), "relay-"));
  mkdirSync(join(root, "demo"));
  writeFileSync(join(root, "demo", "index.html"), "<p>demo</p>");
  writeFileSync(join(root, "demo-secrets.txt"), "secret");
  const log: string[] = (logged = []);
  server = (await startStaticServer([{ prefix: "/", directory: join(root, "demo") }], {
    extend: (origin: string) => createRelay({ origin, log: (line: string) => log.push(line) }),
  })) as Server;
  return server;
}

/** A raw HTTP request, Host and path as given (fetch would normalise both). */
function raw(
  origin: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    // An IPv6 literal is bracketed in a URL, bare in a socket address.
    const outgoing = httpRequest(
      { hostname: hostname.replace(/^\[(.*)\]$/, "$1"), port, path, method: "GET", headers, agent: false },
      (incoming) => {
        let body = "";
        incoming.on("data", (chunk) => (body += chunk));
        incoming.on("end", () => resolve({ status: incoming.statusCode ?? 0, body, headers: incoming.headers }));
      },
    );
    outgoing.on("error", reject);
    outgoing.end();
  });
}

async function tab(
  origin: string,
  basePath = "/openai",
  headers: Record<string, string> = { origin },
): Promise<WebSocket> {
  const socket = new WebSocket(`${origin.replace("http", "ws")}/__relay`, { headers });
  sockets.push(socket);
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  socket.send(JSON.stringify({ type: "hello", basePath }));
  await new Promise((resolve) => setTimeout(resolve, 50));
  return socket;
}

/** The next request the relay sends a tab. */
const nextRequest = (socket: WebSocket) =>
  new Promise<{ id: number; path: string; headers: Record<string, string> }>((resolve) =>
    socket.once("message", (data) => resolve(JSON.parse(String(data)))),
  );

describe("the demo server and its relay", () => {
  it("answers a malformed escape with 400 and keeps serving; a sibling folder sharing the prefix is outside", async () => {
    const { origin } = await start();
    expect((await raw(origin, "/%")).status).toBe(400);
    expect((await raw(origin, "/%zz/a")).status).toBe(400);
    expect((await raw(origin, "/../demo-secrets.txt")).status).toBe(404);
    expect((await raw(origin, "/%2e%2e/demo-secrets.txt")).status).toBe(404);
    expect((await raw(origin, "/")).body).toContain("demo");
  });

  it("refuses a Host that is not loopback, for files and the API alike", async () => {
    const { origin } = await start();
    for (const path of ["/", "/openai/v1/models"])
      expect((await raw(origin, path, { host: "evil.example" })).status).toBe(403);
    await expect(tab(origin, "/openai", { origin, host: "evil.example" })).rejects.toThrow();
  });

  it("takes no socket from another origin, and none that claims a path other than /openai", async () => {
    const { origin } = await start();
    await expect(tab(origin, "/openai", { origin: "http://evil.example" })).rejects.toThrow();
    const claimer = await tab(origin, "");
    await new Promise((resolve) =>
      claimer.readyState === WebSocket.CLOSED ? resolve(null) : claimer.once("close", resolve),
    );
    // The page's own files are never relayed, and the API has no tab to answer it.
    expect((await raw(origin, "/")).body).toContain("demo");
    expect((await raw(origin, "/openai/v1/models")).status).toBe(503);
  });

  it("takes its own page's socket under any loopback name, but not another local app's on another port", async () => {
    const { origin } = await start();
    const port = new URL(origin).port;
    await expect(tab(origin, "/openai", { origin: "http://localhost:1" })).rejects.toThrow();
    await expect(tab(origin, "/openai", { origin: `https://localhost:${port}` })).rejects.toThrow();
    // The demo opened at http://127.0.0.1:<port> is the same page: its tab answers.
    const numeric = await tab(origin, "/openai", { origin: `http://127.0.0.1:${port}` });
    const asked = nextRequest(numeric);
    const answer = raw(origin, "/openai/v1/models");
    const { id } = await asked;
    numeric.send(JSON.stringify({ type: "head", id, status: 200, headers: {} }));
    numeric.send(JSON.stringify({ type: "end", id }));
    expect((await answer).status).toBe(200);
  });

  it("answers on IPv6's loopback too where the machine has one, where localhost may resolve first, and starts when [::1] is taken or missing", async () => {
    // Whether this machine can listen on [::1] at all (a container may have IPv6 off).
    const probe = createServer();
    const ipv6 = await new Promise<boolean>((resolve) => {
      probe.once("error", () => resolve(false));
      probe.listen(0, "::1", () => resolve(true));
    });
    if (ipv6) await new Promise((resolve) => probe.close(resolve));
    const { origin } = await start();
    const port = Number(new URL(origin).port);
    expect((await raw(origin, "/")).body).toContain("demo");
    if (!ipv6) {
      // Without an IPv6 loopback the server starts on 127.0.0.1 alone, and [::1] is refused.
      await expect(raw(`http://[::1]:${port}`, "/")).rejects.toThrow();
      return;
    }
    expect((await raw(`http://[::1]:${port}`, "/")).body).toContain("demo");
    await server?.close();
    // Another program holds [::1] on the port: the server still starts, on 127.0.0.1.
    const holder = createServer((_request, response) => response.end("holder"));
    await new Promise<void>((resolve) => holder.listen(port, "::1", resolve));
    try {
      const root = mkdtempSync(join(tmpdir(), "relay-"));
      writeFileSync(join(root, "index.html"), "<p>demo</p>");
      server = (await startStaticServer([{ prefix: "/", directory: root }], { port })) as Server;
      expect((await raw(server.origin, "/")).body).toContain("demo");
      expect((await raw(`http://[::1]:${port}`, "/")).body).toBe("holder");
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it("takes a request's answer only from the tab it was sent to, and survives malformed frames", async () => {
    const { origin } = await start();
    const first = await tab(origin);
    const second = await tab(origin);
    const asked = nextRequest(first);
    const answer = raw(origin, "/openai/v1/models", { authorization: "Bearer sk-test" });
    const { id, headers } = await asked;
    expect(headers.authorization).toBe("Bearer sk-test");
    // The other socket tries to answer, and sends garbage.
    second.send(JSON.stringify({ type: "head", id, status: 200, headers: { "content-type": "text/plain" } }));
    second.send(Buffer.concat([Buffer.from([0, 0, 0, id]), Buffer.from("forged")]));
    second.send(JSON.stringify({ type: "end", id }));
    second.send("{not json");
    second.send(Buffer.from([1]));
    first.send("null");
    await new Promise((resolve) => setTimeout(resolve, 50));
    first.send(JSON.stringify({ type: "head", id, status: 200, headers: { "content-type": "application/json" } }));
    first.send(Buffer.concat([Buffer.from([0, 0, 0, id]), Buffer.from('{"object":"list"}')]));
    first.send(JSON.stringify({ type: "end", id }));
    const response = await answer;
    expect(response).toMatchObject({ status: 200, body: '{"object":"list"}' });
    expect(response.headers["x-webgpu-inference-relay-tab"]).toBe("1");
  });

  it("keeps the first tab answering while it is open, so a later socket posing as a tab hears nothing; the log says which tab answers", async () => {
    const { origin } = await start();
    const first = await tab(origin);
    const heardByLater: unknown[] = [];
    const later = await tab(origin);
    later.on("message", (data) => heardByLater.push(String(data)));
    const asked = nextRequest(first);
    const answer = raw(origin, "/openai/v1/models", { authorization: "Bearer sk-first" });
    const { id } = await asked;
    first.send(JSON.stringify({ type: "head", id, status: 200, headers: {} }));
    first.send(JSON.stringify({ type: "end", id }));
    expect((await answer).headers["x-webgpu-inference-relay-tab"]).toBe("1");
    expect(heardByLater).toEqual([]);
    expect(logged).toEqual(["relay: tab 1 answers /openai/ from now on."]);
    // The first tab closes: the next one answers, and the log says so.
    first.close();
    await new Promise((resolve) => first.once("close", resolve));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(logged).toEqual([
      "relay: tab 1 answers /openai/ from now on.",
      "relay: tab 1 closed.",
      "relay: tab 2 answers /openai/ from now on.",
    ]);
    const handed = nextRequest(later);
    const handedAnswer = raw(origin, "/openai/v1/models");
    const request = await handed;
    expect(request.path).toBe("/openai/v1/models");
    later.send(JSON.stringify({ type: "head", id: request.id, status: 200, headers: {} }));
    later.send(JSON.stringify({ type: "end", id: request.id }));
    expect((await handedAnswer).headers["x-webgpu-inference-relay-tab"]).toBe("2");
  });
});

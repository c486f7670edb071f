/**
 * The relay of `npm start`: the API runs in the browser's service worker, which curl and servers
 * cannot reach, so this server takes their requests and hands them to an open tab of the demo
 * over a WebSocket. The tab fetches each one (its service worker answers it exactly as it
 * answers the page: keys, limits, billing) and streams the response back.
 *
 * Protocol on `/__relay` (same origin only): the tab says `{type: "hello", basePath}` (the API's
 * path, e.g. `/openai`); the server sends `{type: "request", id, method, path, headers, body}`
 * and `{type: "abort", id}` when its client goes away; the tab answers `{type: "head", id,
 * status, headers}`, then binary frames (a 4-byte big-endian id, then body bytes), then
 * `{type: "end", id}` or `{type: "error", id, message}`.
 *
 * It listens on loopback only (the static server's default), and takes WebSockets from its own
 * origin only, so no other site can borrow the tab.
 */
import { WebSocketServer } from "ws";

const relayPath = "/__relay";
/** Marks a request the tab makes for the relay: one the worker passes on to the network is not relayed again. */
const relayedHeader = "x-webgpu-inference-relayed";

const hopByHop = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "upgrade", "host"]);

/** OpenAI's error object, as the worker itself writes it. */
function sendError(response, status, code, message) {
  const type = status === 404 ? "invalid_request_error" : "service_unavailable";
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error: { message, type, code, param: null } }));
}

const withoutHopByHop = (headers) => Object.fromEntries(Object.entries(headers).filter(([name]) => !hopByHop.has(name)));

/** A request's response as it has gone so far: ended now, with an error if nothing was sent yet. */
function fail(response, status, code, message) {
  if (response.headersSent) response.destroy();
  else sendError(response, status, code, message);
}

/** @typedef {{ socket: import("ws").WebSocket, basePath: string }} Tab */

class Relay {
  #origin;
  #sockets = new WebSocketServer({ noServer: true });
  /** @type {Tab[]} Tabs that said hello, newest last: the newest one answers. */
  #tabs = [];
  /** @type {Map<number, { response: import("node:http").ServerResponse, tab: Tab }>} */
  #pending = new Map();
  #nextId = 1;

  constructor(origin) {
    this.#origin = origin;
    this.#sockets.on("connection", (socket) => {
      const tab = { socket, basePath: "" };
      socket.on("message", (data, isBinary) => this.#hear(tab, data, isBinary));
      socket.on("close", () => this.#drop(tab));
    });
  }

  /** Takes the WebSocket of a tab of this origin on /__relay. */
  upgrade(request, socket, head) {
    const { pathname } = new URL(request.url ?? "/", this.#origin);
    if (pathname !== relayPath || request.headers.origin !== this.#origin) {
      socket.destroy();
      return;
    }
    this.#sockets.handleUpgrade(request, socket, head, (websocket) => this.#sockets.emit("connection", websocket, request));
  }

  /** Relays a request under an open tab's API path; false when the path is not the API's. */
  handle(request, response) {
    const url = new URL(request.url ?? "/", this.#origin);
    const tab = this.#tabs.findLast((candidate) => url.pathname === candidate.basePath || url.pathname.startsWith(`${candidate.basePath}/`));
    if (!tab) {
      // With no tab open the API's path is unknown; the demo's default one gets the reason.
      if (!/^\/openai(\/|$)/.test(url.pathname)) return false;
      sendError(response, 503, "no_open_tab", `The API runs in the browser, in the demo's service worker: open ${this.#origin}/ and keep the tab open. This server relays requests to it while it is open.`);
    } else if (request.headers[relayedHeader]) {
      sendError(response, 404, "not_found", `The demo's service worker does not answer ${url.pathname}.`);
    } else {
      const chunks = [];
      request.on("data", (chunk) => chunks.push(chunk));
      request.on("end", () => this.#send(tab, request, response, `${url.pathname}${url.search}`, Buffer.concat(chunks)));
    }
    return true;
  }

  #send(tab, request, response, path, body) {
    const id = this.#nextId++;
    this.#pending.set(id, { response, tab });
    // The client going away before the end stops the generation in the tab (and bills what streamed).
    response.on("close", () => {
      if (this.#pending.delete(id)) tab.socket.send(JSON.stringify({ type: "abort", id }));
    });
    const headers = withoutHopByHop(request.headers);
    tab.socket.send(JSON.stringify({ type: "request", id, method: request.method, path, headers, body: body.length ? body.toString("utf8") : null }));
  }

  /** A tab's hello, or its answer to a request: head, body bytes, end or error. */
  #hear(tab, data, isBinary) {
    if (isBinary) {
      const bytes = Buffer.from(data);
      this.#pending.get(bytes.readUInt32BE(0))?.response.write(bytes.subarray(4));
      return;
    }
    const message = JSON.parse(String(data));
    if (message.type === "hello") {
      tab.basePath = String(message.basePath).replace(/\/+$/, "");
      if (!this.#tabs.includes(tab)) this.#tabs.push(tab);
      return;
    }
    const entry = this.#pending.get(message.id);
    if (!entry) return;
    if (message.type === "head") {
      entry.response.writeHead(message.status, withoutHopByHop(message.headers));
      entry.response.flushHeaders();
      return;
    }
    this.#pending.delete(message.id);
    if (message.type === "end") entry.response.end();
    else fail(entry.response, 502, "relay_failed", `The demo tab could not fetch this request: ${message.message}`);
  }

  /** A tab that closed: it answers nothing more, and what it was answering ends. */
  #drop(tab) {
    this.#tabs = this.#tabs.filter((candidate) => candidate !== tab);
    for (const [id, entry] of this.#pending) {
      if (entry.tab !== tab) continue;
      this.#pending.delete(id);
      fail(entry.response, 503, "tab_closed", "The demo tab that was answering this request closed. Open the demo again and retry.");
    }
  }
}

/** @param {{ origin: string }} options */
export function createRelay({ origin }) {
  return new Relay(origin);
}

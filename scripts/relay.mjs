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

export const relayPath = "/__relay";
/** Marks a request the tab makes for the relay: one the worker passes on to the network is not relayed again. */
export const relayedHeader = "x-webgpu-inference-relayed";

const hopByHop = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "upgrade", "host"]);

/** OpenAI's error object, as the worker itself writes it. */
function sendError(response, status, code, message) {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error: { message, type: "service_unavailable", code, param: null } }));
}

/** @param {{ origin: string }} options */
export function createRelay({ origin }) {
  const sockets = new WebSocketServer({ noServer: true });
  /** @type {{ socket: import("ws").WebSocket, basePath: string }[]} Tabs, newest last. */
  const tabs = [];
  /** @type {Map<number, { response: import("node:http").ServerResponse, tab: object }>} */
  const pending = new Map();
  let nextId = 1;

  const tabFor = (pathname) => [...tabs].reverse().find((tab) => pathname === tab.basePath || pathname.startsWith(`${tab.basePath}/`));

  sockets.on("connection", (socket) => {
    const tab = { socket, basePath: "" };
    socket.on("message", (data, isBinary) => {
      if (isBinary) {
        const bytes = Buffer.from(data);
        pending.get(bytes.readUInt32BE(0))?.response.write(bytes.subarray(4));
        return;
      }
      const message = JSON.parse(String(data));
      if (message.type === "hello") {
        tab.basePath = String(message.basePath).replace(/\/+$/, "");
        if (!tabs.includes(tab)) tabs.push(tab);
        return;
      }
      const entry = pending.get(message.id);
      if (!entry) return;
      if (message.type === "head") {
        const headers = Object.fromEntries(Object.entries(message.headers).filter(([name]) => !hopByHop.has(name)));
        entry.response.writeHead(message.status, headers);
        entry.response.flushHeaders();
      } else if (message.type === "end") {
        pending.delete(message.id);
        entry.response.end();
      } else if (message.type === "error") {
        pending.delete(message.id);
        if (entry.response.headersSent) entry.response.destroy();
        else sendError(entry.response, 502, "relay_failed", `The demo tab could not fetch this request: ${message.message}`);
      }
    });
    socket.on("close", () => {
      const index = tabs.indexOf(tab);
      if (index >= 0) tabs.splice(index, 1);
      for (const [id, entry] of pending) {
        if (entry.tab !== tab) continue;
        pending.delete(id);
        if (entry.response.headersSent) entry.response.destroy();
        else sendError(entry.response, 503, "tab_closed", "The demo tab that was answering this request closed. Open the demo again and retry.");
      }
    });
  });

  return {
    /** Takes the WebSocket of a tab of this origin on /__relay. */
    upgrade(request, socket, head) {
      const { pathname } = new URL(request.url ?? "/", origin);
      if (pathname !== relayPath || request.headers.origin !== origin) {
        socket.destroy();
        return;
      }
      sockets.handleUpgrade(request, socket, head, (websocket) => sockets.emit("connection", websocket, request));
    },
    /** Relays a request under an open tab's API path; false when the path is not the API's. */
    handle(request, response) {
      const url = new URL(request.url ?? "/", origin);
      const tab = tabFor(url.pathname);
      if (!tab) {
        // With no tab open the API's path is unknown; the demo's default one gets the reason.
        if (!/^\/openai(\/|$)/.test(url.pathname)) return false;
        sendError(response, 503, "no_open_tab", `The API runs in the browser, in the demo's service worker: open ${origin}/ and keep the tab open. This server relays requests to it while it is open.`);
        return true;
      }
      if (request.headers[relayedHeader]) {
        sendError(response, 404, "not_found", `The demo's service worker does not answer ${url.pathname}.`);
        return true;
      }
      const chunks = [];
      request.on("data", (chunk) => chunks.push(chunk));
      request.on("end", () => {
        const id = nextId++;
        pending.set(id, { response, tab });
        // The client going away before the end stops the generation in the tab (and bills what streamed).
        response.on("close", () => {
          if (pending.delete(id)) tab.socket.send(JSON.stringify({ type: "abort", id }));
        });
        const headers = Object.fromEntries(Object.entries(request.headers).filter(([name]) => !hopByHop.has(name)));
        const body = Buffer.concat(chunks);
        tab.socket.send(JSON.stringify({ type: "request", id, method: request.method, path: `${url.pathname}${url.search}`, headers, body: body.length ? body.toString("utf8") : null }));
      });
      return true;
    },
  };
}

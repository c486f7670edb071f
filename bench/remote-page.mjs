/**
 * The benchmark page driven without a debugger attached: Chromium started as a plain process,
 * the page asking for each call over fetch and posting back its result.
 *
 * Why not Playwright for these samples: an attached debugger is sent a network event for every
 * chunk of a streamed response, and a page's own llama.cpp pays none of them: the debugger's
 * work takes cores from llama.cpp's spinning threads during /v1 samples only. An app's users run
 * with no debugger.
 *
 * Protocol: the page (bench/page/main.ts, with `?remote`) POSTs `{result}` to `rpcPath` and
 * waits; the answer is the next call, `{method, args}`, or `{done: true}`. A result is
 * `{value}` or `{error}`, for the call last sent; the first POST carries `null`.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromiumArgs, chromiumPath } from "../scripts/chromium.mjs";

const rpcPath = "/__bench/rpc";
/** Longer than any one call (a model's load, one sample) takes here; a hang fails by name. */
const callTimeoutMs = 600_000;
/** What Playwright passes too, so a headless page runs at full speed with nothing in front. */
const headlessArgs = [
  "--headless=new",
  "--disable-background-timer-throttling",
  "--disable-backgrounding-occluded-windows",
  "--disable-renderer-backgrounding",
];

/**
 * The server side of the page's calls: `extend` goes to startStaticServer; `open(url)` starts
 * Chromium on the page. Calls are sequential: one is answered before the next is sent.
 */
export function remotePages() {
  /** @type {import("node:http").ServerResponse | undefined} */
  let waiting;
  /** @type {{ command: object, resolve: (value: unknown) => void, reject: (error: Error) => void, timer?: NodeJS.Timeout } | undefined} */
  let current;
  let sent = false;
  let done = false;

  const answer = (/** @type {import("node:http").ServerResponse} */ response, /** @type {object} */ body) =>
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  const send = () => {
    if (!waiting || !current || sent) return;
    sent = true;
    answer(waiting, current.command);
    waiting = undefined;
  };
  const settle = (/** @type {{ value?: unknown, error?: string }} */ result) => {
    const call = current;
    if (!call || !sent) return;
    current = undefined;
    sent = false;
    clearTimeout(call.timer);
    if (result.error !== undefined) call.reject(new Error(`the page: ${result.error}`));
    else call.resolve(result.value);
  };
  const handle = (
    /** @type {import("node:http").IncomingMessage} */ request,
    /** @type {import("node:http").ServerResponse} */ response,
  ) => {
    if (new URL(request.url ?? "/", "http://localhost").pathname !== rpcPath) return false;
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const { result } = JSON.parse(body);
      if (result) settle(result);
      if (done) answer(response, { done: true });
      else {
        waiting = response;
        send();
      }
    });
    return true;
  };
  const extend = () => ({ handle, upgrade: (_request, socket) => socket.destroy() });

  /** Chromium on `url` (which must add `remote` to its query), with a profile of its own. */
  function open(url) {
    const profile = mkdtempSync(join(tmpdir(), "webgpu-inference-remote-"));
    done = false;
    let stderr = "";
    // A process group of its own, so that closing it ends Chromium's helpers too: they write to
    // the profile for a while after the browser process itself exits.
    const browser = spawn(chromiumPath, [...chromiumArgs, ...headlessArgs, `--user-data-dir=${profile}`, url], {
      stdio: ["ignore", "ignore", "pipe"],
      detached: true,
    });
    const end = () => {
      try {
        process.kill(-browser.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    };
    process.once("exit", end);
    browser.stderr.on("data", (chunk) => (stderr = (stderr + chunk).slice(-4_000)));
    const exited = new Promise((resolve) => browser.once("exit", resolve));
    browser.once("exit", (code) => current?.reject(new Error(`Chromium exited (${code}): ${stderr}`)));
    return {
      /** `window.bench[method](...args)` in the page; its result. */
      call(method, ...args) {
        if (current) throw new Error(`${method}: the page is still answering another call`);
        return new Promise((resolve, reject) => {
          current = { command: { method, args }, resolve, reject };
          current.timer = setTimeout(
            () => reject(new Error(`${method} took over ${callTimeoutMs / 1000} s in the page`)),
            callTimeoutMs,
          );
          send();
        });
      },
      async close() {
        done = true;
        if (waiting) answer(waiting, { done: true });
        waiting = undefined;
        end();
        await exited;
        process.off("exit", end);
        rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      },
    };
  }
  return { extend, open };
}

/**
 * llama.cpp's own llama-server, built from the same source as our WebAssembly build
 * (scripts/llama-native.mjs), started on a free port of 127.0.0.1 for the peer suite (test/peer/).
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
// @ts-expect-error: a plain JavaScript module
import { nativeTool } from "../../scripts/llama-native.mjs";

export interface LlamaServer {
  origin: string;
  /** What the server has written to stderr so far. */
  log(): string;
  stop(): void;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, "127.0.0.1", done));
  const { port } = probe.address() as { port: number };
  await new Promise((done) => probe.close(done));
  return port;
}

/** The server on `model` with `args`, once its `/health` answers (building it first if need be). */
export async function startLlamaServer(model: string, args: string[]): Promise<LlamaServer> {
  const tool = nativeTool("llama-server") as string;
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const server = spawn(tool, ["-m", model, "--port", String(port), ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  server.stderr!.on("data", (data: Buffer) => (log += data.toString()));
  for (let tries = 0; tries < 150; tries++) {
    const health = await fetch(`${origin}/health`).catch(() => null);
    if (health?.ok) return { origin, log: () => log, stop: () => server.kill() };
    await new Promise((done) => setTimeout(done, 200));
  }
  server.kill();
  throw new Error(`llama-server did not start:\n${log.slice(-2000)}`);
}

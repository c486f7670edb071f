/**
 * llama.cpp's own native tools, built once from the same source as our WebAssembly build
 * (node-llama-cpp's git bundle, see scripts/llama-source.mjs) with the system's CMake and C++
 * compiler (apt-get install cmake g++), into the temporary folder, one target at a time:
 * `llama-quantize` for the CPU benchmark's K-quant file, `llama-server` as a real peer for the
 * remote-model check (npm run test:peer) and the embedding benchmark's native figures.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { llamaSource, llamaWork } from "./llama-source.mjs";

const build = join(llamaWork, "llama.cpp-native-build");

function need(command, target) {
  try {
    execFileSync(command, ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error(
      `building llama.cpp's ${target} needs ${command}, which is not installed: apt-get install cmake g++ (it is built once)`,
    );
  }
}

/** The path of llama.cpp's tool `target` (a CMake target, e.g. `llama-server`), built first when it is not there. */
export function nativeTool(target) {
  const tool = join(build, "bin", target);
  if (existsSync(tool)) return tool;
  need("cmake", target);
  need("c++", target);
  const { dir } = llamaSource({ reuse: true, folder: "llama.cpp-native" });
  // Without AMX: some virtual machines report it, and grant it to the process, yet fault on its
  // tile instructions (CI's host did: llama-server died on its first matrix product).
  const noAmx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16";
  const options = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF"];
  if (process.arch === "x64") options.push(`-DCMAKE_C_FLAGS=${noAmx}`, `-DCMAKE_CXX_FLAGS=${noAmx}`);
  const off = ["LLAMA_BUILD_TESTS", "LLAMA_BUILD_EXAMPLES", "GGML_OPENMP"];
  execFileSync("cmake", ["-S", dir, "-B", build, ...options, ...off.map((name) => `-D${name}=OFF`)], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  execFileSync("cmake", ["--build", build, "--target", target, "-j", String(availableParallelism())], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  return tool;
}

async function freePort() {
  const probe = createServer();
  await new Promise((done) => probe.listen(0, "127.0.0.1", done));
  const { port } = probe.address();
  await new Promise((done) => probe.close(done));
  return port;
}

/**
 * llama-server on `model` with `args`, on a free port of 127.0.0.1, once its `/health` answers
 * (building it first if need be): `{ origin, log(), stop() }`, `log` what it wrote to stderr.
 */
export async function startLlamaServer(model, args) {
  const tool = nativeTool("llama-server");
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const server = spawn(tool, ["-m", model, "--port", String(port), ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  let ended = "";
  server.stderr.on("data", (data) => (log += data.toString()));
  server.on("exit", (code, signal) => (ended = signal ?? `exit status ${code}`));
  for (let tries = 0; tries < 150 && !ended; tries++) {
    const health = await fetch(`${origin}/health`).catch(() => null);
    if (health?.ok) return { origin, log: () => log, stop: () => server.kill() };
    await new Promise((done) => setTimeout(done, 200));
  }
  server.kill();
  const cause = ended ? `it ended (${ended})` : "its /health did not answer within 30 s";
  throw new Error(`llama-server did not start: ${cause}:\n${log.slice(-2000)}`);
}

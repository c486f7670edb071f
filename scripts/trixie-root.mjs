/**
 * Debian trixie's build root, for llama.cpp's builds (scripts/build-llamacpp.mjs): trixie's
 * Emscripten 3.1.69 (LLVM 19, Binaryen 120) builds Memory64 with pthreads, which bookworm's 3.1.6
 * cannot, and relaxed SIMD, which its LLVM 14 cannot. `debootstrap` makes it once, outside this
 * repository; nothing of trixie is installed into this system, whose own libraries are bookworm's.
 *
 * Nothing is mounted into the root: what a build reads is copied into it under the same absolute
 * path (so the paths in its compile commands hold in both), and what it writes is copied out.
 * A root that is deleted takes nothing of this system with it.
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";

/** Where the root is: TRIXIE_ROOT, or a folder of its own under /opt. */
export const trixieRoot = process.env.TRIXIE_ROOT ?? "/opt/webgpu-inference-trixie";

/** Debian's Emscripten ships a frozen cache without wasm64's system libraries: a writable copy builds them once. */
const cache = "/var/cache/emscripten-writable";

const packages = ["emscripten", "cmake", "make", "python3", "binaryen"];

/** Makes the root, with trixie's Emscripten, unless it is there; returns the compiler's version line. */
export function ensureTrixieRoot() {
  const run = (command, args) => execFileSync(command, args, { stdio: ["ignore", "inherit", "inherit"] });
  if (!existsSync(join(trixieRoot, "usr/bin/emcc"))) {
    if (!existsSync("/usr/sbin/debootstrap"))
      throw new Error("the Memory64 builds need debootstrap to make a trixie build root: apt-get install debootstrap");
    run("debootstrap", ["--variant=minbase", "trixie", trixieRoot, "http://deb.debian.org/debian"]);
    run("chroot", [trixieRoot, "apt-get", "install", "-y", "-qq", ...packages]);
  }
  if (!existsSync(join(trixieRoot, cache)))
    cpSync(join(trixieRoot, "usr/share/emscripten/cache"), join(trixieRoot, cache), { recursive: true });
  return inTrixie("/", "emcc", ["--version"]).split("\n")[0];
}

/**
 * Copies `path` (a file or a folder of this system) into the root at the same path, with its
 * times, so that a build in the root compiles again only what changed here.
 */
export function copyIn(path) {
  mkdirSync(join(trixieRoot, path, ".."), { recursive: true });
  cpSync(path, join(trixieRoot, path), { recursive: true, preserveTimestamps: true });
}

/** Copies `path` out of the root to the same path here. */
export function copyOut(path) {
  cpSync(join(trixieRoot, path), path, { recursive: true });
}

/** Runs `command` in the root, in `cwd` (a path inside it), with its output returned. */
export function inTrixie(cwd, command, args, options = {}) {
  const environment = [`EM_CACHE=${cache}`, "EM_FROZEN_CACHE=0", "HOME=/root"];
  return execFileSync("chroot", [trixieRoot, "/usr/bin/env", "-C", cwd, ...environment, command, ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 1 << 30,
    ...options,
  });
}

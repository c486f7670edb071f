#!/usr/bin/env node
/**
 * Builds llama.cpp for the browser with its WebAssembly SIMD kernels, into `wasm/llamacpp/`:
 * - `llamacpp-st.{js,wasm}`: one thread, for pages that are not cross-origin isolated;
 * - `llamacpp-mt.{js,wasm,worker.js}`: pthreads, a thread per core where the page is isolated;
 * - `build.json`: the source, the compiler, and the kernels CMake selected.
 *
 * Sources come from packages at build time, never copied into this repository: llama.cpp from
 * the git bundle that `node-llama-cpp` ships (`llama/gitRelease.bundle`), our thin C API from
 * `native/llamacpp/engine.cpp`. The compiler is Debian's `emscripten` (apt-get install emscripten).
 *
 * One kernel is ours: `native/llamacpp/tiles.c`, Q4_0 and Q8_0 weights two rows by up to six
 * tokens at a time, for prompts and generation alike (ggml has no WebAssembly matrix kernel, so
 * its products ran a row by a token at a time). `withTiledKernel` appends it to ggml's wasm
 * kernels and has ggml's matrix product call it.
 *
 * Why the processor is named: Emscripten's CMake toolchain reports `x86` unless
 * EMSCRIPTEN_SYSTEM_PROCESSOR is set, and ggml then falls back to its generic scalar kernels.
 * The build stops if CMake did not print "Wasm detected".
 *
 * Usage: node scripts/build-llamacpp.mjs [--jobs N] [--relink]
 *   --relink  reuse the libraries of the last build (in the temporary folder) and only compile
 *             and link our C API: for a change to native/llamacpp/engine.cpp alone.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { availableParallelism } from "node:os";
import { llamaSource, llamaWork as work } from "./llama-source.mjs";

const root = resolve(import.meta.dirname, "..");
const out = join(root, "wasm/llamacpp");
const relink = process.argv.includes("--relink");
const jobs = String(
  process.argv.includes("--jobs") ? process.argv[process.argv.indexOf("--jobs") + 1] : availableParallelism(),
);

// Debian's Emscripten runs its JavaScript optimiser with Node and needs acorn, which our lint tools install.
const env = { ...process.env, NODE_PATH: join(root, "node_modules") };

function run(command, args, options = {}) {
  return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], env, ...options });
}

/** Replaces `text`'s one occurrence of `from` with `to`; the build stops if it is not there once. */
function replaceOnce(file, text, from, to) {
  const at = text.indexOf(from);
  if (at < 0 || text.indexOf(from, at + 1) >= 0)
    throw new Error(`${file} has changed: expected exactly one "${from}" in it; update withTiledKernel`);
  return text.slice(0, at) + to + text.slice(at + from.length);
}

/**
 * Our matrix kernel into ggml's source (the clone, never this repository): appended to its
 * WebAssembly kernels, and called first by ggml's matrix product for each chunk, which falls
 * back to ggml's own code where ours answers 0 (see native/llamacpp/tiles.c). Idempotent.
 */
function withTiledKernel(dir) {
  const marker = "/* webgpu-inference: tiles.c */";
  const kernels = join(dir, "ggml/src/ggml-cpu/arch/wasm/quants.c");
  const text = readFileSync(kernels, "utf8");
  if (text.includes(marker)) return;
  writeFileSync(kernels, [text, marker, `#include "${join(root, "native/llamacpp/tiles.c")}"`, ""].join("\n"));
  const product = join(dir, "ggml/src/ggml-cpu/ggml-cpu.c");
  let source = readFileSync(product, "utf8");
  const definition = "void ggml_compute_forward_mul_mat(";
  source = replaceOnce(
    product,
    source,
    definition,
    [
      "int wi_mul_mat_tiled(const struct ggml_tensor *, const struct ggml_tensor *, struct ggml_tensor *,",
      "                     const void *, int64_t, int64_t, int64_t, int64_t);",
      "",
      definition,
    ].join("\n"),
  );
  const chunk =
    "ggml_compute_forward_mul_mat_one_chunk(params, dst, src0->type, num_rows_per_vec_dot, ir0_start, ir0_end, ir1_start, ir1_end);";
  source = replaceOnce(
    product,
    source,
    chunk,
    `if (!wi_mul_mat_tiled(src0, src1, dst, params->wdata, ir0_start, ir0_end, ir1_start, ir1_end)) ${chunk}`,
  );
  writeFileSync(product, source);
}

/** Configures and builds llama.cpp's static libraries; returns the kernels CMake chose. */
function libraries(dir, variant, flags) {
  const build = join(work, `build-${variant}`);
  const log = join(build, "configure.log");
  if (relink && existsSync(log)) return { build, kernels: kernelsOf(variant, readFileSync(log, "utf8")) };
  rmSync(build, { recursive: true, force: true });
  const configure = run("emcmake", [
    "cmake",
    "-S",
    dir,
    "-B",
    build,
    "-DCMAKE_BUILD_TYPE=Release",
    "-DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm32",
    "-DLLAMA_WASM_MEM64=OFF",
    "-DLLAMA_BUILD_HTML=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_OPENMP=OFF",
    "-DGGML_NATIVE=OFF",
    "-DGGML_CCACHE=OFF",
    `-DCMAKE_C_FLAGS=${flags}`,
    `-DCMAKE_CXX_FLAGS=${flags}`,
  ]);
  writeFileSync(log, configure);
  const kernels = kernelsOf(variant, configure);
  run("cmake", ["--build", build, "--target", "llama", "-j", jobs], { stdio: ["ignore", "ignore", "inherit"] });
  return { build, kernels };
}

/** The kernels CMake's output says ggml selected; the build stops unless they are the wasm SIMD ones. */
function kernelsOf(variant, configure) {
  if (!configure.includes("Wasm detected"))
    throw new Error(`${variant}: ggml did not select its wasm kernels; CMake said:\n${configure}`);
  const kernels = "wasm (ggml-cpu/arch/wasm, SIMD128) with Q4_0 and Q8_0 products in tiles (native/llamacpp/tiles.c)";
  console.log(`${variant}: CMake selected ${kernels}`);
  return kernels;
}

const exported = [
  "wi_error",
  "wi_log",
  "wi_system_info",
  "wi_free",
  "wi_load",
  "wi_info",
  "wi_tokenize",
  "wi_piece",
  "wi_is_end",
  "wi_forget",
  "wi_decode",
  "wi_sampler",
  "wi_sample",
  "wi_tiles",
  "malloc",
  "free",
].map((name) => `_${name}`);

function link(dir, build, variant, flags, extra) {
  const name = `llamacpp-${variant}`;
  run("em++", [
    join(root, "native/llamacpp/engine.cpp"),
    ...flags.split(" ").filter(Boolean),
    "-O3",
    "-std=c++17",
    `-I${join(dir, "include")}`,
    `-I${join(dir, "ggml/include")}`,
    join(build, "src/libllama.a"),
    join(build, "ggml/src/libggml.a"),
    join(build, "ggml/src/libggml-cpu.a"),
    join(build, "ggml/src/libggml-base.a"),
    // Function names stay in the binary: the build check finds the dot-product kernel by name.
    "--profiling-funcs",
    "-sMODULARIZE=1",
    "-sEXPORT_NAME=createLlamaCpp",
    "-sENVIRONMENT=web,worker,node",
    "-sALLOW_MEMORY_GROWTH=1",
    "-sMAXIMUM_MEMORY=4GB",
    "-sINITIAL_MEMORY=64MB",
    "-sTOTAL_STACK=1MB",
    "-lworkerfs.js",
    "-sFORCE_FILESYSTEM=1",
    `-sEXPORTED_FUNCTIONS=${exported.join(",")}`,
    "-sEXPORTED_RUNTIME_METHODS=FS,WORKERFS,UTF8ToString,stringToUTF8,lengthBytesUTF8,HEAPU8,HEAP32,HEAPF32",
    ...extra,
    "-o",
    join(out, `${name}.js`),
  ]);
}

const { dir, description } = llamaSource({ reuse: relink });
withTiledKernel(dir);
mkdirSync(out, { recursive: true });
// llama.cpp reports a bad file or grammar by throwing: WebAssembly's own exceptions catch it.
const single = libraries(dir, "st", "-fwasm-exceptions");
link(dir, single.build, "st", "-fwasm-exceptions", []);
const threaded = libraries(dir, "mt", "-fwasm-exceptions -pthread");
// The pool is filled before the program starts: ggml's threads must exist before its first
// decode, since a worker started mid-call would never run while the caller waits for it.
link(dir, threaded.build, "mt", "-fwasm-exceptions -pthread", [
  "-sUSE_PTHREADS=1",
  "-sPTHREAD_POOL_SIZE=Module.threads",
]);
const emscripten = run("emcc", ["--version"]).split("\n")[0];
writeFileSync(
  join(out, "build.json"),
  `${JSON.stringify({ source: description, compiler: emscripten, kernels: { st: single.kernels, mt: threaded.kernels }, memory: "wasm32 (4 GB)" }, null, 2)}\n`,
);
console.log(`wrote ${out}`);

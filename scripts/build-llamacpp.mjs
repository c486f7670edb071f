#!/usr/bin/env node
/**
 * Builds llama.cpp for the browser with its WebAssembly SIMD kernels, into `wasm/llamacpp/`:
 * - `llamacpp-st.{js,wasm}`: one thread, for pages that are not cross-origin isolated;
 * - `llamacpp-mt.{js,wasm,worker.js}`: pthreads, a thread per core where the page is isolated;
 * - `llamacpp-st-relaxed.{js,wasm}`, `llamacpp-mt-relaxed.{js,wasm}`: the same two with relaxed
 *   SIMD's 8-bit dot product in our Q4_0 tiles, for browsers that have relaxed SIMD (Chromium
 *   since 114). The pthreads one shares `llamacpp-mt.worker.js`, which the build checks is the same;
 * - `build.json`: the source, the compilers, and the kernels CMake selected.
 *
 * Sources come from packages at build time, never copied into this repository: llama.cpp from
 * the git bundle that `node-llama-cpp` ships (`llama/gitRelease.bundle`), our thin C API from
 * `native/llamacpp/engine.cpp`. The compiler is Debian's `emscripten` (apt-get install emscripten).
 *
 * One change to llama.cpp's grammar matcher is ours too: a bound on the parses it keeps at once
 * (`withGrammarBound`), so no grammar can hold the engine. And one to ggml's WebAssembly
 * kernels: activations rounded to 8 bits as its other kernels round them, not truncated
 * (`withRoundedActivations`).
 *
 * One kernel is ours: `native/llamacpp/tiles.c`, Q4_0, Q8_0 and F16 weights two rows by up to six
 * tokens at a time, for prompts and generation alike (ggml has no WebAssembly matrix kernel, so
 * its products ran a row by a token at a time, and its F16 ones widened each half by a scalar
 * table lookup). `withTiledKernel` appends it to ggml's wasm kernels and has ggml's matrix
 * product call it.
 *
 * Why a second compiler: Debian's Emscripten 3.1.6 brings LLVM 14, which has no relaxed dot
 * product. Debian's clang 19 (apt-get install clang-19) compiles the one file our tiles are in,
 * ggml's `arch/wasm/quants.c`, for the `-relaxed` builds, with Emscripten's own flags
 * (`emcc --cflags`); everything else, and the link, stay Emscripten's. Only
 * `i16x8.relaxed_dot_i8x16_i7x16_s` is used: its opcode is the same in clang 19, in the
 * Emscripten's Binaryen (108) that rewrites the linked module, and in the final standard, where
 * the other relaxed instructions' opcodes moved. Floating-point contraction is off, so clang 19
 * emits no relaxed multiply-add either.
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
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
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
    throw new Error(`${file} has changed: expected exactly one "${from}" in it; update the patch that looks for it`);
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
  // The chunk plan, once ggml has made it, goes to `wi_mul_mat_plan` (a prompt's chunks take all
  // its tokens). The leading newline and indent pick the plain product, not the one by expert.
  const plan = "\n    const int64_t dr0 = (nr0 + nchunk0 - 1) / nchunk0;";
  source = replaceOnce(
    product,
    source,
    plan,
    `\n    wi_mul_mat_plan(src0, src1, nth, nr0, nr1, &nchunk0, &nchunk1);${plan}`,
  );
  source = replaceOnce(
    product,
    source,
    definition,
    [
      "void wi_mul_mat_plan(const struct ggml_tensor *, const struct ggml_tensor *, int, int64_t, int64_t, int64_t *, int64_t *);",
      definition,
    ].join("\n"),
  );
  writeFileSync(product, source);
}

/**
 * Activations rounded to the nearest 8-bit step, as ggml's x86 and reference code round them
 * (the clone, never this repository). ggml's WebAssembly `quantize_row_q8_0` and `_q8_1`
 * truncated toward zero, so every product with Q8_0, Q4_0 or Q4_1 weights was less exact here
 * than on native llama.cpp, by enough to move an embedding's cosine to it below 0.9999. Its
 * `quantize_row_q8_K` rounds already. Idempotent.
 */
function withRoundedActivations(dir) {
  const marker = "/* webgpu-inference: rounded activations */";
  const file = join(dir, "ggml/src/ggml-cpu/arch/wasm/quants.c");
  const text = readFileSync(file, "utf8");
  if (text.includes(marker)) return;
  const truncated = "const v128_t vi = wasm_i32x4_trunc_sat_f32x4(v);";
  if (text.split(truncated).length !== 3)
    throw new Error(
      `${file} has changed: expected "${truncated}" twice (q8_0 and q8_1); update withRoundedActivations`,
    );
  const rounded = `const v128_t vi = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(v)); ${marker}`;
  writeFileSync(file, text.replaceAll(truncated, rounded));
}

/** The most parses llama.cpp's grammar matcher may keep at once (see `withGrammarBound`). */
const grammarParses = 1024;

/**
 * A bound on llama.cpp's grammar matcher (the clone, never this repository): it keeps every parse
 * of an ambiguous grammar at once, each new one compared with all the others, so a grammar that
 * splits a text many ways (a schema's overlapping `anyOf` branches nested deep) froze the matcher
 * for minutes. Past `grammarParses`, advancing throws, and the request fails naming the cause
 * (native/llamacpp/engine.cpp catches it). The bound holds twice: within one parse's step (a
 * long token splits one parse many ways), and on the parses a token leaves in all, which a token
 * that splits each parse a little grows too, one token after another. Idempotent.
 */
function withGrammarBound(dir) {
  const marker = "/* webgpu-inference: grammar bound */";
  const file = join(dir, "src/llama-grammar.cpp");
  const text = readFileSync(file, "utf8");
  if (text.includes(marker)) return;
  const refusal = `throw std::runtime_error("the grammar is ambiguous: following it would keep more than ${grammarParses} parses at once; make its alternatives differ from their first characters (overlapping anyOf branches, nested optional parts)");`;
  // Each parse taken from the work list of `llama_grammar_advance_stack` first checks the bound.
  const taken = "        seen.insert(curr_stack);";
  const withinStep = replaceOnce(
    file,
    text,
    taken,
    `${taken} ${marker}
        if (new_stacks.size() > ${grammarParses}) {
            ${refusal}
        }`,
  );
  // And each parse a token leaves, kept by `llama_grammar_accept_token`.
  const kept = "                    stacks_new.emplace_back(surviving_stack);";
  writeFileSync(
    file,
    replaceOnce(
      file,
      withinStep,
      kept,
      `${kept}
                    if (stacks_new.size() > ${grammarParses}) {
                        ${refusal}
                    }`,
    ),
  );
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
  const kernels =
    "wasm (ggml-cpu/arch/wasm, SIMD128) with Q4_0, Q8_0 and F16 products in tiles (native/llamacpp/tiles.c)";
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
  "wi_embed",
  "wi_sampler",
  "wi_sample",
  "wi_tiles",
  "malloc",
  "free",
].map((name) => `_${name}`);

/** Debian's clang 19, for the one file compiled with relaxed SIMD (see the top of this file). */
const relaxedClang = "/usr/lib/llvm-19/bin/clang";
const relaxedFile = "ggml-cpu/arch/wasm/quants.c";

/**
 * Compiles ggml's `arch/wasm/quants.c`, with our tiles in it, by clang 19 with relaxed SIMD, with
 * the flags CMake gave Emscripten for it. Returns ggml-cpu's objects with that one in place of
 * Emscripten's, for `link`.
 */
function relaxedObjects(build, variant, flags) {
  if (!existsSync(relaxedClang))
    throw new Error(
      `${relaxedClang} is missing: the -relaxed builds need Debian's clang 19 (apt-get install clang-19)`,
    );
  const commands = JSON.parse(readFileSync(join(build, "compile_commands.json"), "utf8"));
  const objects = [];
  let compiled = "";
  for (const entry of commands) {
    const words = entry.command.split(/\s+/);
    const output = join(entry.directory, words[words.indexOf("-o") + 1]);
    if (!output.includes("/CMakeFiles/ggml-cpu.dir/")) continue;
    if (!entry.file.endsWith(relaxedFile)) {
      objects.push(output);
      continue;
    }
    compiled = join(build, `quants-relaxed-${variant}.o`);
    // Emscripten's own flags for clang, less WebAssembly exceptions: this C file throws none,
    // and clang 19 would want reference types for them, which Emscripten 3.1.6 does not emit.
    const ours = flags.split(" ").filter((flag) => flag && flag !== "-fwasm-exceptions");
    const emscripten = run("emcc", [...ours, "--cflags"])
      .trim()
      .split(/\s+/);
    const cmake = words.slice(1).filter((word, at, all) => {
      const previous = all[at - 1];
      return word !== "-fwasm-exceptions" && word !== "-o" && word !== "-c" && previous !== "-o" && previous !== "-c";
    });
    const relaxed = ["-mrelaxed-simd", "-ffp-contract=off", "-mno-multivalue", "-mno-reference-types"];
    run(relaxedClang, [...emscripten, ...cmake, ...relaxed, "-c", entry.file, "-o", compiled], {
      cwd: entry.directory,
    });
  }
  if (!compiled) throw new Error(`${build}/compile_commands.json has no ${relaxedFile}`);
  return [compiled, ...objects];
}

/**
 * Links our C API with llama.cpp's libraries into `folder` as `llamacpp-${variant}`; with
 * `cpuObjects`, those in place of ggml-cpu's library.
 */
function link(dir, build, variant, flags, extra, folder = out, cpuObjects = undefined) {
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
    ...(cpuObjects ?? [join(build, "ggml/src/libggml-cpu.a")]),
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
    join(folder, `${name}.js`),
  ]);
}

/**
 * The relaxed instructions in a module, by Binaryen's name, counted. Binaryen 108 names a final
 * opcode it knows under an earlier draft's name, so any relaxed instruction but the dot product
 * stops the build (see the top of this file).
 */
function relaxedInstructions(file) {
  const text = run("wasm-dis", ["--all-features", file], { maxBuffer: 1 << 30 });
  const counts = {};
  for (const [name] of text.matchAll(/\b[a-z0-9]+x[0-9]+\.[a-z0-9_]*(?:relaxed|laneselect|i7x16)[a-z0-9_]*/g))
    counts[name] = (counts[name] ?? 0) + 1;
  return counts;
}

/**
 * The `-relaxed` build of a variant: linked as the variant is, into a scratch folder under the
 * same name (its script then loads the same pthread worker script, which must be the same), and
 * moved beside it. Its script is its own: the pthreads one holds addresses in the module's memory.
 */
function linkRelaxed(dir, build, variant, flags, extra) {
  const scratch = join(build, "relaxed");
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  link(dir, build, variant, flags, extra, scratch, relaxedObjects(build, variant, flags));
  for (const file of readdirSync(scratch).filter((name) => name.endsWith(".worker.js")))
    if (!readFileSync(join(scratch, file)).equals(readFileSync(join(out, file))))
      throw new Error(`${file}: the relaxed build's pthread script differs from the plain build's`);
  const counts = relaxedInstructions(join(scratch, `llamacpp-${variant}.wasm`));
  const names = Object.keys(counts);
  if (names.length !== 1 || names[0] !== "i16x8.dot_i8x16_i7x16_s")
    throw new Error(`${variant}-relaxed: expected only i16x8.dot_i8x16_i7x16_s, found ${JSON.stringify(counts)}`);
  console.log(`${variant}-relaxed: ${counts[names[0]]} relaxed dot products, no other relaxed instruction`);
  for (const extension of ["js", "wasm"])
    renameSync(
      join(scratch, `llamacpp-${variant}.${extension}`),
      join(out, `llamacpp-${variant}-relaxed.${extension}`),
    );
}

const { dir, description } = llamaSource({ reuse: relink });
withTiledKernel(dir);
withRoundedActivations(dir);
withGrammarBound(dir);
mkdirSync(out, { recursive: true });
// llama.cpp reports a bad file or grammar by throwing: WebAssembly's own exceptions catch it.
const single = libraries(dir, "st", "-fwasm-exceptions");
link(dir, single.build, "st", "-fwasm-exceptions", []);
linkRelaxed(dir, single.build, "st", "-fwasm-exceptions", []);
const threaded = libraries(dir, "mt", "-fwasm-exceptions -pthread");
// The pool is filled before the program starts: ggml's threads must exist before its first
// decode, since a worker started mid-call would never run while the caller waits for it.
const pool = ["-sUSE_PTHREADS=1", "-sPTHREAD_POOL_SIZE=Module.threads"];
link(dir, threaded.build, "mt", "-fwasm-exceptions -pthread", pool);
linkRelaxed(dir, threaded.build, "mt", "-fwasm-exceptions -pthread", pool);
const emscripten = run("emcc", ["--version"]).split("\n")[0];
const clang = run(relaxedClang, ["--version"]).split("\n")[0];
const relaxedKernels = "the same, with relaxed SIMD's i16x8.relaxed_dot_i8x16_i7x16_s in the Q4_0 tiles";
console.log(`st-relaxed, mt-relaxed: ${relaxedKernels}`);
const build = {
  source: description,
  compiler: emscripten,
  relaxedCompiler: `${clang}, for ${relaxedFile} in the -relaxed builds`,
  kernels: { st: single.kernels, mt: threaded.kernels, "st-relaxed": relaxedKernels, "mt-relaxed": relaxedKernels },
  memory: "wasm32 (4 GB)",
};
writeFileSync(join(out, "build.json"), `${JSON.stringify(build, null, 2)}\n`);
console.log(`wrote ${out}`);

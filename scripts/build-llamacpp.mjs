#!/usr/bin/env node
/**
 * Builds llama.cpp for the browser with its WebAssembly SIMD kernels, into `wasm/llamacpp/`:
 * - `llamacpp-st.{js,wasm}`: one thread, for pages that are not cross-origin isolated;
 * - `llamacpp-mt.{js,wasm}`: pthreads, a thread per core where the page is isolated; its threads
 *   start from its own script;
 * - `llamacpp-st-relaxed.{js,wasm}`, `llamacpp-mt-relaxed.{js,wasm}`: the same two with relaxed
 *   SIMD's 8-bit dot product in our Q4_0 and Q5_0 tiles and Q4_K kernel, and its multiply-add in
 *   our F16 tiles, for browsers that have
 *   relaxed SIMD (Chromium since 114);
 * - `llamacpp-st64`, `llamacpp-mt64`, each also `-relaxed`: the same four with Memory64's 64-bit
 *   addresses (up to 16 GB), for models past what wasm32's 4 GB holds;
 * - `build.json`: the source, the compiler, and the kernels CMake selected.
 *
 * Sources come from packages at build time, never copied into this repository: llama.cpp from
 * the git bundle that `node-llama-cpp` ships (`llama/gitRelease.bundle`), our thin C API from
 * `native/llamacpp/engine.cpp`.
 *
 * The compiler is Debian trixie's Emscripten 3.1.69 (LLVM 19, Binaryen 120), in a build root that
 * scripts/trixie-root.mjs makes with debootstrap: bookworm's 3.1.6 cannot combine Memory64 with
 * pthreads, and its LLVM 14 has no relaxed dot product. One compiler builds every variant, the
 * relaxed tiles included (bench/results/emscripten.md measures the wasm32 builds of both).
 *
 * One change to llama.cpp's grammar matcher is ours too: a bound on the parses it keeps at once
 * (`withGrammarBound`), so no grammar can hold the engine. And one to ggml's WebAssembly
 * kernels: activations rounded to 8 bits as its other kernels round them, not truncated
 * (`withRoundedActivations`).
 *
 * Two kernels are ours. `native/llamacpp/tiles.c`: Q4_0, Q5_0, Q8_0 and F16 weights two rows by up
 * to six tokens at a time for prompts, a row at a time for generation (ggml has no WebAssembly
 * matrix kernel, so its products ran a row by a token at a time, and its F16 ones widened each
 * half by a scalar table lookup). `withTiledKernel` appends it to ggml's wasm kernels and has ggml's matrix
 * product call it; `withWidenedTokens` has the product widen a prompt's F16 tokens once for them.
 * The `-relaxed` builds compile the one file our tiles are in, ggml's
 * `arch/wasm/quants.c`, again with relaxed SIMD; only `i16x8.relaxed_dot_i8x16_i7x16_s` and the F16
 * tiles' own `f32x4.relaxed_madd` may be in them (the build checks): floating-point contraction is
 * off, so the compiler fuses nothing of ggml's.
 * And `native/llamacpp/kquants.c`: the Q4_K (relaxed builds) and Q6_K dot products of a Q4_K_M
 * file, under ggml's names (`withKQuantKernels`).
 *
 * Why the processor is named: Emscripten's CMake toolchain reports `x86` unless
 * EMSCRIPTEN_SYSTEM_PROCESSOR is set, and ggml then falls back to its generic scalar kernels.
 * The build stops if CMake did not print "Wasm detected".
 *
 * Usage: node scripts/build-llamacpp.mjs [--jobs N] [--relink] [--only st,mt,st64,mt64]
 *   --relink  reuse the last build's folders (in the build root's temporary folder): CMake
 *             compiles again only what changed (a change to native/llamacpp/tiles.c or kquants.c
 *             recompiles the one ggml file that includes it), then our C API is compiled and
 *             every variant linked.
 *   --only    build these variants (each with its -relaxed twin); build.json keeps the others'.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { availableParallelism } from "node:os";
import { llamaSource, llamaWork as work } from "./llama-source.mjs";
import { copyIn, ensureTrixieRoot, inTrixie, trixieRoot } from "./trixie-root.mjs";

const root = resolve(import.meta.dirname, "..");
const out = join(root, "wasm/llamacpp");
const relink = process.argv.includes("--relink");
const jobs = String(
  process.argv.includes("--jobs") ? process.argv[process.argv.indexOf("--jobs") + 1] : availableParallelism(),
);

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
 * A prompt's F16 tokens widened to floats once per product (the clone, never this repository):
 * ggml's plan sizes its work buffer for the floats past the halves, and each thread widens the
 * halves it has just converted, before the threads meet; the F16 tiles then read the floats (see
 * `wi_mul_mat_widen` in native/llamacpp/tiles.c). Idempotent.
 */
function withWidenedTokens(dir) {
  const marker = "/* webgpu-inference: widened tokens */";
  const product = join(dir, "ggml/src/ggml-cpu/ggml-cpu.c");
  let source = readFileSync(product, "utf8");
  if (source.includes(marker)) return;
  const definition = "void ggml_compute_forward_mul_mat(";
  source = replaceOnce(
    product,
    source,
    definition,
    [
      `${marker}`,
      "size_t wi_mul_mat_extra(const struct ggml_tensor *, const struct ggml_tensor *);",
      "void wi_mul_mat_widen(const struct ggml_tensor *, const struct ggml_tensor *, char *, int64_t, int64_t, int64_t);",
      definition,
    ].join("\n"),
  );
  // The plain product's conversion (its `#endif` is indented; the product by expert's is not).
  const converted = [
    "                               (ne10_block_end - ne10_block_start) * bs);",
    "                }",
    "            }",
    "        }",
    "    #endif",
  ].join("\n");
  source = replaceOnce(
    product,
    source,
    converted,
    converted.replace(
      "* bs);",
      "* bs);\n                    wi_mul_mat_widen(src0, src1, wdata, i11, ne10_block_start * bs, (ne10_block_end - ne10_block_start) * bs);",
    ),
  );
  const sized = "cur = ggml_row_size(vec_dot_type, ggml_nelements(node->src[1]));";
  source = replaceOnce(
    product,
    source,
    sized,
    `${sized}\n                            cur += wi_mul_mat_extra(node->src[0], node->src[1]);`,
  );
  writeFileSync(product, source);
}

/**
 * Our Q4_K and Q6_K dot products into ggml's source (the clone, never this repository): ggml's
 * two renamed `wi_ggml_vec_dot_…`, and ours appended after the tiles under ggml's names, falling
 * back to ggml's where the tiles are off (see native/llamacpp/kquants.c). Idempotent.
 */
function withKQuantKernels(dir) {
  const marker = "/* webgpu-inference: kquants.c */";
  const kernels = join(dir, "ggml/src/ggml-cpu/arch/wasm/quants.c");
  let text = readFileSync(kernels, "utf8");
  if (text.includes(marker)) return;
  for (const type of ["q4_K", "q6_K"]) {
    const definition = `void ggml_vec_dot_${type}_q8_K(int n,`;
    text = replaceOnce(kernels, text, definition, `static void wi_ggml_vec_dot_${type}_q8_K(int n,`);
  }
  writeFileSync(kernels, [text, marker, `#include "${join(root, "native/llamacpp/kquants.c")}"`, ""].join("\n"));
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

/**
 * ggml's four-half loads and stores in WebAssembly SIMD (the clone, never this repository): its
 * `__wasm_f16x4_load` widened each half by a scalar lookup in a 256 KB table, and
 * `__wasm_f16x4_store` narrowed each by the scalar bit trick of `ggml_compute_fp32_to_fp16`.
 * Flash attention's F16 products and sums take them at every cached token, and LLVM 19 compiles
 * that scalar code slower than LLVM 14 did. These are the same bit tricks four lanes at a time
 * (ggml's table holds the load's trick's own results), so every half and float is the same as
 * before. Idempotent.
 */
function withVectorHalves(dir) {
  const marker = "/* webgpu-inference: vector halves */";
  const file = join(dir, "ggml/src/ggml-cpu/simd-mappings.h");
  const text = readFileSync(file, "utf8");
  if (text.includes(marker)) return;
  const load = `inline static v128_t __wasm_f16x4_load(const ggml_fp16_t * p) {
    float tmp[4];

    tmp[0] = GGML_CPU_FP16_TO_FP32(p[0]);
    tmp[1] = GGML_CPU_FP16_TO_FP32(p[1]);
    tmp[2] = GGML_CPU_FP16_TO_FP32(p[2]);
    tmp[3] = GGML_CPU_FP16_TO_FP32(p[3]);

    return wasm_v128_load(tmp);
}`;
  const store = `inline static void __wasm_f16x4_store(ggml_fp16_t * p, v128_t x) {
    float tmp[4];

    wasm_v128_store(tmp, x);

    p[0] = GGML_CPU_FP32_TO_FP16(tmp[0]);
    p[1] = GGML_CPU_FP32_TO_FP16(tmp[1]);
    p[2] = GGML_CPU_FP32_TO_FP16(tmp[2]);
    p[3] = GGML_CPU_FP32_TO_FP16(tmp[3]);
}`;
  // ggml_compute_fp16_to_fp32 (ggml-impl.h), a lane each.
  const vectorLoad = `inline static v128_t __wasm_f16x4_load(const ggml_fp16_t * p) { ${marker}
    const v128_t w = wasm_i32x4_shl(wasm_u32x4_load16x4(p), 16);
    const v128_t sign = wasm_v128_and(w, wasm_u32x4_splat(0x80000000u));
    const v128_t two_w = wasm_i32x4_add(w, w);
    const v128_t normalized = wasm_f32x4_mul(
        wasm_i32x4_add(wasm_u32x4_shr(two_w, 4), wasm_u32x4_splat(0xE0u << 23)), wasm_f32x4_splat(0x1.0p-112f));
    const v128_t denormalized = wasm_f32x4_sub(
        wasm_v128_or(wasm_u32x4_shr(two_w, 17), wasm_u32x4_splat(126u << 23)), wasm_f32x4_splat(0.5f));
    const v128_t small = wasm_u32x4_lt(two_w, wasm_u32x4_splat(1u << 27));
    return wasm_v128_or(sign, wasm_v128_bitselect(denormalized, normalized, small));
}`;
  // ggml_compute_fp32_to_fp16 (ggml-impl.h), a lane each.
  const vectorStore = `inline static void __wasm_f16x4_store(ggml_fp16_t * p, v128_t x) {
    v128_t base = wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_abs(x), wasm_f32x4_splat(0x1.0p+112f)),
                                 wasm_f32x4_splat(0x1.0p-110f));
    const v128_t shl1_w = wasm_i32x4_add(x, x);
    const v128_t sign = wasm_v128_and(x, wasm_u32x4_splat(0x80000000u));
    const v128_t bias = wasm_u32x4_max(wasm_v128_and(shl1_w, wasm_u32x4_splat(0xFF000000u)),
                                       wasm_u32x4_splat(0x71000000u));
    base = wasm_f32x4_add(wasm_i32x4_add(wasm_u32x4_shr(bias, 1), wasm_u32x4_splat(0x07800000u)), base);
    const v128_t nonsign = wasm_i32x4_add(wasm_v128_and(wasm_u32x4_shr(base, 13), wasm_u32x4_splat(0x7C00u)),
                                          wasm_v128_and(base, wasm_u32x4_splat(0xFFFu)));
    const v128_t nan = wasm_u32x4_gt(shl1_w, wasm_u32x4_splat(0xFF000000u));
    const v128_t halves = wasm_v128_or(wasm_u32x4_shr(sign, 16),
                                       wasm_v128_bitselect(wasm_u32x4_splat(0x7E00u), nonsign, nan));
    wasm_v128_store64_lane(p, wasm_u16x8_narrow_i32x4(halves, halves), 0);
}`;
  writeFileSync(file, replaceOnce(file, replaceOnce(file, text, load, vectorLoad), store, vectorStore));
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

/** What a module may grow to: wasm32 addresses 4 GB; Memory64, what Chromium gives it. */
const maximumMemory = { wasm32: "4GB", wasm64: "16GB" };

/** Runs `command` in the trixie build root, in `cwd`; paths are the same in the root as here. */
function exec(command, args, { cwd = "/", ...options } = {}) {
  return inTrixie(cwd, command, args, options);
}

/** A path of the build root's as this system sees it. */
const here = (path) => join(trixieRoot, path);

/**
 * Configures (unless `--relink` finds it configured) and builds llama.cpp's static libraries;
 * returns the kernels CMake chose. A relink rebuilds only what changed since, by CMake's own
 * tracking (tiles.c recompiles the one file that includes it).
 */
function libraries(dir, variant, flags, memory = "wasm32") {
  const build = join(work, `build-${variant}`);
  const log = here(join(build, "configure.log"));
  if (!relink || !existsSync(log)) configure(dir, build, log, flags, memory);
  const kernels = kernelsOf(variant, readFileSync(log, "utf8"));
  exec("cmake", ["--build", build, "--target", "llama", "-j", jobs], { stdio: ["ignore", "ignore", "inherit"] });
  return { build, kernels };
}

/** A fresh CMake configuration of llama.cpp in `build`, its output kept in `log`. */
function configure(dir, build, log, flags, memory) {
  rmSync(here(build), { recursive: true, force: true });
  const output = exec("emcmake", [
    "cmake",
    "-S",
    dir,
    "-B",
    build,
    "-DCMAKE_BUILD_TYPE=Release",
    `-DEMSCRIPTEN_SYSTEM_PROCESSOR=${memory}`,
    `-DLLAMA_WASM_MEM64=${memory === "wasm64" ? "ON" : "OFF"}`,
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
  writeFileSync(log, output);
}

/** The kernels CMake's output says ggml selected; the build stops unless they are the wasm SIMD ones. */
function kernelsOf(variant, configure) {
  if (!configure.includes("Wasm detected"))
    throw new Error(`${variant}: ggml did not select its wasm kernels; CMake said:\n${configure}`);
  const kernels =
    "wasm (ggml-cpu/arch/wasm, SIMD128) with Q4_0, Q5_0, Q8_0 and F16 products in tiles (native/llamacpp/tiles.c) and Q6_K ones of our own (native/llamacpp/kquants.c)";
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

const relaxedFile = "ggml-cpu/arch/wasm/quants.c";

/**
 * ggml-cpu's objects as CMake compiled them, but for `arch/wasm/quants.c` (our tiles are in it),
 * which `compile(entry, cmake, object)` compiles again with relaxed SIMD, given CMake's own
 * arguments for it less its input and output. For `link`.
 */
function withRelaxedQuants(build, variant, compile) {
  const commands = JSON.parse(readFileSync(here(join(build, "compile_commands.json")), "utf8"));
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
    const cmake = words.slice(1).filter((word, at, all) => {
      const previous = all[at - 1];
      return word !== "-o" && word !== "-c" && previous !== "-o" && previous !== "-c";
    });
    compile(entry, cmake, compiled);
  }
  if (!compiled) throw new Error(`${build}/compile_commands.json has no ${relaxedFile}`);
  return [compiled, ...objects];
}

/** The relaxed objects: the tiles' file compiled again with CMake's command and relaxed SIMD. */
function relaxedObjects(build, variant) {
  return withRelaxedQuants(build, variant, (entry, cmake, object) =>
    inTrixie(entry.directory, entry.command.split(/\s+/)[0], [
      ...cmake,
      "-mrelaxed-simd",
      "-ffp-contract=off",
      "-c",
      entry.file,
      "-o",
      object,
    ]),
  );
}

/**
 * What a Memory64 module's JavaScript converts at each export of our C API that takes or gives
 * a pointer: its result, then its arguments, `p` a pointer (a BigInt in the module, a Number in
 * JavaScript), `_` anything else. The worker's code then calls both builds alike; the exports
 * with no pointer need no conversion.
 */
const signatures = {
  wi_error: "p",
  wi_log: "p",
  wi_system_info: "p",
  wi_load: "_p____",
  wi_tokenize: "_p___p_",
  wi_piece: "__p_",
  wi_decode: "_p__",
  wi_embed: "_pp_p",
  wi_sampler: "______pp_p",
  wi_sample: "__pp_",
};

/**
 * Links our C API with llama.cpp's libraries as `name` in the build root, and copies it to `out`;
 * with `cpuObjects`, those in place of ggml-cpu's library.
 */
function link(dir, build, name, flags, extra, memory, cpuObjects = undefined) {
  const target = join(build, "link");
  mkdirSync(here(target), { recursive: true });
  const memory64 =
    memory === "wasm64"
      ? [
          "-sMEMORY64=1",
          `-sSIGNATURE_CONVERSIONS=${Object.entries(signatures)
            .map(([symbol, signature]) => `${symbol}:${signature}`)
            .join(",")}`,
        ]
      : [];
  exec("em++", [
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
    `-sMAXIMUM_MEMORY=${maximumMemory[memory]}`,
    "-sINITIAL_MEMORY=64MB",
    "-sSTACK_SIZE=1MB",
    "-lworkerfs.js",
    "-sFORCE_FILESYSTEM=1",
    `-sEXPORTED_FUNCTIONS=${exported.join(",")}`,
    "-sEXPORTED_RUNTIME_METHODS=FS,WORKERFS,UTF8ToString,stringToUTF8,lengthBytesUTF8,HEAPU8,HEAP32,HEAPF32",
    ...memory64,
    ...extra,
    "-o",
    join(target, `${name}.js`),
  ]);
  const wasm = here(join(target, `${name}.wasm`));
  const script = readFileSync(here(join(target, `${name}.js`)), "utf8");
  cpSync(wasm, join(out, `${name}.wasm`));
  writeFileSync(join(out, `${name}.js`), memory === "wasm64" ? withAddressKey(`${name}.js`, script) : script);
  return join(target, `${name}.wasm`);
}

/**
 * A Memory64 script that names its memory's addresses as browsers now read them. Emscripten
 * 3.1.69 writes `index: "i64"`, the JS API's first name for it; Chromium reads `address: "i64"`,
 * and without it takes a 64-bit memory's sizes as Numbers where it wants BigInts, so every
 * growth of the memory failed ("insufficient memory" at the first model load). Both names are
 * given, so either reading holds.
 */
function withAddressKey(file, script) {
  const first = 'index:"i64"';
  if (!script.includes(first)) throw new Error(`${file} has changed: expected ${first} in it; update withAddressKey`);
  return script.replaceAll(first, 'index:"i64",address:"i64"');
}

/**
 * The relaxed instructions in a module, by Binaryen's name, counted. Only the two the tiles take
 * may be there (see `linkRelaxed`): each is one the final standard and Chromium agree on.
 */
function relaxedInstructions(file) {
  const text = exec("wasm-dis", ["--all-features", file]);
  const counts = {};
  for (const [name] of text.matchAll(/\b[a-z0-9]+x[0-9]+\.[a-z0-9_]*(?:relaxed|laneselect|i7x16)[a-z0-9_]*/g))
    counts[name] = (counts[name] ?? 0) + 1;
  return counts;
}

/** The `-relaxed` build of a variant: linked as the variant is, with the relaxed tiles. */
function linkRelaxed(dir, build, variant, flags, extra, memory) {
  const linked = link(dir, build, `llamacpp-${variant}-relaxed`, flags, extra, memory, relaxedObjects(build, variant));
  const counts = relaxedInstructions(linked);
  // As Binaryen 120 names them: the 8-bit dot product (Q4_0, Q5_0 and Q4_K) and the float
  // multiply-add (F16).
  const expected = ["i16x8.dot_i8x16_i7x16_s", "f32x4.relaxed_madd"];
  const names = Object.keys(counts).sort();
  if (names.join() !== [...expected].sort().join())
    throw new Error(`${variant}-relaxed: expected ${expected.join(" and ")} only, found ${JSON.stringify(counts)}`);
  console.log(`${variant}-relaxed: ${JSON.stringify(counts)}, no other relaxed instruction`);
}

/** The variants to build (`--only st64,mt64`), all by default. */
const only = process.argv.includes("--only") ? process.argv[process.argv.indexOf("--only") + 1].split(",") : null;
const wanted = (variant) => only === null || only.includes(variant);
const relaxedKernels =
  "the same, with relaxed SIMD's i16x8.relaxed_dot_i8x16_i7x16_s in the Q4_0 and Q5_0 tiles and our Q4_K products, " +
  "and its f32x4.relaxed_madd in the F16 tiles";
// What an earlier build wrote stays for the variants this one leaves alone.
const previous = existsSync(join(out, "build.json")) ? JSON.parse(readFileSync(join(out, "build.json"), "utf8")) : {};
const kernels = { ...previous.kernels };

/**
 * Builds a variant and its relaxed twin: `st`, one thread; `mt`, pthreads. The pool is filled
 * before the program starts: ggml's threads must exist before its first decode, since a worker
 * started mid-call would never run while the caller waits for it.
 */
function buildVariant(dir, variant, memory) {
  const threaded = variant.startsWith("mt");
  // llama.cpp reports a bad file or grammar by throwing: WebAssembly's own exceptions catch it.
  const flags = `-fwasm-exceptions -mbulk-memory -mnontrapping-fptoint${threaded ? " -pthread" : ""}`;
  const pool = threaded ? ["-sPTHREAD_POOL_SIZE=Module.threads"] : [];
  const built = libraries(dir, variant, flags, memory);
  const plain = relaxedInstructions(link(dir, built.build, `llamacpp-${variant}`, flags, pool, memory));
  if (Object.keys(plain).length)
    throw new Error(`${variant}: expected no relaxed instruction, found ${JSON.stringify(plain)}`);
  linkRelaxed(dir, built.build, variant, flags, pool, memory);
  kernels[variant] = built.kernels;
  kernels[`${variant}-relaxed`] = relaxedKernels;
}

const { dir, description } = llamaSource({ reuse: relink });
withTiledKernel(dir);
withWidenedTokens(dir);
withKQuantKernels(dir);
withRoundedActivations(dir);
withVectorHalves(dir);
withGrammarBound(dir);
mkdirSync(out, { recursive: true });
const compiler = `${ensureTrixieRoot()}, in a Debian trixie build root (scripts/trixie-root.mjs)`;
// The root compiles the same patched clone, and our C API, at the same paths.
copyIn(dir);
copyIn(join(root, "native"));
for (const variant of ["st", "mt"].filter(wanted)) buildVariant(dir, variant, "wasm32");
for (const variant of ["st64", "mt64"].filter(wanted)) buildVariant(dir, variant, "wasm64");
const build = {
  source: description,
  compiler,
  kernels,
  memory: "wasm32 (4 GB) for st and mt; wasm64 (Memory64, 16 GB) for st64 and mt64",
};
writeFileSync(join(out, "build.json"), `${JSON.stringify(build, null, 2)}\n`);
console.log(`wrote ${out}`);

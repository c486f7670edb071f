// Q4_0 weights × a prompt's Q8_0 tokens in tiles of two rows by up to six tokens, for ggml's
// WebAssembly CPU backend: the project's own matrix kernel. scripts/build-llamacpp.mjs appends
// this file to ggml's `arch/wasm/quants.c` and has ggml's matrix product hand each chunk of a
// Q4_0 product with two or more tokens to `wi_mul_mat_q4_0` before its own code.
//
// Why: ggml has no WebAssembly matrix kernel. Its dot product takes one weight row and one token,
// so a prompt unpacked every weight block again for every token and widened every token block
// again for every row. Here a chunk's tokens are widened to 16-bit lanes once, and each weight
// block is unpacked once for up to six tokens. Measured: the benchmark's 30-token Q4_0 prefill
// in Chromium 156 rose from 25 to 41 tok/s on one thread (bench/results/cpu.md; our former
// pairs, two rows by two tokens, had taken it as 28 + 2 tokens); in Node 20's older V8, 1.25× on
// 30 or 31 tokens and no change on lengths the pairs took. Generation (one token) keeps ggml's
// kernel.
//
// Invariants:
// - Each (row, token) sum is ggml's kernel's, bit for bit: the same products summed in the same
//   lanes in the same order, the same scales, the lanes summed as ggml sums them, and an odd last
//   block added afterwards in scalar code, as ggml adds it.
// - Any tile shape is handled (odd rows, any number of tokens), so ggml's chunking needs no
//   particular prompt length.
// - Nothing is changed outside the chunk's own part of the result.

#if !defined(__wasm_simd128__)
#error "the llama.cpp build compiles with WebAssembly SIMD (-msimd128)"
#endif

// The most tokens a tile holds. Measured in V8 on x86-64: two rows by six tokens beat two by
// four, two by eight and four rows by two or four (more sums than V8 keeps in registers).
#define WI_TILE_TOKENS 6

// A token's block widened: its 32 values as 16-bit lanes.
typedef struct {
    int16_t values[QK8_0];
} wi_widened_block;

static inline v128_t wi_block_dot(v128_t x0, v128_t x1, v128_t x2, v128_t x3, const wi_widened_block * y) {
    return wasm_i32x4_add(
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x0, wasm_v128_load(y->values)),
                       wasm_i32x4_dot_i16x8(x1, wasm_v128_load(y->values + 8))),
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x2, wasm_v128_load(y->values + 16)),
                       wasm_i32x4_dot_i16x8(x3, wasm_v128_load(y->values + 24))));
}

// An odd last block, computed as ggml's kernel computes it.
static inline float wi_scalar_block(const block_q4_0 * GGML_RESTRICT x, const block_q8_0 * GGML_RESTRICT y) {
    int low = 0, high = 0;
    for (int j = 0; j < QK8_0 / 2; j++) {
        low += ((x->qs[j] & 0x0F) - 8) * y->qs[j];
        high += ((x->qs[j] >> 4) - 8) * y->qs[j + QK8_0 / 2];
    }
    return (low + high) * GGML_CPU_FP16_TO_FP32(x->d) * GGML_CPU_FP16_TO_FP32(y->d);
}

// One tile: `rows` weight rows (`row_bytes` apart) by `tokens` widened tokens (`blocks` blocks
// each, their scales in `scales`), into s[token * bs + row]. Called with constant shapes only,
// so the compiler unrolls the loops over rows and tokens and keeps the sums in registers.
static inline __attribute__((always_inline)) void wi_tile(
    const int rows, const int tokens, const int blocks, const char * GGML_RESTRICT weights, const size_t row_bytes,
    const wi_widened_block * GGML_RESTRICT widened, const float * GGML_RESTRICT scales,
    const block_q8_0 * const * GGML_RESTRICT quantized, float * GGML_RESTRICT s, const size_t bs) {
    const v128_t low_mask = wasm_i8x16_splat(0x0F);
    const v128_t offset = wasm_i8x16_splat(8);
    v128_t sums[2][WI_TILE_TOKENS];
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < tokens; t++) sums[r][t] = wasm_f32x4_splat(0.0f);
    // ggml's kernel takes blocks in twos and leaves an odd last one to scalar code.
    const int paired_blocks = blocks & ~1;
    for (int block = 0; block < paired_blocks; block++) {
        v128_t x[2][4];
        float row_scale[2];
        for (int r = 0; r < rows; r++) {
            const block_q4_0 * row = (const block_q4_0 *) (weights + r * row_bytes) + block;
            const v128_t packed = wasm_v128_load(row->qs);
            const v128_t low = wasm_i8x16_sub(wasm_v128_and(packed, low_mask), offset);
            const v128_t high = wasm_i8x16_sub(wasm_u8x16_shr(packed, 4), offset);
            x[r][0] = wasm_i16x8_extend_low_i8x16(low);
            x[r][1] = wasm_i16x8_extend_high_i8x16(low);
            x[r][2] = wasm_i16x8_extend_low_i8x16(high);
            x[r][3] = wasm_i16x8_extend_high_i8x16(high);
            row_scale[r] = GGML_CPU_FP16_TO_FP32(row->d);
        }
        for (int t = 0; t < tokens; t++) {
            const wi_widened_block * y = widened + t * blocks + block;
            const float token_scale = scales[t * blocks + block];
            for (int r = 0; r < rows; r++) {
                const v128_t dot = wi_block_dot(x[r][0], x[r][1], x[r][2], x[r][3], y);
                sums[r][t] = wasm_f32x4_add(
                    sums[r][t],
                    wasm_f32x4_mul(wasm_f32x4_convert_i32x4(dot), wasm_f32x4_splat(row_scale[r] * token_scale)));
            }
        }
    }
    for (int t = 0; t < tokens; t++) {
        for (int r = 0; r < rows; r++) {
            float sum = wasm_f32x4_extract_lane(sums[r][t], 0) + wasm_f32x4_extract_lane(sums[r][t], 1) +
                        wasm_f32x4_extract_lane(sums[r][t], 2) + wasm_f32x4_extract_lane(sums[r][t], 3);
            if (blocks & 1)
                sum += wi_scalar_block((const block_q4_0 *) (weights + r * row_bytes) + paired_blocks,
                                       quantized[t] + paired_blocks);
            s[t * bs + r] = sum;
        }
    }
}

// Widens `tokens` Q8_0 tokens into `widened` and their scales into `scales`.
static void wi_widen(const int tokens, const int blocks, const block_q8_0 * const * GGML_RESTRICT quantized,
                     wi_widened_block * GGML_RESTRICT widened, float * GGML_RESTRICT scales) {
    for (int t = 0; t < tokens; t++) {
        for (int block = 0; block < blocks; block++) {
            const block_q8_0 * y = quantized[t] + block;
            wi_widened_block * out = widened + t * blocks + block;
            const v128_t low = wasm_v128_load(y->qs);
            const v128_t high = wasm_v128_load(y->qs + 16);
            wasm_v128_store(out->values, wasm_i16x8_extend_low_i8x16(low));
            wasm_v128_store(out->values + 8, wasm_i16x8_extend_high_i8x16(low));
            wasm_v128_store(out->values + 16, wasm_i16x8_extend_low_i8x16(high));
            wasm_v128_store(out->values + 24, wasm_i16x8_extend_high_i8x16(high));
            scales[t * blocks + block] = GGML_CPU_FP16_TO_FP32(y->d);
        }
    }
}

// Each (rows, tokens) shape as a function of its own, unrolled. Why not one function with a case
// per shape: V8 then allocates registers for all of them at once and spills the sums (about 1.2×
// slower in V8, measured).
#define WI_TILE_SHAPE(ROWS, TOKENS)                                                                   \
    static __attribute__((noinline)) void wi_tile_##ROWS##_##TOKENS(                                  \
        const int blocks, const char * weights, const size_t row_bytes, const wi_widened_block * widened, \
        const float * scales, const block_q8_0 * const * quantized, float * s, const size_t bs) {        \
        wi_tile(ROWS, TOKENS, blocks, weights, row_bytes, widened, scales, quantized, s, bs);        \
    }
WI_TILE_SHAPE(2, 1) WI_TILE_SHAPE(2, 2) WI_TILE_SHAPE(2, 3) WI_TILE_SHAPE(2, 4) WI_TILE_SHAPE(2, 5) WI_TILE_SHAPE(2, 6)
WI_TILE_SHAPE(1, 1) WI_TILE_SHAPE(1, 2) WI_TILE_SHAPE(1, 3) WI_TILE_SHAPE(1, 4) WI_TILE_SHAPE(1, 5) WI_TILE_SHAPE(1, 6)

typedef void (*wi_tile_shape)(int, const char *, size_t, const wi_widened_block *, const float *,
                              const block_q8_0 * const *, float *, size_t);

// The shapes by rows (1 or 2), then tokens (1 to WI_TILE_TOKENS).
static const wi_tile_shape wi_tile_shapes[2][WI_TILE_TOKENS] = {
    {wi_tile_1_1, wi_tile_1_2, wi_tile_1_3, wi_tile_1_4, wi_tile_1_5, wi_tile_1_6},
    {wi_tile_2_1, wi_tile_2_2, wi_tile_2_3, wi_tile_2_4, wi_tile_2_5, wi_tile_2_6},
};

// ggml's matrix product calls this for each chunk (rows [row_start, row_end) of the weights by
// tokens [token_start, token_end)) once `quantized_tokens` holds the tokens as Q8_0. Returns 1
// when it computed the chunk, 0 when the product is not ours (not Q4_0 by F32 tokens, one token,
// or batched in more than two dimensions) and ggml's own code should.
int wi_mul_mat_q4_0(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                    struct ggml_tensor * result, const void * quantized_tokens, int64_t row_start, int64_t row_end,
                    int64_t token_start, int64_t token_end);

int wi_mul_mat_q4_0(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                    struct ggml_tensor * result, const void * quantized_tokens, int64_t row_start, int64_t row_end,
                    int64_t token_start, int64_t token_end) {
    if (weights_tensor->type != GGML_TYPE_Q4_0 || tokens_tensor->type != GGML_TYPE_F32) return 0;
    if (tokens_tensor->ne[1] < 2 || weights_tensor->ne[2] != 1 || weights_tensor->ne[3] != 1 ||
        tokens_tensor->ne[2] != 1 || tokens_tensor->ne[3] != 1)
        return 0;
    const int blocks = (int) (weights_tensor->ne[0] / QK8_0);
    const size_t token_bytes = ggml_row_size(GGML_TYPE_Q8_0, weights_tensor->ne[0]);
    const size_t row_bytes = weights_tensor->nb[1];
    const size_t bs = result->nb[1] / sizeof(float);
    // Each thread's scratch for a tile's widened tokens, sized for the widest rows seen and kept:
    // one allocation per thread, not one per chunk (a product has about a hundred chunks).
    static _Thread_local wi_widened_block * widened = NULL;
    static _Thread_local int widened_blocks = 0;
    if (blocks > widened_blocks) {
        const size_t bytes = (size_t) WI_TILE_TOKENS * blocks * (sizeof(wi_widened_block) + sizeof(float));
        wi_widened_block * grown = realloc(widened, bytes);
        if (!grown) return 0;
        widened = grown;
        widened_blocks = blocks;
    }
    float * scales = (float *) (widened + WI_TILE_TOKENS * widened_blocks);
    for (int64_t token = token_start; token < token_end; token += WI_TILE_TOKENS) {
        const int tokens = (int) MIN(WI_TILE_TOKENS, token_end - token);
        const block_q8_0 * quantized[WI_TILE_TOKENS];
        for (int t = 0; t < tokens; t++)
            quantized[t] = (const block_q8_0 *) ((const char *) quantized_tokens + (token + t) * token_bytes);
        wi_widen(tokens, blocks, quantized, widened, scales);
        for (int64_t row = row_start; row < row_end; row += 2) {
            const int rows = (int) MIN(2, row_end - row);
            wi_tile_shapes[rows - 1][tokens - 1](blocks, (const char *) weights_tensor->data + row * row_bytes,
                                                 row_bytes, widened, scales, quantized,
                                                 (float *) result->data + token * bs + row, bs);
        }
    }
    return 1;
}

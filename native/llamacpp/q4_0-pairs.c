// Q4_0 × Q8_0 two rows by two columns at a time, for ggml's WebAssembly CPU backend: the project's
// own kernel, appended to ggml's `arch/wasm/quants.c` by scripts/build-llamacpp.mjs, which also
// renames ggml's one-row kernel to `ggml_vec_dot_q4_0_q8_0_one` and lets ggml's matrix product
// ask for pairs (`nrows = 2`, as it does for Arm's int8 matrix instructions).
//
// Why: ggml has no WebAssembly matrix kernel, so a prompt's matrix products ran one row by one
// column at a time, unpacking every weight block again for every prompt token. Here each
// weight block is unpacked once for two prompt tokens, and each token block widened once for two
// weight rows: about 1.4× faster prompt evaluation (Q4_0, measured in V8). Generation (one
// column) keeps ggml's kernel.
//
// Invariants:
// - ggml calls this with nrc == 2 only when both the rows and the columns come in pairs
//   (ggml_compute_forward_mul_mat checks), and with nrc == 1 otherwise.
// - The results are bit-identical to ggml's kernel: each (row, column) sum is accumulated in the
//   same lanes, in the same order, with the same scales.
// - Layout, as ggml's: s[0] = row 0 · column 0, s[1] = row 1 · column 0, s[bs] = row 0 · column 1,
//   s[bs + 1] = row 1 · column 1; rows are bx bytes apart, columns by bytes apart.

#if !defined(__wasm_simd128__)
#error "the llama.cpp build compiles with WebAssembly SIMD (-msimd128)"
#endif

// The 32 four-bit weights of a block, less 8, as four vectors of 16-bit lanes.
struct wi_q4_wide { v128_t a, b, c, d; };
// The 32 eight-bit values of a block, as four vectors of 16-bit lanes.
struct wi_q8_wide { v128_t a, b, c, d; };

static inline struct wi_q4_wide wi_widen_q4(const block_q4_0 * GGML_RESTRICT block) {
    const v128_t packed = wasm_v128_load(block->qs);
    const v128_t low = wasm_i8x16_sub(wasm_v128_and(packed, wasm_i8x16_splat(0x0F)), wasm_i8x16_splat(8));
    const v128_t high = wasm_i8x16_sub(wasm_u8x16_shr(packed, 4), wasm_i8x16_splat(8));
    return (struct wi_q4_wide){
        wasm_i16x8_extend_low_i8x16(low), wasm_i16x8_extend_high_i8x16(low),
        wasm_i16x8_extend_low_i8x16(high), wasm_i16x8_extend_high_i8x16(high),
    };
}

static inline struct wi_q8_wide wi_widen_q8(const block_q8_0 * GGML_RESTRICT block) {
    const v128_t low = wasm_v128_load(block->qs);
    const v128_t high = wasm_v128_load(block->qs + 16);
    return (struct wi_q8_wide){
        wasm_i16x8_extend_low_i8x16(low), wasm_i16x8_extend_high_i8x16(low),
        wasm_i16x8_extend_low_i8x16(high), wasm_i16x8_extend_high_i8x16(high),
    };
}

// One block's integer dot product in four 32-bit lanes, summed as ggml's kernel sums it.
static inline v128_t wi_block_dot(struct wi_q4_wide x, struct wi_q8_wide y) {
    return wasm_i32x4_add(
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x.a, y.a), wasm_i32x4_dot_i16x8(x.b, y.b)),
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x.c, y.c), wasm_i32x4_dot_i16x8(x.d, y.d)));
}

static inline v128_t wi_accumulate(v128_t sum, v128_t dot, float scale) {
    return wasm_f32x4_add(sum, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(dot), wasm_f32x4_splat(scale)));
}

static inline float wi_lanes(v128_t sum) {
    return wasm_f32x4_extract_lane(sum, 0) + wasm_f32x4_extract_lane(sum, 1) +
           wasm_f32x4_extract_lane(sum, 2) + wasm_f32x4_extract_lane(sum, 3);
}

// One block of both rows against both columns, into the four sums.
static inline void wi_pairs_step(const block_q4_0 * GGML_RESTRICT x0, const block_q4_0 * GGML_RESTRICT x1,
                              const block_q8_0 * GGML_RESTRICT y0, const block_q8_0 * GGML_RESTRICT y1, int block,
                              v128_t * sum00, v128_t * sum10, v128_t * sum01, v128_t * sum11) {
    const struct wi_q4_wide row0 = wi_widen_q4(&x0[block]);
    const struct wi_q4_wide row1 = wi_widen_q4(&x1[block]);
    const struct wi_q8_wide column0 = wi_widen_q8(&y0[block]);
    const struct wi_q8_wide column1 = wi_widen_q8(&y1[block]);
    const float d0 = GGML_CPU_FP16_TO_FP32(x0[block].d), d1 = GGML_CPU_FP16_TO_FP32(x1[block].d);
    const float e0 = GGML_CPU_FP16_TO_FP32(y0[block].d), e1 = GGML_CPU_FP16_TO_FP32(y1[block].d);
    *sum00 = wi_accumulate(*sum00, wi_block_dot(row0, column0), d0 * e0);
    *sum10 = wi_accumulate(*sum10, wi_block_dot(row1, column0), d1 * e0);
    *sum01 = wi_accumulate(*sum01, wi_block_dot(row0, column1), d0 * e1);
    *sum11 = wi_accumulate(*sum11, wi_block_dot(row1, column1), d1 * e1);
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

static void wi_vec_dot_q4_0_q8_0_pairs(
    int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx,
    const void * GGML_RESTRICT vy, size_t by) {
    const int blocks = n / QK8_0;
    const block_q4_0 * GGML_RESTRICT x0 = vx;
    const block_q4_0 * GGML_RESTRICT x1 = (const block_q4_0 *) ((const char *) vx + bx);
    const block_q8_0 * GGML_RESTRICT y0 = vy;
    const block_q8_0 * GGML_RESTRICT y1 = (const block_q8_0 *) ((const char *) vy + by);
    v128_t sum00 = wasm_f32x4_splat(0.0f), sum10 = sum00, sum01 = sum00, sum11 = sum00;
    // Blocks in twos, then an odd last block in scalar code after the lanes are summed: ggml's order.
    int block = 0;
    for (; block + 1 < blocks; block++) {
        wi_pairs_step(x0, x1, y0, y1, block, &sum00, &sum10, &sum01, &sum11);
        wi_pairs_step(x0, x1, y0, y1, ++block, &sum00, &sum10, &sum01, &sum11);
    }
    s[0] = wi_lanes(sum00);
    s[1] = wi_lanes(sum10);
    s[bs] = wi_lanes(sum01);
    s[bs + 1] = wi_lanes(sum11);
    if (block < blocks) {
        s[0] += wi_scalar_block(&x0[block], &y0[block]);
        s[1] += wi_scalar_block(&x1[block], &y0[block]);
        s[bs] += wi_scalar_block(&x0[block], &y1[block]);
        s[bs + 1] += wi_scalar_block(&x1[block], &y1[block]);
    }
}

void ggml_vec_dot_q4_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx,
                            const void * GGML_RESTRICT vy, size_t by, int nrc) {
    assert(n % QK8_0 == 0);
    if (nrc == 2) {
        wi_vec_dot_q4_0_q8_0_pairs(n, s, bs, vx, bx, vy, by);
        return;
    }
    ggml_vec_dot_q4_0_q8_0_one(n, s, bs, vx, bx, vy, by, 1);
}

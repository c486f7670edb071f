// Q4_K and Q6_K weights × Q8_K tokens, a row by a token, for ggml's WebAssembly CPU backend: the
// two K-quant types of llama.cpp's Q4_K_M files (the catalogue's `gamma-7b-instruct-v0.3` build).
// scripts/build-llamacpp.mjs appends this file to ggml's `arch/wasm/quants.c` after tiles.c,
// renames ggml's `ggml_vec_dot_q4_K_q8_K` and `_q6_K_q8_K` to `wi_ggml_vec_dot_…`, and these
// take their names: ggml's type table calls them for prompts and generation alike.
//
// Why:
// - Q6_K: ggml unpacked each block's 256 six-bit weights to bytes one at a time in scalar code;
//   here 16 at a time. Its products are then taken as ggml takes them, and two sub-blocks are
//   scaled at once by a 16-bit dot product, where ggml took four 32-bit multiplies for each.
// - Q4_K, in the `-relaxed` builds: the nibbles (0 to 15) are within relaxed SIMD's 7-bit operand,
//   so an 8-bit dot product multiplies them by the token's bytes unwidened (one x86 `pmaddubsw`),
//   and a 16-bit one each sub-block's sums by its scale (`pmaddwd`), with no sum across lanes
//   until the block's end. The plain builds keep ggml's code, which widens both to 16 bits, as
//   ours would have to.
// bench/results/kquants.md measures both against ggml's.
//
// Invariant: every result is ggml's, bit for bit. Both kernels sum integers (exact, so the order
// within a sum is free) into the same integer sums ggml forms, then do ggml's floating-point
// steps on them in ggml's order. `wi_tiles(0)` hands these products back to ggml too.

// ggml's Q4_K scales and mins: eight 6-bit pairs packed in 12 bytes, unpacked into `unpacked`
// (bytes 0 to 7 the scales, 8 to 15 the mins), as ggml's kernel unpacks them.
static inline void wi_q4_k_scales(const uint8_t packed[12], uint32_t unpacked[4]) {
    const uint32_t six_bits = 0x3f3f3f3f, nibbles = 0x0f0f0f0f, two_bits = 0x03030303;
    memcpy(unpacked, packed, 12);
    unpacked[3] = ((unpacked[2] >> 4) & nibbles) | (((unpacked[1] >> 6) & two_bits) << 4);
    const uint32_t mins = unpacked[1] & six_bits;
    unpacked[1] = (unpacked[2] & nibbles) | (((unpacked[0] >> 6) & two_bits) << 4);
    unpacked[2] = mins;
    unpacked[0] &= six_bits;
}

#if WI_RELAXED
// One Q4_K row by one Q8_K token. Per 64 weights, ggml's two sums of a scale's 32 products:
// nibble × byte pairs in 16-bit lanes (at most 2 × 15 × 128), two vectors of them added (at most
// 7,680), times the scale (at most 63) and added in pairs into 32-bit lanes.
static float wi_q4_k_row(const int n, const block_q4_K * GGML_RESTRICT x, const block_q8_K * GGML_RESTRICT y) {
    float sum = 0;
    uint32_t unpacked[4];
    const uint8_t * scales = (const uint8_t *) &unpacked[0];
    const uint8_t * mins = (const uint8_t *) &unpacked[2];
    for (int i = 0; i < n / QK_K; ++i) {
        const float d = y[i].d * GGML_CPU_FP16_TO_FP32(x[i].d);
        const float dmin = y[i].d * GGML_CPU_FP16_TO_FP32(x[i].dmin);
        wi_q4_k_scales(x[i].scales, unpacked);
        int32_t min_sum = 0;
        for (int j = 0; j < 16; j += 2) min_sum += (y[i].bsums[j] + y[i].bsums[j + 1]) * mins[j / 2];
        sum -= dmin * min_sum;
        const uint8_t * GGML_RESTRICT q4 = x[i].qs;
        const int8_t * GGML_RESTRICT q8 = y[i].qs;
        v128_t lanes = wasm_i32x4_splat(0);
        for (int j = 0; j < QK_K / 64; ++j, q4 += 32, q8 += 64) {
            const v128_t packed[2] = {wasm_v128_load(q4), wasm_v128_load(q4 + 16)};
            const v128_t nibble = wasm_i8x16_splat(0x0F);
            const v128_t low = wasm_i16x8_add(
                wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(q8), wasm_v128_and(packed[0], nibble)),
                wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(q8 + 16), wasm_v128_and(packed[1], nibble)));
            const v128_t high = wasm_i16x8_add(
                wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(q8 + 32), wasm_u8x16_shr(packed[0], 4)),
                wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(q8 + 48), wasm_u8x16_shr(packed[1], 4)));
            lanes = wasm_i32x4_add(lanes, wasm_i32x4_add(wasm_i32x4_dot_i16x8(low, wasm_i16x8_splat(scales[2 * j])),
                                                         wasm_i32x4_dot_i16x8(high, wasm_i16x8_splat(scales[2 * j + 1]))));
        }
        const int32_t product_sum = wasm_i32x4_extract_lane(lanes, 0) + wasm_i32x4_extract_lane(lanes, 1) +
                                    wasm_i32x4_extract_lane(lanes, 2) + wasm_i32x4_extract_lane(lanes, 3);
        sum += d * product_sum;
    }
    return sum;
}
#endif

void ggml_vec_dot_q4_K_q8_K(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx,
                            const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if WI_RELAXED
    if (wi_tiles_on) {
        *s = wi_q4_k_row(n, vx, vy);
        wi_kernel_runs++;
        return;
    }
#endif
    wi_ggml_vec_dot_q4_K_q8_K(n, s, bs, vx, bx, vy, by, nrc);
}

// A Q6_K block's 16 sub-blocks of 16 weights (six bits each, minus 32) by a Q8_K token's, into
// ggml's eight sums: sum l (0 to 7) takes weights l and 8 + l of every sub-block, times its scale.
// ggml stores weight 32h + l of each 128 (h = 0 to 3, l = 0 to 31) as the low (h even) or high
// nibble of `ql` byte l (h < 2) or 32 + l, with bits 2h and 2h + 1 of `qh` byte l above it.
static inline __attribute__((always_inline)) void wi_q6_k_block(const block_q6_K * GGML_RESTRICT x,
                                                                const int8_t * GGML_RESTRICT q8, v128_t sums[2]) {
    const uint8_t * GGML_RESTRICT ql = x->ql;
    const uint8_t * GGML_RESTRICT qh = x->qh;
    const int8_t * GGML_RESTRICT scales = x->scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, q8 += 128, scales += 8) {
        // pairs[l / 16][h], lane k: weights k and 8 + k of sub-block 2h + l / 16 times the token's,
        // each product at most 32 × 128 in size.
        v128_t pairs[2][4];
        for (int l = 0; l < 32; l += 16) {
            const v128_t low = wasm_v128_load(ql + l), high = wasm_v128_load(ql + 32 + l);
            const v128_t bits = wasm_v128_load(qh + l);
            const v128_t nibble = wasm_i8x16_splat(0x0F), top = wasm_i8x16_splat(0x30), offset = wasm_i8x16_splat(32);
            const v128_t weights[4] = {
                wasm_i8x16_sub(wasm_v128_or(wasm_v128_and(low, nibble), wasm_v128_and(wasm_i8x16_shl(bits, 4), top)),
                               offset),
                wasm_i8x16_sub(wasm_v128_or(wasm_v128_and(high, nibble), wasm_v128_and(wasm_i8x16_shl(bits, 2), top)),
                               offset),
                wasm_i8x16_sub(wasm_v128_or(wasm_u8x16_shr(low, 4), wasm_v128_and(bits, top)), offset),
                wasm_i8x16_sub(wasm_v128_or(wasm_u8x16_shr(high, 4), wasm_v128_and(wasm_u8x16_shr(bits, 2), top)),
                               offset),
            };
            for (int h = 0; h < 4; ++h) {
                const v128_t tokens = wasm_v128_load(q8 + 32 * h + l);
                pairs[l / 16][h] = wasm_i16x8_add(
                    wasm_i16x8_mul(wasm_i16x8_extend_low_i8x16(weights[h]), wasm_i16x8_extend_low_i8x16(tokens)),
                    wasm_i16x8_mul(wasm_i16x8_extend_high_i8x16(weights[h]), wasm_i16x8_extend_high_i8x16(tokens)));
            }
        }
        // Sub-blocks 2h and 2h + 1 lane by lane, interleaved, times their two scales: a 16-bit dot
        // product (one x86 `pmaddwd`) adds each lane's two into sum k or 4 + k.
        for (int h = 0; h < 4; ++h) {
            const v128_t scale = wasm_i32x4_splat((uint16_t) scales[2 * h] | ((uint32_t) (uint16_t) scales[2 * h + 1] << 16));
            const v128_t even = pairs[0][h], odd = pairs[1][h];
            sums[0] = wasm_i32x4_add(
                sums[0], wasm_i32x4_dot_i16x8(wasm_i16x8_shuffle(even, odd, 0, 8, 1, 9, 2, 10, 3, 11), scale));
            sums[1] = wasm_i32x4_add(
                sums[1], wasm_i32x4_dot_i16x8(wasm_i16x8_shuffle(even, odd, 4, 12, 5, 13, 6, 14, 7, 15), scale));
        }
    }
}

// One Q6_K row by one Q8_K token: each block's eight sums times its scale into eight float
// lanes, which are summed in order at the end, as ggml does.
static float wi_q6_k_row(const int n, const block_q6_K * GGML_RESTRICT x, const block_q8_K * GGML_RESTRICT y) {
    float lanes[8] = {0};
    for (int i = 0; i < n / QK_K; ++i) {
        v128_t sums[2] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
        wi_q6_k_block(&x[i], y[i].qs, sums);
        int32_t block_sums[8];
        wasm_v128_store(block_sums, sums[0]);
        wasm_v128_store(block_sums + 4, sums[1]);
        const float d = GGML_CPU_FP16_TO_FP32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) lanes[l] += d * block_sums[l];
    }
    float sum = 0;
    for (int l = 0; l < 8; ++l) sum += lanes[l];
    return sum;
}

void ggml_vec_dot_q6_K_q8_K(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx,
                            const void * GGML_RESTRICT vy, size_t by, int nrc) {
    if (wi_tiles_on) {
        *s = wi_q6_k_row(n, vx, vy);
        wi_kernel_runs++;
        return;
    }
    wi_ggml_vec_dot_q6_K_q8_K(n, s, bs, vx, bx, vy, by, nrc);
}

// Q4_0, Q5_0 and Q8_0 weights × Q8_0 tokens in tiles of two rows by up to six tokens, and F16
// weights × F16 tokens in tiles of three by three (one row by one token for generation, both;
// a prompt's last token in three rows by one),
// for ggml's WebAssembly CPU backend:
// the project's own matrix kernel, for prompts and for generation. scripts/build-llamacpp.mjs
// appends this file to ggml's `arch/wasm/quants.c` and has ggml's matrix product pass its chunk
// plan to `wi_mul_mat_plan` and hand each chunk of a Q4_0, Q5_0, Q8_0 or F16 product to
// `wi_mul_mat_tiled` before its own code (F16: see its section).
//
// Why: ggml has no WebAssembly matrix kernel. Its dot product takes one weight row and one token,
// so every weight block was unpacked again for every token and every token block widened again
// for every row. Here a chunk's tokens are widened to 16-bit lanes once, each weight block is
// unpacked once for up to six tokens, and each token block is loaded once for two rows.
//
// A Q4_0 block is unpacked without widening: its bytes are first put in the order of ggml's
// sums, then each 16-bit lane's four nibbles are shifted and masked out in place (six
// instructions for 32 weights, where sign-extending takes ten). The nibbles stay unsigned
// (0 to 15); ggml's `- 8` is taken off each sum afterwards as eight times the token's values in
// that lane, computed once per token block.
//
// A Q5_0 block (llama.cpp's fallback for K-quant rows not a multiple of 256 wide, so most of a
// small model's Q4_K_M file) is a Q4_0 block with a fifth bit per weight, spread to its byte once
// per block and tile (ggml spreads them through memory for every row and token again); the
// weights stay unsigned (0 to 31), and ggml's `- 16` is taken off as Q4_0's `- 8` is. A Q8_0
// block is widened in its own order, which is already ggml's.
//
// With relaxed SIMD (the `-relaxed` builds), a Q4_0 or Q5_0 block is not
// widened at all: its weights stay bytes, weight k beside weight 16 + k, and an 8-bit dot product
// multiplies them by the token's bytes in the same order (see WI_RELAXED). That halves the
// vectors a tile holds and the instructions a sum takes.
//
// Invariants:
// - Each (row, token) sum is ggml's kernel's, bit for bit: the same products summed into the same
//   four lanes (integer sums, so their order within a lane is free), the same scales, the lanes
//   summed as ggml sums them, and for Q4_0 an odd last block added afterwards in scalar code, as
//   ggml adds it (its Q5_0 and Q8_0 kernels take every block in SIMD). `wi_tiles(0)` hands every
//   product back to ggml, so a test can compare.
// - Any tile shape is handled (odd rows, any number of tokens), so ggml's chunking needs no
//   particular length.
// - Nothing is changed outside the chunk's own part of the result.

#if !defined(__wasm_simd128__)
#error "the llama.cpp build compiles with WebAssembly SIMD (-msimd128)"
#endif

#include <emscripten/emscripten.h>

// The most tokens a tile holds. Measured in V8 on x86-64: two rows by six tokens beat two by
// four, two by eight and four rows by two or four (more sums than V8 keeps in registers).
#define WI_TILE_TOKENS 6
// The rows a tile of `tokens` tokens takes: two, but one for a single token and for Q8_0. Measured
// in V8 on x86-64, a Q8_0 product by one token took about twice as long two rows at a time as
// one, and longer than ggml's own row-by-row kernel, which one row at a time beats. A Q8_0 row's
// block is four vectors of 16-bit lanes, so two rows and six tokens' sums spill to the stack
// every block; one row by six tokens measured faster on prompts too. Q4_0 and Q5_0 measured
// alike either way.
#define WI_TILE_ROWS(type, tokens) ((tokens) == 1 || (type) == GGML_TYPE_Q8_0 ? 1 : 2)

// ggml's four-lane sums of a block: lane i sums weights 8s + 2i and 8s + 2i + 1 for s = 0 to 3.
// A token block widened: its 32 values as four vectors of 16-bit lanes in the order `wi_unpack`
// gives the weights (i32x4.dot_i16x8 adds lanes 2i and 2i + 1 into lane i), and each lane's
// eight values summed and times 8 (Q4_0) or 16 (Q5_0): what ggml's `- 8` or `- 16` on the
// weights takes off that lane.
typedef struct {
    int16_t values[QK8_0];
    int32_t offsets[4];
} wi_widened_block;

// Where relaxed SIMD's 8-bit dot product is compiled in (the `-relaxed` builds), a Q4_0 or Q5_0
// product takes its weights as 8-bit lanes, unwidened: `i16x8.relaxed_dot_i8x16_i7x16_s`
// multiplies a token's signed bytes by the weights (0 to 31, within the instruction's 7-bit
// operand, whose result is then exact on every machine) and adds each pair, one x86 `pmaddubsw`.
// A token block is kept as its 32 bytes in that order (`wi_paired`), and the same offsets.
#define WI_PAIRED_LOW 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define WI_PAIRED_HIGH 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
// Bytes 0 to 15 of `low` and `high` (values k and 16 + k of a block), paired: one x86
// `punpcklbw` and one `punpckhbw`, which V8 picks for these shuffles without a mask.
// (The indirection expands the order's name first.)
#define WI_SHUFFLE(low, high, ...) wasm_i8x16_shuffle(low, high, __VA_ARGS__)
static inline __attribute__((always_inline)) void wi_paired(const v128_t low, const v128_t high, v128_t out[2]) {
    out[0] = WI_SHUFFLE(low, high, WI_PAIRED_LOW);
    out[1] = WI_SHUFFLE(low, high, WI_PAIRED_HIGH);
}
#if defined(__wasm_relaxed_simd__)
#define WI_RELAXED 1
#else
#define WI_RELAXED 0
#endif
typedef struct {
    int8_t values[QK8_0];
    int32_t offsets[4];
} wi_narrow_block;

// The byte order a Q4_0 or Q5_0 block is unpacked in by the plain builds: 16-bit lane 2i holds
// bytes 2i and 2i + 1, lane 2i + 1 bytes 8 + 2i and 9 + 2i. Their low nibbles are weights 2i,
// 2i + 1, 8 + 2i, 9 + 2i, their high nibbles those plus 16: lane i of ggml's sums, exactly.
#define WI_Q4_ORDER 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15
// The order a half block of 8-bit values is put in before widening, so the low half's lanes
// hold values 2i, 8 + 2i and the high half's 2i + 1, 9 + 2i: the order `wi_unpack` gives.
#define WI_WIDE_ORDER 0, 8, 2, 10, 4, 12, 6, 14, 1, 9, 3, 11, 5, 13, 7, 15
// A vector's bytes in one of the orders above.
#define WI_REORDER(vector, ...) WI_SHUFFLE(vector, vector, __VA_ARGS__)

static int wi_tiles_on = 1;
// The chunks our tiles and the row products our K-quant kernels (kquants.c) computed. Per thread,
// so counting costs the products no shared write: the calling thread computes part of every
// product too, which is all the test asks.
static _Thread_local int wi_kernel_runs = 0;

// Hands every product back to ggml's own kernels (0) or takes them again (1), for the test that
// compares the two bit for bit. Returns how many chunks and rows the calling thread's kernels
// computed since its last call, so that test knows they ran.
EMSCRIPTEN_KEEPALIVE int wi_tiles(int on) {
    wi_tiles_on = on;
    const int runs = wi_kernel_runs;
    wi_kernel_runs = 0;
    return runs;
}

// Whether a type's weights are nibbles with an offset (Q4_0, Q5_0).
#define WI_NIBBLES(type) ((type) == GGML_TYPE_Q4_0 || (type) == GGML_TYPE_Q5_0)

// The fifth bits of a Q5_0 block's weights, as 0x10 in the bytes that `wi_unpack` puts those
// weights in: byte p of `low` for weight p (relaxed) or WI_Q4_ORDER[p] (plain), of `high` for
// that weight plus 16. ggml's `table_b2b_0` spreads a byte's bits to eight bytes, 0x10 or 0;
// WI_Q4_ORDER takes 16-bit pairs from weights 0 to 7 and 8 to 15 in turn, which is interleaving
// two such spreads (one x86 `punpcklwd`). No constant vectors: V8 builds one again at each use.
static inline __attribute__((always_inline)) void wi_fifth_bits(const block_q5_0 * block, v128_t * low,
                                                                v128_t * high) {
    v128_t spread[4];
    for (int k = 0; k < 4; k++) spread[k] = wasm_v128_load64_zero(&table_b2b_0[block->qh[k]]);
#if WI_RELAXED
    *low = wasm_i64x2_shuffle(spread[0], spread[1], 0, 2);
    *high = wasm_i64x2_shuffle(spread[2], spread[3], 0, 2);
#else
    *low = wasm_i16x8_shuffle(spread[0], spread[1], 0, 8, 1, 9, 2, 10, 3, 11);
    *high = wasm_i16x8_shuffle(spread[2], spread[3], 0, 8, 1, 9, 2, 10, 3, 11);
#endif
}

// A weight block in the order its token blocks take: four vectors of 16-bit lanes, or for relaxed
// Q4_0 and Q5_0 products two of bytes, weights k and 16 + k side by side (`wi_paired`), which
// `wi_block_dot` sums into ggml's lanes.
static inline __attribute__((always_inline)) void wi_unpack(const enum ggml_type type, const void * block,
                                                            v128_t x[4]) {
    if (WI_NIBBLES(type)) {
        const uint8_t * packed_bytes = type == GGML_TYPE_Q4_0 ? ((const block_q4_0 *) block)->qs
                                                              : ((const block_q5_0 *) block)->qs;
        const v128_t packed = wasm_v128_load(packed_bytes);
        if (type == GGML_TYPE_Q4_0 && !WI_RELAXED) {
            // Bytes 4i to 4i + 3 are weights of ggml's lane i (see WI_Q4_ORDER).
            const v128_t lanes = WI_REORDER(packed, WI_Q4_ORDER);
            const v128_t nibble = wasm_i16x8_splat(0x000F);
            x[0] = wasm_v128_and(lanes, nibble);
            x[1] = wasm_v128_and(wasm_u16x8_shr(lanes, 8), nibble);
            x[2] = wasm_v128_and(wasm_u16x8_shr(lanes, 4), nibble);
            x[3] = wasm_u16x8_shr(lanes, 12);
            return;
        }
        const v128_t lanes = WI_RELAXED ? packed : WI_REORDER(packed, WI_Q4_ORDER);
        // The high nibbles: with the low ones cleared, a 16-bit shift moves each byte's into place.
        v128_t low = wasm_v128_and(lanes, wasm_i8x16_splat(0x0F));
        v128_t high = wasm_u16x8_shr(wasm_v128_xor(lanes, low), 4);
        if (type == GGML_TYPE_Q5_0) {
            v128_t low_bits, high_bits;
            wi_fifth_bits(block, &low_bits, &high_bits);
            low = wasm_v128_or(low, low_bits);
            high = wasm_v128_or(high, high_bits);
        }
        if (WI_RELAXED) {
            wi_paired(low, high, x);
        } else {
            // Lane k of each: the even byte 2k, then the odd one, as Q4_0's nibbles above.
            const v128_t byte = wasm_i16x8_splat(0x00FF);
            x[0] = wasm_v128_and(low, byte);
            x[1] = wasm_u16x8_shr(low, 8);
            x[2] = wasm_v128_and(high, byte);
            x[3] = wasm_u16x8_shr(high, 8);
        }
        return;
    }
    const int8_t * values = ((const block_q8_0 *) block)->qs;
    const v128_t low = wasm_v128_load(values), high = wasm_v128_load(values + 16);
    x[0] = wasm_i16x8_extend_low_i8x16(low);
    x[1] = wasm_i16x8_extend_high_i8x16(low);
    x[2] = wasm_i16x8_extend_low_i8x16(high);
    x[3] = wasm_i16x8_extend_high_i8x16(high);
}

// Each block type starts with its scale.
static inline float wi_block_scale(const void * block) {
    ggml_half scale;
    memcpy(&scale, block, sizeof(scale));
    return GGML_CPU_FP16_TO_FP32(scale);
}

static inline size_t wi_block_bytes(const enum ggml_type type) {
    return type == GGML_TYPE_Q4_0 ? sizeof(block_q4_0)
           : type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0)
                                    : sizeof(block_q8_0);
}

// The bytes a token block takes in the scratch: narrow for relaxed Q4_0 and Q5_0 products, else
// widened.
static inline size_t wi_token_block_bytes(const enum ggml_type type) {
    return WI_NIBBLES(type) && WI_RELAXED ? sizeof(wi_narrow_block) : sizeof(wi_widened_block);
}

// ggml's lane i from 16-bit lanes 2i and 2i + 1 (relaxed products' order), as 32-bit lanes: one
// x86 `pmaddwd` by ones.
static inline __attribute__((always_inline)) v128_t wi_lanes(const v128_t pairs) {
    return wasm_i32x4_extadd_pairwise_i16x8(pairs);
}

// ggml's four lane sums of one weight block by one token block (a wi_narrow_block for relaxed
// Q4_0 and Q5_0 products, else a wi_widened_block).
static inline __attribute__((always_inline)) v128_t wi_block_dot(const enum ggml_type type, const v128_t x[4],
                                                                 const void * token) {
#if WI_RELAXED
    if (WI_NIBBLES(type)) {
        // 16-bit lane k: weights k, 16 + k, 8 + k and 24 + k. ggml's lane i (weights 8s + 2i and
        // 8s + 2i + 1) is lanes 2i and 2i + 1, added as they widen. Four products are at most
        // 4 × 128 × 31 = 15,872 in size: 16 bits hold them.
        const wi_narrow_block * y = token;
        const v128_t pairs = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(y->values), x[0]),
                                            wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(y->values + 16), x[1]));
        return wasm_i32x4_sub(wi_lanes(pairs), wasm_v128_load(y->offsets));
    }
#endif
    const wi_widened_block * y = token;
    const v128_t sum = wasm_i32x4_add(
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x[0], wasm_v128_load(y->values)),
                       wasm_i32x4_dot_i16x8(x[1], wasm_v128_load(y->values + 8))),
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x[2], wasm_v128_load(y->values + 16)),
                       wasm_i32x4_dot_i16x8(x[3], wasm_v128_load(y->values + 24))));
    return WI_NIBBLES(type) ? wasm_i32x4_sub(sum, wasm_v128_load(y->offsets)) : sum;
}

// An odd last Q4_0 block, computed as ggml's kernel computes it.
static inline float wi_scalar_block(const block_q4_0 * GGML_RESTRICT x, const block_q8_0 * GGML_RESTRICT y) {
    int low = 0, high = 0;
    for (int j = 0; j < QK8_0 / 2; j++) {
        low += ((x->qs[j] & 0x0F) - 8) * y->qs[j];
        high += ((x->qs[j] >> 4) - 8) * y->qs[j + QK8_0 / 2];
    }
    return (low + high) * GGML_CPU_FP16_TO_FP32(x->d) * GGML_CPU_FP16_TO_FP32(y->d);
}

// A loop over a tile's rows or tokens, unrolled whole (clang's cost model stops short of it for
// the wider relaxed shapes, and then keeps the sums in memory).
#define WI_UNROLLED _Pragma("clang loop unroll(full)")

// One tile: `rows` weight rows (`row_bytes` apart) by `tokens` widened tokens (`blocks` blocks
// each, their scales in `scales`), into s[token * bs + row]. Called with constant shapes and
// types only, so the loops over rows and tokens unroll and the sums stay in registers.
static inline __attribute__((always_inline)) void wi_tile(
    const enum ggml_type type, const int rows, const int tokens, const int blocks, const char * GGML_RESTRICT weights,
    const size_t row_bytes, const char * GGML_RESTRICT widened, const float * GGML_RESTRICT scales,
    const block_q8_0 * const * GGML_RESTRICT quantized, float * GGML_RESTRICT s, const size_t bs) {
    const size_t token_block_bytes = wi_token_block_bytes(type);
    const size_t block_bytes = wi_block_bytes(type);
    v128_t sums[2][WI_TILE_TOKENS];
    WI_UNROLLED
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < tokens; t++) sums[r][t] = wasm_f32x4_splat(0.0f);
    // ggml's Q4_0 kernel takes blocks in twos and leaves an odd last one to scalar code.
    const int simd_blocks = type == GGML_TYPE_Q4_0 ? blocks & ~1 : blocks;
    for (int block = 0; block < simd_blocks; block++) {
        v128_t x[2][4];
        // The scales in every lane: their product is the scalar product's float in each, at one
        // multiply a (row, token) where a scalar multiply and a splat took two.
        v128_t row_scale[2];
        WI_UNROLLED
        for (int r = 0; r < rows; r++) {
            const void * row_block = weights + r * row_bytes + block * block_bytes;
            wi_unpack(type, row_block, x[r]);
            row_scale[r] = wasm_f32x4_splat(wi_block_scale(row_block));
        }
        WI_UNROLLED
        for (int t = 0; t < tokens; t++) {
            const void * y = widened + (t * blocks + block) * token_block_bytes;
            const v128_t token_scale = wasm_v128_load32_splat(scales + t * blocks + block);
            WI_UNROLLED
            for (int r = 0; r < rows; r++) {
                const v128_t dot = wi_block_dot(type, x[r], y);
                sums[r][t] = wasm_f32x4_add(
                    sums[r][t], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(dot), wasm_f32x4_mul(row_scale[r], token_scale)));
            }
        }
    }
    for (int t = 0; t < tokens; t++) {
        for (int r = 0; r < rows; r++) {
            float sum = wasm_f32x4_extract_lane(sums[r][t], 0) + wasm_f32x4_extract_lane(sums[r][t], 1) +
                        wasm_f32x4_extract_lane(sums[r][t], 2) + wasm_f32x4_extract_lane(sums[r][t], 3);
            if (simd_blocks < blocks)
                sum += wi_scalar_block((const block_q4_0 *) (weights + r * row_bytes) + simd_blocks,
                                       quantized[t] + simd_blocks);
            s[t * bs + r] = sum;
        }
    }
}

// What ggml's `- 8` (Q4_0) or `- 16` (Q5_0) takes off a lane: the lane's token values summed,
// times 8 or 16, as a shift.
static inline int wi_offset_shift(const enum ggml_type type) {
    return type == GGML_TYPE_Q4_0 ? 3 : 4;
}

// A token block for relaxed Q4_0 and Q5_0 products: its bytes paired as `wi_unpack` pairs the
// weights, and the offsets, summed into ggml's lanes as `wi_block_dot` sums.
static inline void wi_narrow(const enum ggml_type type, const block_q8_0 * GGML_RESTRICT y,
                             wi_narrow_block * GGML_RESTRICT out) {
    v128_t paired[2];
    wi_paired(wasm_v128_load(y->qs), wasm_v128_load(y->qs + 16), paired);
    wasm_v128_store(out->values, paired[0]);
    wasm_v128_store(out->values + 16, paired[1]);
    const v128_t pairs =
        wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(paired[0]), wasm_i16x8_extadd_pairwise_i8x16(paired[1]));
    wasm_v128_store(out->offsets, wasm_i32x4_shl(wi_lanes(pairs), wi_offset_shift(type)));
}

// A token block widened: for Q4_0 and Q5_0 its values in `wi_unpack`'s order and the offsets,
// for Q8_0 in its own order (ggml's) and no offsets.
static inline void wi_widen_block(const enum ggml_type type, const block_q8_0 * GGML_RESTRICT y,
                                  wi_widened_block * GGML_RESTRICT out) {
    v128_t low = wasm_v128_load(y->qs), high = wasm_v128_load(y->qs + 16);
    if (WI_NIBBLES(type)) {
        low = WI_REORDER(low, WI_WIDE_ORDER);
        high = WI_REORDER(high, WI_WIDE_ORDER);
    }
    const v128_t values[4] = {wasm_i16x8_extend_low_i8x16(low), wasm_i16x8_extend_high_i8x16(low),
                              wasm_i16x8_extend_low_i8x16(high), wasm_i16x8_extend_high_i8x16(high)};
    v128_t lane_sums = wasm_i32x4_splat(0);
    for (int k = 0; k < 4; k++) {
        wasm_v128_store(out->values + 8 * k, values[k]);
        lane_sums = wasm_i32x4_add(lane_sums, wasm_i32x4_dot_i16x8(values[k], wasm_i16x8_splat(1)));
    }
    if (WI_NIBBLES(type)) wasm_v128_store(out->offsets, wasm_i32x4_shl(lane_sums, wi_offset_shift(type)));
}

// Prepares `tokens` Q8_0 tokens for a `type` product: their blocks into `widened`, as
// `wi_block_dot` takes them, and their scales into `scales`.
static void wi_widen(const enum ggml_type type, const int tokens, const int blocks,
                     const block_q8_0 * const * GGML_RESTRICT quantized, char * GGML_RESTRICT widened,
                     float * GGML_RESTRICT scales) {
    const size_t token_block_bytes = wi_token_block_bytes(type);
    for (int t = 0; t < tokens; t++) {
        for (int block = 0; block < blocks; block++) {
            const block_q8_0 * y = quantized[t] + block;
            void * out = widened + (t * blocks + block) * token_block_bytes;
            if (WI_NIBBLES(type) && WI_RELAXED)
                wi_narrow(type, y, out);
            else
                wi_widen_block(type, y, out);
            scales[t * blocks + block] = GGML_CPU_FP16_TO_FP32(y->d);
        }
    }
}

// Each (type, rows, tokens) shape as a function of its own, unrolled. Why not one function with
// a case per shape: V8 then allocates registers for all of them at once and spills the sums
// (about 1.2× slower in V8, measured).
#define WI_TILE_SHAPE(TYPE, ROWS, TOKENS)                                                                   \
    static __attribute__((noinline)) void wi_tile_##TYPE##_##ROWS##_##TOKENS(                               \
        const int blocks, const char * weights, const size_t row_bytes, const char * widened,               \
        const float * scales, const block_q8_0 * const * quantized, float * s, const size_t bs) {          \
        wi_tile(GGML_TYPE_##TYPE, ROWS, TOKENS, blocks, weights, row_bytes, widened, scales, quantized, s, bs); \
    }
#define WI_TILE_ROW_SHAPES(TYPE, ROWS)                                                                      \
    WI_TILE_SHAPE(TYPE, ROWS, 1) WI_TILE_SHAPE(TYPE, ROWS, 2) WI_TILE_SHAPE(TYPE, ROWS, 3)                  \
    WI_TILE_SHAPE(TYPE, ROWS, 4) WI_TILE_SHAPE(TYPE, ROWS, 5) WI_TILE_SHAPE(TYPE, ROWS, 6)
WI_TILE_ROW_SHAPES(Q4_0, 1)
WI_TILE_ROW_SHAPES(Q4_0, 2)
WI_TILE_ROW_SHAPES(Q5_0, 1)
WI_TILE_ROW_SHAPES(Q5_0, 2)
WI_TILE_ROW_SHAPES(Q8_0, 1)

typedef void (*wi_tile_shape)(int, const char *, size_t, const char *, const float *,
                              const block_q8_0 * const *, float *, size_t);

// The shapes by type (Q4_0, Q5_0, Q8_0), rows (1 or 2), then tokens (1 to WI_TILE_TOKENS). Q8_0
// has one-row shapes only (WI_TILE_ROWS): its two-row entries stay empty.
#define WI_TILE_ROW_TABLE(TYPE, ROWS)                                                                       \
    {wi_tile_##TYPE##_##ROWS##_1, wi_tile_##TYPE##_##ROWS##_2, wi_tile_##TYPE##_##ROWS##_3,                \
     wi_tile_##TYPE##_##ROWS##_4, wi_tile_##TYPE##_##ROWS##_5, wi_tile_##TYPE##_##ROWS##_6}
static const wi_tile_shape wi_tile_shapes[3][2][WI_TILE_TOKENS] = {
    {WI_TILE_ROW_TABLE(Q4_0, 1), WI_TILE_ROW_TABLE(Q4_0, 2)},
    {WI_TILE_ROW_TABLE(Q5_0, 1), WI_TILE_ROW_TABLE(Q5_0, 2)},
    {WI_TILE_ROW_TABLE(Q8_0, 1)},
};

// ------------------------------------------------------------------ F16 weights
//
// ggml's F16 product converts the tokens to F16 (its `vec_dot_type`), then its dot product
// widens both operands to floats four at a time through a lookup table, scalar: two table loads
// a product, for every row and every token again. Here, by SIMD integer arithmetic, a prompt's
// tokens are widened once per product (`wi_mul_mat_widen`), a generated token once per chunk, and
// a prompt's weight rows once per chunk (which holds all the prompt's tokens), else once per tile
// of up to three tokens.
//
// Invariant: each (row, token) sum is `ggml_vec_dot_f16`'s bit for bit. ggml keeps four vectors
// of sums, vector j taking elements 16i + 4j to 16i + 4j + 3, each product added as ggml adds it
// (a multiply, then an add); the `-relaxed` builds fuse the two (`wi_multiply_add`), which
// changes no bit: a product of two halves (11-bit significands) is exact in a float, so only the
// add rounds, in both. The four reduced as its
// GGML_F16_VEC_REDUCE reduces them; the elements past the last multiple of 16 added in double
// precision (its `ggml_float`) afterwards, as its scalar tail adds them. Each of the four vectors depends on its own
// elements only, so a tile computes them one after another: one vector of sums per (row, token)
// is live at a time, not four, and the sums stay in registers.

// Four halves, zero-extended into 32-bit lanes, as floats: the same floats as ggml's table for
// every finite half and both infinities (checked for all 65,536), and a NaN for each NaN.
// Finite ones (normal and subnormal) move into a float's place and are rescaled by 2^112, which
// changes the exponent's bias from 15 to 127 exactly; infinities and NaNs keep their mantissa
// under a float's all-ones exponent.
static inline __attribute__((always_inline)) v128_t wi_halves_to_floats(const v128_t halves) {
    const v128_t magnitude = wasm_v128_and(halves, wasm_i32x4_splat(0x7FFF));
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(halves, wasm_i32x4_splat(0x8000)), 16);
    const v128_t moved = wasm_i32x4_shl(magnitude, 13);
    const v128_t finite = wasm_f32x4_mul(moved, wasm_f32x4_splat(0x1p112f));
    const v128_t special = wasm_v128_or(moved, wasm_i32x4_splat(0x7F800000));
    const v128_t is_special = wasm_i32x4_gt(magnitude, wasm_i32x4_splat(0x7BFF));
    return wasm_v128_or(sign, wasm_v128_bitselect(special, finite, is_special));
}

static inline __attribute__((always_inline)) v128_t wi_load_halves(const ggml_fp16_t * halves) {
    return wi_halves_to_floats(wasm_u32x4_load16x4(halves));
}

// `sum` + `x` × `y`, for `x` and `y` widened from halves: relaxed SIMD's multiply-add in the
// `-relaxed` builds (one FMA instruction where the processor has one), ggml's multiply then add in
// the plain ones. The same float either way, the product being exact (see the invariant above).
static inline __attribute__((always_inline)) v128_t wi_multiply_add(const v128_t x, const v128_t y, const v128_t sum) {
#if defined(__wasm_relaxed_simd__)
    return wasm_f32x4_relaxed_madd(x, y, sum);
#else
    return wasm_f32x4_add(wasm_f32x4_mul(x, y), sum);
#endif
}

// A weight row's four elements from `i`, as floats: widened here from its halves, or loaded from
// the chunk's rows widened beforehand (`widened`).
static inline __attribute__((always_inline)) v128_t wi_weights_at(const int widened, const char * row, const int i) {
    return widened ? wasm_v128_load((const float *) row + i) : wi_load_halves((const ggml_fp16_t *) row + i);
}

// The most rows and tokens an F16 tile holds: nine sums, and three rows and three tokens loaded,
// fit the fifteen vector registers V8 allocates on x86-64 in whatever order the compiler
// schedules the loads. Two rows by six tokens (the Q tiles' shape) spilled five sums to the stack
// every step once the compiler hoisted the six token loads ahead of the multiply-adds; three by
// three measured faster on a prompt's F16 products in V8. Cutting the four passes over a row
// into stretches that stay in cache, for long rows, gained nothing measurable.
#define WI_F16_TILE_ROWS 3
#define WI_F16_TILE_TOKENS 3

// One F16 tile: `rows` weight rows (`row_bytes` apart; floats where `widened`, else ggml's
// halves) by `tokens` tokens of `n` elements, the tokens as floats in `floats` (token t from
// t * n) and as ggml's halves in `halves` (for the scalar tail), into s[token * bs + row].
static inline __attribute__((always_inline)) void wi_tile_f16(const int widened, const int rows, const int tokens,
                                                              const int n, const char * GGML_RESTRICT weights,
                                                              const size_t row_bytes,
                                                              const float * GGML_RESTRICT floats,
                                                              const ggml_fp16_t * const * GGML_RESTRICT halves,
                                                              float * GGML_RESTRICT s, const size_t bs) {
    const int whole = n & ~15;
    v128_t vectors[4][WI_F16_TILE_ROWS][WI_F16_TILE_TOKENS];
    for (int j = 0; j < 4; j++) {
        v128_t sums[WI_F16_TILE_ROWS][WI_F16_TILE_TOKENS];
        for (int r = 0; r < rows; r++)
            for (int t = 0; t < tokens; t++) sums[r][t] = wasm_f32x4_splat(0.0f);
        for (int i = 4 * j; i < whole; i += 16) {
            v128_t x[WI_F16_TILE_ROWS];
            for (int r = 0; r < rows; r++) x[r] = wi_weights_at(widened, weights + r * row_bytes, i);
            for (int t = 0; t < tokens; t++) {
                const v128_t y = wasm_v128_load(floats + t * n + i);
                for (int r = 0; r < rows; r++) sums[r][t] = wi_multiply_add(x[r], y, sums[r][t]);
            }
        }
        for (int r = 0; r < rows; r++)
            for (int t = 0; t < tokens; t++) vectors[j][r][t] = sums[r][t];
    }
    for (int t = 0; t < tokens; t++) {
        for (int r = 0; r < rows; r++) {
            const v128_t half = wasm_f32x4_add(wasm_f32x4_add(vectors[0][r][t], vectors[2][r][t]),
                                               wasm_f32x4_add(vectors[1][r][t], vectors[3][r][t]));
            double sum = (double) (wasm_f32x4_extract_lane(half, 0) + wasm_f32x4_extract_lane(half, 1) +
                                   wasm_f32x4_extract_lane(half, 2) + wasm_f32x4_extract_lane(half, 3));
            const char * row = weights + r * row_bytes;
            for (int i = whole; i < n; i++) {
                const float weight =
                    widened ? ((const float *) row)[i] : GGML_CPU_FP16_TO_FP32(((const ggml_fp16_t *) row)[i]);
                sum += (double) (weight * GGML_CPU_FP16_TO_FP32(halves[t][i]));
            }
            s[t * bs + r] = (float) sum;
        }
    }
}

#define WI_F16_SHAPE(WIDENED, ROWS, TOKENS)                                                                 \
    static __attribute__((noinline)) void wi_tile_F16_##WIDENED##_##ROWS##_##TOKENS(                        \
        const int n, const char * weights, const size_t row_bytes, const float * floats,                   \
        const ggml_fp16_t * const * halves, float * s, const size_t bs) {                                  \
        wi_tile_f16(WIDENED, ROWS, TOKENS, n, weights, row_bytes, floats, halves, s, bs);                   \
    }
#define WI_F16_SHAPES(WIDENED)                                                                              \
    WI_F16_SHAPE(WIDENED, 1, 1) WI_F16_SHAPE(WIDENED, 1, 2) WI_F16_SHAPE(WIDENED, 1, 3)                     \
    WI_F16_SHAPE(WIDENED, 2, 1) WI_F16_SHAPE(WIDENED, 2, 2) WI_F16_SHAPE(WIDENED, 2, 3)                     \
    WI_F16_SHAPE(WIDENED, 3, 1) WI_F16_SHAPE(WIDENED, 3, 2) WI_F16_SHAPE(WIDENED, 3, 3)
WI_F16_SHAPES(0)
WI_F16_SHAPES(1)

typedef void (*wi_f16_shape)(int, const char *, size_t, const float *, const ggml_fp16_t * const *, float *, size_t);

#define WI_F16_TABLE(WIDENED)                                                                               \
    {{wi_tile_F16_##WIDENED##_1_1, wi_tile_F16_##WIDENED##_1_2, wi_tile_F16_##WIDENED##_1_3},              \
     {wi_tile_F16_##WIDENED##_2_1, wi_tile_F16_##WIDENED##_2_2, wi_tile_F16_##WIDENED##_2_3},              \
     {wi_tile_F16_##WIDENED##_3_1, wi_tile_F16_##WIDENED##_3_2, wi_tile_F16_##WIDENED##_3_3}}
static const wi_f16_shape wi_f16_shapes[2][WI_F16_TILE_ROWS][WI_F16_TILE_TOKENS] = {WI_F16_TABLE(0),
                                                                                     WI_F16_TABLE(1)};

// Grows a thread's scratch to `count` floats at least, keeping it for the next chunk; 0 if the
// memory is not there.
static int wi_grow(float ** scratch, size_t * capacity, const size_t count) {
    if (count <= *capacity) return 1;
    float * grown = realloc(*scratch, count * sizeof(float));
    if (!grown) return 0;
    *scratch = grown;
    *capacity = count;
    return 1;
}

// Widens `count` halves to floats (the same floats as ggml's table), four at a time.
static void wi_widen_halves(const ggml_fp16_t * halves, float * floats, const int count) {
    int i = 0;
    for (; i + 4 <= count; i += 4) wasm_v128_store(floats + i, wi_load_halves(halves + i));
    for (; i < count; i++) floats[i] = GGML_CPU_FP16_TO_FP32(halves[i]);
}

// The most rows a chunk widens beforehand: a prompt's chunks are 32 rows, or ggml's own for a
// matrix of under 64 rows a thread (`wi_mul_mat_plan`), so this bounds the scratch, not the plan.
#define WI_F16_WIDENED_ROWS 256

static int wi_takes(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor);

// A prompt's F16 tokens, widened once per product. Every chunk of a prompt's product takes all
// its tokens (`wi_mul_mat_plan`), so widening a tile's tokens in each chunk widened them again for
// every 32 rows. Instead, as ggml's threads convert the tokens to halves, each widens the halves it
// converted into floats past them in ggml's work buffer (`wi_mul_mat_widen`, which ggml's product
// calls), and the tiles read those floats once the threads have met at ggml's barrier. ggml's
// plan sizes the work buffer for them (`wi_mul_mat_extra`). The floats are the halves' own, as
// `wi_widen_halves` gives them: the sums are unchanged.

// Whether a product's tokens are widened once, beside its halves: an F16 product the tiles take, of
// more than one token.
static int wi_widens_tokens(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor) {
    return weights_tensor->type == GGML_TYPE_F16 && tokens_tensor->ne[1] > 1 && wi_takes(weights_tensor, tokens_tensor);
}

// Where a product's widened tokens start in ggml's work buffer: past its halves, on a cache line.
static size_t wi_halves_bytes(const struct ggml_tensor * tokens_tensor) {
    return GGML_PAD(ggml_row_size(GGML_TYPE_F16, tokens_tensor->ne[0]) * tokens_tensor->ne[1], 64);
}

// The bytes ggml's plan adds to a product's work buffer for its widened tokens (none where they
// are not widened); 64 for the padding past the halves.
size_t wi_mul_mat_extra(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor);

size_t wi_mul_mat_extra(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor) {
    return wi_widens_tokens(weights_tensor, tokens_tensor) ? (size_t) ggml_nelements(tokens_tensor) * sizeof(float) + 64
                                                           : 0;
}

// ggml's product calls this once a thread has converted `count` elements of token `token` from
// `start` to halves in `work` (its work buffer): they are widened to floats past the halves.
void wi_mul_mat_widen(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor, char * work,
                      int64_t token, int64_t start, int64_t count);

void wi_mul_mat_widen(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor, char * work,
                      int64_t token, int64_t start, int64_t count) {
    if (!wi_widens_tokens(weights_tensor, tokens_tensor)) return;
    const int64_t at = token * tokens_tensor->ne[0] + start;
    wi_widen_halves((const ggml_fp16_t *) work + at, (float *) (work + wi_halves_bytes(tokens_tensor)) + at,
                    (int) count);
}

// A chunk of an F16 product: `halves_tokens` holds the tokens as ggml converted them to F16, and,
// for a prompt's, the same as floats past them (`wi_mul_mat_widen`). Where the chunk has more than
// one tile of tokens (a prompt's: every chunk takes all of them, see `wi_mul_mat_plan`), its weight
// rows are widened to floats once, before the first tile, so each tile loads floats where it would
// widen every row's halves again for every three tokens.
static int wi_mul_mat_f16(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                          struct ggml_tensor * result, const void * halves_tokens, int64_t row_start, int64_t row_end,
                          int64_t token_start, int64_t token_end) {
    const int n = (int) weights_tensor->ne[0];
    const size_t token_bytes = ggml_row_size(GGML_TYPE_F16, n);
    const size_t bs = result->nb[1] / sizeof(float);
    const int widened = token_end - token_start > WI_F16_TILE_TOKENS && row_end - row_start <= WI_F16_WIDENED_ROWS;
    // Each thread's scratch, sized for the widest chunk seen and kept: a tile's tokens as floats,
    // then (`widened`) the chunk's weight rows as floats.
    static _Thread_local float * scratch = NULL;
    static _Thread_local size_t capacity = 0;
    const size_t rows_floats = widened ? (size_t) (row_end - row_start) * n : 0;
    if (!wi_grow(&scratch, &capacity, (size_t) WI_F16_TILE_TOKENS * n + rows_floats)) return 0;
    float * floats = scratch;
    const char * weights = (const char *) weights_tensor->data + row_start * weights_tensor->nb[1];
    size_t row_bytes = weights_tensor->nb[1];
    if (widened) {
        float * rows = scratch + (size_t) WI_F16_TILE_TOKENS * n;
        for (int64_t row = 0; row < row_end - row_start; row++)
            wi_widen_halves((const ggml_fp16_t *) (weights + row * row_bytes), rows + row * n, n);
        weights = (const char *) rows;
        row_bytes = (size_t) n * sizeof(float);
    }
    const float * widened_tokens = wi_widens_tokens(weights_tensor, tokens_tensor)
                                       ? (const float *) ((const char *) halves_tokens + wi_halves_bytes(tokens_tensor))
                                       : NULL;
    wi_kernel_runs++;
    for (int64_t token = token_start; token < token_end; token += WI_F16_TILE_TOKENS) {
        const int tokens = (int) MIN(WI_F16_TILE_TOKENS, token_end - token);
        const ggml_fp16_t * halves[WI_F16_TILE_TOKENS];
        for (int t = 0; t < tokens; t++) {
            halves[t] = (const ggml_fp16_t *) ((const char *) halves_tokens + (token + t) * token_bytes);
            if (!widened_tokens) wi_widen_halves(halves[t], floats + t * n, n);
        }
        const float * tile_floats = widened_tokens ? widened_tokens + token * n : floats;
        // A prompt's last lone token still takes three rows a tile: one row by one token loads a
        // weight vector for every multiply-add.
        const int tile_rows = token_end - token_start == 1 ? 1 : WI_F16_TILE_ROWS;
        for (int64_t row = 0; row < row_end - row_start; row += tile_rows) {
            const int rows = (int) MIN(tile_rows, row_end - row_start - row);
            wi_f16_shapes[widened][rows - 1][tokens - 1](n, weights + row * row_bytes, row_bytes, tile_floats, halves,
                                                         (float *) result->data + token * bs + row_start + row, bs);
        }
    }
    return 1;
}

// Whether the tiles take a product: Q4_0, Q5_0, Q8_0 or F16 weights by F32 tokens, in two
// dimensions.
static int wi_takes(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor) {
    const enum ggml_type type = weights_tensor->type;
    return wi_tiles_on &&
           (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q8_0 || type == GGML_TYPE_F16) &&
           tokens_tensor->type == GGML_TYPE_F32 &&
           weights_tensor->ne[2] == 1 && weights_tensor->ne[3] == 1 && tokens_tensor->ne[2] == 1 &&
           tokens_tensor->ne[3] == 1;
}

// ggml's matrix product calls this once it has planned a product's chunks (`chunks0` of the
// weights' `rows` by `chunks1` of the `tokens`, for `threads` threads), to change the plan for a
// prompt's products that the tiles take: every chunk takes all the tokens, so tiles stay full
// width (ggml cuts 29 tokens into 15 and 14, tiles of 6, 6 and 3 or 2), and a chunk's
// tokens are widened once for 32 rows where each thread still gets four chunks, else for 16.
// Generation (one token) keeps ggml's plan.
void wi_mul_mat_plan(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                     int threads, int64_t rows, int64_t tokens, int64_t * chunks0, int64_t * chunks1);

void wi_mul_mat_plan(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                     int threads, int64_t rows, int64_t tokens, int64_t * chunks0, int64_t * chunks1) {
    if (tokens < 2 || !wi_takes(weights_tensor, tokens_tensor)) return;
    const int64_t chunk_rows = (rows + 31) / 32 >= 4 * threads ? 32 : 16;
    int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    if (chunks < 4 * threads) return;
    // ggml gives each chunk ceil(rows / chunks) rows: for F16, a few more chunks where that makes
    // it a multiple of the tile's three rows, so no chunk ends in a narrower tile.
    if (weights_tensor->type == GGML_TYPE_F16)
        for (int64_t more = chunks; more < chunks + 16; more++) {
            const int64_t rows_per_chunk = (rows + more - 1) / more;
            if (rows_per_chunk % WI_F16_TILE_ROWS == 0 && rows_per_chunk * (more - 1) < rows) {
                chunks = more;
                break;
            }
        }
    *chunks0 = chunks;
    *chunks1 = 1;
}

// ggml's matrix product calls this for each chunk (rows [row_start, row_end) of the weights by
// tokens [token_start, token_end)) once `quantized_tokens` holds the tokens as Q8_0. Returns 1
// when it computed the chunk, 0 when the product is not ours (see `wi_takes`) and ggml's own
// code should.
int wi_mul_mat_tiled(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                     struct ggml_tensor * result, const void * quantized_tokens, int64_t row_start, int64_t row_end,
                     int64_t token_start, int64_t token_end);

int wi_mul_mat_tiled(const struct ggml_tensor * weights_tensor, const struct ggml_tensor * tokens_tensor,
                     struct ggml_tensor * result, const void * quantized_tokens, int64_t row_start, int64_t row_end,
                     int64_t token_start, int64_t token_end) {
    if (!wi_takes(weights_tensor, tokens_tensor)) return 0;
    const enum ggml_type type = weights_tensor->type;
    if (type == GGML_TYPE_F16)
        return wi_mul_mat_f16(weights_tensor, tokens_tensor, result, quantized_tokens, row_start, row_end, token_start,
                              token_end);
    const int blocks = (int) (weights_tensor->ne[0] / QK8_0);
    const size_t token_bytes = ggml_row_size(GGML_TYPE_Q8_0, weights_tensor->ne[0]);
    const size_t row_bytes = weights_tensor->nb[1];
    const size_t bs = result->nb[1] / sizeof(float);
    // Each thread's scratch for a tile's widened tokens, sized for the widest rows seen and kept:
    // one allocation per thread, not one per chunk (a product has about a hundred chunks).
    static _Thread_local char * widened = NULL;
    static _Thread_local int widened_blocks = 0;
    if (blocks > widened_blocks) {
        const size_t bytes = (size_t) WI_TILE_TOKENS * blocks * (sizeof(wi_widened_block) + sizeof(float));
        char * grown = realloc(widened, bytes);
        if (!grown) return 0;
        widened = grown;
        widened_blocks = blocks;
    }
    float * scales = (float *) (widened + (size_t) WI_TILE_TOKENS * widened_blocks * sizeof(wi_widened_block));
    const wi_tile_shape(*shapes)[WI_TILE_TOKENS] = wi_tile_shapes[type == GGML_TYPE_Q4_0 ? 0 : type == GGML_TYPE_Q5_0 ? 1 : 2];
    wi_kernel_runs++;
    for (int64_t token = token_start; token < token_end; token += WI_TILE_TOKENS) {
        const int tokens = (int) MIN(WI_TILE_TOKENS, token_end - token);
        const block_q8_0 * quantized[WI_TILE_TOKENS];
        for (int t = 0; t < tokens; t++)
            quantized[t] = (const block_q8_0 *) ((const char *) quantized_tokens + (token + t) * token_bytes);
        wi_widen(type, tokens, blocks, quantized, widened, scales);
        const int tile_rows = WI_TILE_ROWS(type, tokens);
        for (int64_t row = row_start; row < row_end; row += tile_rows) {
            const int rows = (int) MIN(tile_rows, row_end - row);
            shapes[rows - 1][tokens - 1](blocks, (const char *) weights_tensor->data + row * row_bytes, row_bytes,
                                         widened, scales, quantized, (float *) result->data + token * bs + row, bs);
        }
    }
    return 1;
}

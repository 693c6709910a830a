// The products of a batched decode step: several input rows times one weight matrix, the weights read once.
//
// Included by decode_step.cpp after one_row_gemv.cpp. One row's product streams every weight from memory
// once per token; with B rows, each block of ROWS weight rows is read from memory once and multiplied by
// every input while it is in the core's cache, and inputs go IN at a time through one kernel that loads each
// weight vector once for all of them (fewer loads per multiply-add, the bound once the weights are in
// cache). Each output keeps the single-row kernel's arithmetic exactly -- its own two accumulators, the same
// column order, the same reduction and the same tail -- so a row's numbers never depend on the rows beside
// it: what the kernel of one input computes, the kernel of IN inputs computes for each of them.

#include <type_traits>

#include "tile_rows.cpp"

namespace {

// Inputs sharing each weight load: with 32 vector registers, 3 inputs' 4 rows of accumulators (24) and their 6
// input vectors fit beside the weights; with 16, one input's already fill them.
#if defined(__AVX512F__)
constexpr int IN = 3;
#else
constexpr int IN = 1;
#endif

// each(b, r, r') over the output rows [lo, hi) of every input b: each block of ROWS weight rows (then each
// row of the tail) for every input while the block is in cache. A block is the one a single input's product
// over [lo, hi) would take (lo is a multiple of ROWS), so every output is summed exactly as it is alone.
template <typename Each>
inline void blocks_for_rows(int64_t lo, int64_t hi, int64_t n_rows, Each&& each) {
    if (n_rows == 1) {  // one input: the whole range in one call, the same blocks
        each(int64_t{0}, lo, hi);
        return;
    }
    int64_t r = lo;
    for (; r + ROWS <= hi; r += ROWS)
        for (int64_t b = 0; b < n_rows; ++b) each(b, r, r + ROWS);
    for (; r < hi; ++r)
        for (int64_t b = 0; b < n_rows; ++b) each(b, r, r + 1);
}

#if defined(__AVX512F__)
// res[o] = _mm512_reduce_add_ps(a[o]) for 16 vectors, bit for bit: the same additions of the same pairs (the
// upper 256 bits onto the lower, then the upper 128, then lanes 2 and 3 onto 0 and 1, then lane 1 onto lane 0),
// made for 16 vectors at once by shuffles between them instead of within each (30 shuffles and 15 additions
// instead of 16 x 7 instructions).
inline void reduce16(const __m512* a, float* res) {
    __m512 s1[8], s2[4], s3[2];
    PG_UNROLL
    for (int i = 0; i < 8; ++i) {  // each pair's 256-bit halves: lanes 0-7 of a[2i], then of a[2i + 1]
        const __m512 p = a[2 * i], q = a[2 * i + 1];
        s1[i] = _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 2, 3, 2)),
                              _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(1, 0, 1, 0)));
    }
    PG_UNROLL
    for (int i = 0; i < 4; ++i)  // each 8's 128-bit halves: 128-bit chunk c is a[4i + c]'s 4 lanes
        s2[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * i], s1[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm512_shuffle_f32x4(s1[2 * i], s1[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    PG_UNROLL
    for (int i = 0; i < 2; ++i)  // lanes 2, 3 onto 0, 1: chunk c holds a[8i + c]'s two, then a[8i + 4 + c]'s
        s3[i] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * i], s2[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                              _mm512_shuffle_ps(s2[2 * i], s2[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)));
    // lane 1 onto lane 0: lane 4c + e holds a[c + 4e]'s sum
    const __m512 s4 = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    alignas(64) float t[16];
    _mm512_store_ps(t, s4);
    PG_UNROLL
    for (int c = 0; c < 4; ++c)
        for (int e = 0; e < 4; ++e) res[c + 4 * e] = t[4 * c + e];
}
#endif

// out[j][r] = dot(w rows r0..r0+R-1, x[j]) for I inputs: dot_rows<W, R>'s arithmetic for each of them.
template <typename W, int R, int I>
inline void dot_rows_multi(const W* w, const float* const* x, int64_t k, float* const* out) {
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 acc[I][R][2];
    PG_UNROLL
    for (int j = 0; j < I; ++j)
        PG_UNROLL
        for (int r = 0; r < R; ++r) acc[j][r][0] = acc[j][r][1] = _mm512_setzero_ps();
    for (; i + 32 <= k; i += 32) {
        __m512 x0[I], x1[I];
        PG_UNROLL
        for (int j = 0; j < I; ++j) x0[j] = _mm512_loadu_ps(x[j] + i), x1[j] = _mm512_loadu_ps(x[j] + i + 16);
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m512 w0 = load16(w + r * k + i), w1 = load16(w + r * k + i + 16);
            PG_UNROLL
            for (int j = 0; j < I; ++j) {
                acc[j][r][0] = _mm512_fmadd_ps(w0, x0[j], acc[j][r][0]);
                acc[j][r][1] = _mm512_fmadd_ps(w1, x1[j], acc[j][r][1]);
            }
        }
    }
    if constexpr (I * R > 4 && I * R <= 16) {  // the outputs' horizontal sums side by side (reduce16)
        __m512 sums[16];
        PG_UNROLL
        for (int j = 0; j < I; ++j)
            PG_UNROLL
            for (int r = 0; r < R; ++r) sums[j * R + r] = _mm512_add_ps(acc[j][r][0], acc[j][r][1]);
        for (int o = I * R; o < 16; ++o) sums[o] = _mm512_setzero_ps();
        alignas(64) float res[16];
        reduce16(sums, res);
        PG_UNROLL
        for (int j = 0; j < I; ++j)
            PG_UNROLL
            for (int r = 0; r < R; ++r) out[j][r] = res[j * R + r];
    } else {
        PG_UNROLL
        for (int j = 0; j < I; ++j)
            PG_UNROLL
            for (int r = 0; r < R; ++r) out[j][r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][r][0], acc[j][r][1]));
    }
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[I][R][2];
    PG_UNROLL
    for (int j = 0; j < I; ++j)
        PG_UNROLL
        for (int r = 0; r < R; ++r) acc[j][r][0] = acc[j][r][1] = _mm256_setzero_ps();
    for (; i + 16 <= k; i += 16) {
        __m256 x0[I], x1[I];
        PG_UNROLL
        for (int j = 0; j < I; ++j) x0[j] = _mm256_loadu_ps(x[j] + i), x1[j] = _mm256_loadu_ps(x[j] + i + 8);
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m256 w0 = load8(w + r * k + i), w1 = load8(w + r * k + i + 8);
            PG_UNROLL
            for (int j = 0; j < I; ++j) {
                acc[j][r][0] = _mm256_fmadd_ps(w0, x0[j], acc[j][r][0]);
                acc[j][r][1] = _mm256_fmadd_ps(w1, x1[j], acc[j][r][1]);
            }
        }
    }
    PG_UNROLL
    for (int j = 0; j < I; ++j)
        PG_UNROLL
        for (int r = 0; r < R; ++r) out[j][r] = hsum8(_mm256_add_ps(acc[j][r][0], acc[j][r][1]));
#else
    PG_UNROLL
    for (int j = 0; j < I; ++j)
        for (int r = 0; r < R; ++r) out[j][r] = 0.0f;
#endif
    for (; i < k; ++i)
        PG_UNROLL
        for (int j = 0; j < I; ++j)
            for (int r = 0; r < R; ++r) out[j][r] = madd(scalar(w + r * k + i), x[j][i], out[j][r]);
}

#if defined(__AVX512BF16__)
// The same for bfloat16 weights and inputs on the bfloat16 dot-product instruction: dot_rows_bf16<R>'s arithmetic.
template <int R, int I>
inline void dot_rows_bf16_multi(const uint16_t* w, const uint16_t* const* x, int64_t k, float* const* out) {
    int64_t i = 0;
    __m512 acc[I][R][2];
    PG_UNROLL
    for (int j = 0; j < I; ++j)
        PG_UNROLL
        for (int r = 0; r < R; ++r) acc[j][r][0] = acc[j][r][1] = _mm512_setzero_ps();
    for (; i + 64 <= k; i += 64) {
        __m512bh x0[I], x1[I];
        PG_UNROLL
        for (int j = 0; j < I; ++j) {
            x0[j] = (__m512bh)_mm512_loadu_si512(x[j] + i);
            x1[j] = (__m512bh)_mm512_loadu_si512(x[j] + i + 32);
        }
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m512bh w0 = (__m512bh)_mm512_loadu_si512(w + r * k + i);
            const __m512bh w1 = (__m512bh)_mm512_loadu_si512(w + r * k + i + 32);
            PG_UNROLL
            for (int j = 0; j < I; ++j) {
                acc[j][r][0] = _mm512_dpbf16_ps(acc[j][r][0], w0, x0[j]);
                acc[j][r][1] = _mm512_dpbf16_ps(acc[j][r][1], w1, x1[j]);
            }
        }
    }
    PG_UNROLL
    for (int j = 0; j < I; ++j)
        PG_UNROLL
        for (int r = 0; r < R; ++r) out[j][r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][r][0], acc[j][r][1]));
    for (; i < k; ++i)
        PG_UNROLL
        for (int j = 0; j < I; ++j)
            for (int r = 0; r < R; ++r) out[j][r] = madd(bf16_to_float(w[r * k + i]), bf16_to_float(x[j][i]), out[j][r]);
}
#endif

// The kernel for R rows and I inputs: float32, bfloat16 (widened, or on the dot-product instruction, which
// takes the inputs in bfloat16: xh) or int8 (widened) weights.
template <typename W, int R, int I>
inline void kernel_multi(const W* w, const float* const* xf, const uint16_t* const* xh, int64_t k, float* const* out) {
#if defined(__AVX512BF16__)
    if constexpr (sizeof(W) == 2) {
        dot_rows_bf16_multi<R, I>(w, xh, k, out);
        return;
    }
#endif
    (void)xh;
    dot_rows_multi<W, R, I>(w, xf, k, out);
}

// y[b][lo..hi) = W x[b] (no bias) for the n inputs b: each block of ROWS weight rows once for all of them,
// IN inputs per kernel call (then one by one), every output summed as the single-row product sums it.
template <typename W>
inline void rows_multi(const W* w, const float* const* xf, const uint16_t* const* xh, int64_t n, int64_t k,
                       int64_t lo, int64_t hi, float* const* y) {
    float* out[IN];
    auto block = [&](int64_t r, auto rows) {
        constexpr int R = decltype(rows)::value;
        int64_t b = 0;
        for (; b + IN <= n; b += IN) {
            PG_UNROLL
            for (int j = 0; j < IN; ++j) out[j] = y[b + j] + r;
            kernel_multi<W, R, IN>(w + r * k, xf + b, xh + b, k, out);
        }
        for (; b < n; ++b) {
            out[0] = y[b] + r;
            kernel_multi<W, R, 1>(w + r * k, xf + b, xh + b, k, out);
        }
    };
    int64_t r = lo;
    if constexpr (std::is_same_v<W, float>)  // many float32 rows: whole tiles on their side (tile_rows.cpp)
        if (tiles_pay(n, k)) r = tile_rows(w, xf, n, k, lo, hi, y);
    for (; r + ROWS <= hi; r += ROWS) block(r, std::integral_constant<int, ROWS>{});
    for (; r < hi; ++r) block(r, std::integral_constant<int, 1>{});
}

}  // namespace

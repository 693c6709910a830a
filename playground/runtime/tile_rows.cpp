// Many rows times one float32 weight matrix, a tile of 16 weight rows at a time turned on its side.
//
// Included by batched_rows.cpp. The row kernels sum each output along its weight row: two accumulators of 16
// lanes, then one horizontal sum per output (the tree of _mm512_reduce_add_ps). With many rows beside each
// other that sum is a fixed cost per output per row, and at a short row (128 columns) it is as large as the
// multiply-adds themselves. Here a tile of 16 weight rows is transposed once into the thread's buffer (column
// i of the tile is one vector of the 16 outputs' weights), and each input row is multiplied into it with the
// input's value broadcast: the 16 outputs of a row sit in the lanes of one vector, so the horizontal sum
// becomes 15 vector additions for all 16 of them, and each loaded weight vector serves TILE_IN input rows.
//
// The arithmetic is the row kernels' exactly. Lane l of accumulator a of the row kernel sums the columns
// 32t + 16a + l in order of t by fused multiply-adds from zero; here that is the chain of vector q[a][l] over
// the same t. The accumulators are added (q[0][l] + q[1][l]), then the tree adds lane l + 8 onto l, l + 4
// onto l, l + 2 onto l and l + 1 onto l, as _mm512_reduce_add_ps does (each addition is exact to commute).
// So every output is bit for bit what the single-row kernel gives it, whichever path a call takes; the path
// is a matter of speed only. Rows of k not a multiple of 32 (the row kernels' tail) keep the row kernels.

#include <vector>

namespace {

#if defined(__AVX512F__)
constexpr int TILE = 16;    // weight rows per tile: one vector of outputs
// Input rows sharing each weight vector load, and lanes' chains per pass over the tile: 6 x 2 lanes x 2
// accumulators is 24 vector registers, which leaves the loaded weights and the broadcast inputs theirs (4 x 4
// lanes needed 32 and spilled; measured in docs/benchmarks.md).
constexpr int TILE_IN = 6;
constexpr int LANES = 2;

// Worth it measured on a 2-core AMD EPYC (docs/benchmarks.md): from 16 rows at any length, from 8 at 256+.
inline bool tiles_pay(int64_t n, int64_t k) { return k % 32 == 0 && (n >= 16 || (n >= 8 && k >= 256)); }

// out[c * 16 + r] = in[r * ld + c] for the 16 x 16 block at ``in``.
inline void transpose16(const float* in, int64_t ld, float* out) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * ld);
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    auto lo64 = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    auto hi64 = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = lo64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = hi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = lo64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = hi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 4; ++i) {  // the 128-bit lanes: each column's four quarters into one vector
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);
    }
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(out + i * 16, r[i]);
}

// out[b][0..16) = the tile's 16 outputs for the I input rows x[b] (wt: the transposed tile, k x 16).
template <int I>
inline void tile_times(const float* wt, const float* const* x, int64_t k, float* const* out) {
    __m512 q[I][16];
    for (int l0 = 0; l0 < 16; l0 += LANES) {  // LANES lanes' chains at a time, both accumulators
        __m512 acc[I][LANES][2];
        for (int b = 0; b < I; ++b)
            for (int u = 0; u < LANES; ++u) acc[b][u][0] = acc[b][u][1] = _mm512_setzero_ps();
        for (int64_t i = 0; i < k; i += 32)
            for (int a = 0; a < 2; ++a)
                for (int u = 0; u < LANES; ++u) {
                    const int64_t c = i + 16 * a + l0 + u;
                    const __m512 w = _mm512_loadu_ps(wt + c * 16);
                    for (int b = 0; b < I; ++b)
                        acc[b][u][a] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[b][c]), acc[b][u][a]);
                }
        for (int b = 0; b < I; ++b)
            for (int u = 0; u < LANES; ++u) q[b][l0 + u] = _mm512_add_ps(acc[b][u][0], acc[b][u][1]);
    }
    for (int b = 0; b < I; ++b) {
        __m512 s[8];
        for (int l = 0; l < 8; ++l) s[l] = _mm512_add_ps(q[b][l + 8], q[b][l]);
        for (int l = 0; l < 4; ++l) s[l] = _mm512_add_ps(s[l + 4], s[l]);
        for (int l = 0; l < 2; ++l) s[l] = _mm512_add_ps(s[l + 2], s[l]);
        _mm512_storeu_ps(out[b], _mm512_add_ps(s[1], s[0]));
    }
}

// tile_times for 0 < I < TILE_IN rows, the template chosen for I.
template <int I = TILE_IN - 1>
inline void rest_times(int64_t left, const float* wt, const float* const* x, int64_t k, float* const* out) {
    if constexpr (I > 0) {
        if (left == I) return tile_times<I>(wt, x, k, out);
        rest_times<I - 1>(left, wt, x, k, out);
    }
}

// y[b][lo..lo + 16m) for the n inputs b, m the whole tiles in [lo, hi); returns lo + 16m (the rest is the
// caller's, for the row kernels).
inline int64_t tile_rows(const float* w, const float* const* x, int64_t n, int64_t k, int64_t lo, int64_t hi,
                         float* const* y) {
    thread_local std::vector<float> wt;  // this thread's transposed tile
    if (static_cast<int64_t>(wt.size()) < k * TILE) wt.resize(k * TILE);
    const float* xs[TILE_IN];
    float* os[TILE_IN];
    int64_t r = lo;
    for (; r + TILE <= hi; r += TILE) {
        for (int64_t c = 0; c < k; c += 16) transpose16(w + r * k + c, k, wt.data() + c * TILE);
        int64_t b = 0;
        for (; b + TILE_IN <= n; b += TILE_IN) {
            for (int j = 0; j < TILE_IN; ++j) xs[j] = x[b + j], os[j] = y[b + j] + r;
            tile_times<TILE_IN>(wt.data(), xs, k, os);
        }
        const int64_t left = n - b;  // the last few rows in one call of their own number, not one by one
        for (int64_t j = 0; j < left; ++j) xs[j] = x[b + j], os[j] = y[b + j] + r;
        rest_times(left, wt.data(), xs, k, os);
    }
    return r;
}
#else
inline bool tiles_pay(int64_t, int64_t) { return false; }
inline int64_t tile_rows(const float*, const float* const*, int64_t, int64_t, int64_t lo, int64_t, float* const*) {
    return lo;
}
#endif

}  // namespace

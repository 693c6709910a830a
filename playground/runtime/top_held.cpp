// The few best entries of a float32 row, held by insertion as the entries are offered in order of their ids:
// the sampler's top-k (sample_parts.cpp, sample_fused.cpp) and the row summary's most likely tokens
// (row_summary.cpp) share it. Included by both libraries' sources; no entry point of its own.

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace {

// The ``want`` best ids of x by larger value then lower id, held in ``out`` best first as entries are offered in
// order of their ids (an equal value offered later ranks after those held).
struct TopHeld {
    const float* x;
    int32_t* out;
    int64_t want, held = 0;
    float floor_value = -INFINITY;  // the want-th value held, once want are held
    bool open() const { return held < want; }
    void insert(int64_t j) {
        const float v = x[j];
        if (held == want && !(v > floor_value)) return;
        int64_t at = held < want ? held : want - 1;  // the slot v lands in, then moved up past smaller values
        while (at > 0 && x[out[at - 1]] < v) {
            out[at] = out[at - 1];
            --at;
        }
        out[at] = static_cast<int32_t>(j);
        if (held < want) ++held;
        if (held == want) floor_value = x[out[want - 1]];
    }
};

// The ``want`` (1..n) best ids of x[0..n) into ``out``, best first. Once ``want`` are held, a block of 16 whose
// largest entry cannot enter is skipped with one comparison.
inline void top_of_row(const float* x, int64_t n, int64_t want, int32_t* out) {
    TopHeld top{x, out, want};
    constexpr int64_t SKIP = 16;
    for (int64_t start = 0; start < n; start += SKIP) {
        const int64_t stop = start + SKIP < n ? start + SKIP : n;
        if (!top.open() && stop - start == SKIP) {
#if defined(__AVX2__) && defined(__FMA__)
            const __m256 most = _mm256_max_ps(_mm256_loadu_ps(x + start), _mm256_loadu_ps(x + start + 8));
            if (!_mm256_movemask_ps(_mm256_cmp_ps(most, _mm256_set1_ps(top.floor_value), _CMP_GT_OQ))) continue;
#else
            float block_max = -INFINITY;
            for (int64_t j = start; j < stop; ++j) block_max = x[j] > block_max ? x[j] : block_max;
            if (!(block_max > top.floor_value)) continue;
#endif
        }
        for (int64_t j = start; j < stop; ++j) top.insert(j);
    }
}

}  // namespace

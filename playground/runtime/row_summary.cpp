// What the sampler reports about one float32 row of logits, in three passes over the row, as llama.cpp's
// sampler runs in C: whether every entry is finite, the largest logit and its first index, log Σ exp(x - max),
// the entropy of softmax(x) in bits, the n most likely ids (larger logit first, the lower id on a tie) with
// their probabilities, and how many probabilities are surely above zero in float32.
//
// Built and loaded by playground/runtime/native_row_summary.py (g++ -O3 -march=native, no torch headers); the
// held top list is top_held.cpp's, which the sampler shares.

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "top_held.cpp"

namespace {

// Below this, exp(d) is no normal float32: such an entry adds less than 1e-38 to the sums and is left out.
constexpr float EXP_FLOOR = -87.0f;
// Below this, exp(d) rounds to 0 in float32 whatever the sum: the entry is surely not kept.
constexpr float SURELY_ZERO = -120.0f;

// exp(d) for EXP_FLOOR <= d <= 0, within a few float32 ulps; 0 below EXP_FLOOR. Branch-free, so the loop
// that calls it vectorises: d = n·ln2 + r with |r| <= ln2/2, exp(r) by its Taylor series to r^7
// (truncation below 6e-9 relative), 2^n put into the exponent bits.
inline float exp_nonpositive(float d) {
    const float x = d < EXP_FLOOR ? EXP_FLOOR : d;
    const float n = std::floor(x * 1.44269504088896341f + 0.5f);
    const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    const float scale = __builtin_bit_cast(float, bits);
    return d < EXP_FLOOR ? 0.0f : p * scale;
}

struct Sums {
    double sum = 0.0, weighted = 0.0;
    int kept = 0, unsure = 0;
};

// Σ exp(d), Σ exp(d)·d and the two counts over x[start..stop) with d = x - m, one entry at a time.
inline void sums_scalar(const float* x, int64_t start, int64_t stop, float m, float sure_kept, Sums& s) {
    for (int64_t i = start; i < stop; ++i) {
        const float d = x[i] - m;
        const float e = exp_nonpositive(d);
        s.sum += static_cast<double>(e);
        s.weighted += d >= EXP_FLOOR ? static_cast<double>(e * d) : 0.0;
        s.kept += d > sure_kept;
        s.unsure += (d <= sure_kept) & (d >= SURELY_ZERO);
    }
}

#if defined(__AVX2__) && defined(__FMA__)
// The same, eight entries at a time (gcc leaves the scalar loop unvectorised even under omp simd).
inline void sums_avx2(const float* x, int64_t start, int64_t stop, float m, float sure_kept, Sums& s) {
    const __m256 vm = _mm256_set1_ps(m), floor_v = _mm256_set1_ps(EXP_FLOOR), sure = _mm256_set1_ps(sure_kept);
    const __m256 zero_v = _mm256_set1_ps(SURELY_ZERO), log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693145751953125f), ln2_lo = _mm256_set1_ps(1.42860682030941723212e-6f);
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 c7 = _mm256_set1_ps(1.0f / 5040.0f), c6 = _mm256_set1_ps(1.0f / 720.0f);
    const __m256 c5 = _mm256_set1_ps(1.0f / 120.0f), c4 = _mm256_set1_ps(1.0f / 24.0f);
    const __m256 c3 = _mm256_set1_ps(1.0f / 6.0f);
    __m256 sum = _mm256_setzero_ps(), weighted = _mm256_setzero_ps();
    __m256i kept = _mm256_setzero_si256(), unsure = _mm256_setzero_si256();
    int64_t i = start;
    for (; i + 8 <= stop; i += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        const __m256 normal = _mm256_cmp_ps(d, floor_v, _CMP_GE_OQ);
        const __m256 xc = _mm256_max_ps(d, floor_v);
        const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(xc, log2e, half));
        const __m256 r = _mm256_fnmadd_ps(n, ln2_lo, _mm256_fnmadd_ps(n, ln2_hi, xc));
        __m256 p = _mm256_fmadd_ps(c7, r, c6);
        p = _mm256_fmadd_ps(p, r, c5);
        p = _mm256_fmadd_ps(p, r, c4);
        p = _mm256_fmadd_ps(p, r, c3);
        p = _mm256_fmadd_ps(p, r, half);
        p = _mm256_fmadd_ps(p, r, one);
        p = _mm256_fmadd_ps(p, r, one);
        const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        const __m256 e = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), normal);
        sum = _mm256_add_ps(sum, e);
        weighted = _mm256_add_ps(weighted, _mm256_and_ps(_mm256_mul_ps(e, d), normal));
        // a true comparison is all ones, -1 as an integer: subtracting it counts one
        kept = _mm256_sub_epi32(kept, _mm256_castps_si256(_mm256_cmp_ps(d, sure, _CMP_GT_OQ)));
        const __m256 low = _mm256_and_ps(_mm256_cmp_ps(d, sure, _CMP_LE_OQ), _mm256_cmp_ps(d, zero_v, _CMP_GE_OQ));
        unsure = _mm256_sub_epi32(unsure, _mm256_castps_si256(low));
    }
    alignas(32) float fs[8], fw[8];
    alignas(32) int32_t ik[8], iu[8];
    _mm256_store_ps(fs, sum);
    _mm256_store_ps(fw, weighted);
    _mm256_store_si256(reinterpret_cast<__m256i*>(ik), kept);
    _mm256_store_si256(reinterpret_cast<__m256i*>(iu), unsure);
    for (int j = 0; j < 8; ++j) {
        s.sum += fs[j];
        s.weighted += fw[j];
        s.kept += ik[j];
        s.unsure += iu[j];
    }
    sums_scalar(x, i, stop, m, sure_kept, s);
}
#endif

}  // namespace

extern "C" {

// Summarises x[0..n). Returns 0 (and fills nothing) if an entry is NaN or ±inf and ``allow_neg_inf`` is 0;
// with ``allow_neg_inf`` 1, -inf entries are probabilities of 0 (a row after top-k / top-p). Else returns 1 and
// fills: top_ids/top_probs[0..min(n_top, n)) (ids by larger logit, then lower id; probabilities rounded to
// float32 from double), out[0] the largest logit, out[1] its first index, out[2] log Σ exp(x - max) (natural),
// out[3] the entropy in bits, out[4] the count of entries whose float32 probability is surely above zero,
// out[5] the count of entries too close to float32's underflow to say (the caller counts those its own way).
int pg_row_summary(const float* x, int64_t n, int n_top, int allow_neg_inf, int32_t* top_ids, float* top_probs,
                   double* out) {
    if (n <= 0) return 0;
    // Pass 1: finiteness and the maximum.
    int bad = 0;
    int neg_inf = 0;
    float m = -INFINITY;
#pragma omp simd reduction(| : bad, neg_inf) reduction(max : m)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        const int finite = (v - v) == 0.0f;
        neg_inf |= v == -INFINITY;
        bad |= !finite && v != -INFINITY;
        m = v > m ? v : m;
    }
    if (bad || (neg_inf && !allow_neg_inf) || m == -INFINITY) return 0;
    int64_t first = 0;
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 vmax = _mm256_set1_ps(m);
    while (first + 8 <= n && !_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + first), vmax, _CMP_EQ_OQ))) first += 8;
#endif
    while (x[first] != m) ++first;

    // Pass 2: Σ exp(d) and Σ exp(d)·d (d = x - max) for the log-sum-exp and the entropy, the counts.
    // exp(d) / Σ >= exp(d) / n, and above exp(-102) ~ 5e-45 it rounds to float32's smallest subnormal or more.
    const float sure_kept = static_cast<float>(std::log(static_cast<double>(n)) - 102.0);
    // Blocks of 256 entries: the vector loop's float32 lanes hold 32 terms each before they are added in double.
    double sum = 0.0, weighted = 0.0;
    int64_t kept = 0, unsure = 0;
    constexpr int64_t SUM_BLOCK = 256;
    for (int64_t start = 0; start < n; start += SUM_BLOCK) {
        const int64_t stop = start + SUM_BLOCK < n ? start + SUM_BLOCK : n;
        Sums block;
#if defined(__AVX2__) && defined(__FMA__)
        sums_avx2(x, start, stop, m, sure_kept, block);
#else
        sums_scalar(x, start, stop, m, sure_kept, block);
#endif
        sum += block.sum;
        weighted += block.weighted;
        kept += block.kept;
        unsure += block.unsure;
    }
    const double log_sum = std::log(sum);
    out[0] = m;
    out[1] = static_cast<double>(first);
    out[2] = log_sum;
    out[3] = (log_sum - weighted / sum) / std::log(2.0);
    out[4] = static_cast<double>(kept);
    out[5] = static_cast<double>(unsure);

    // Pass 3: the n_top largest, offered in order of their ids, so an equal value later in the row ranks after
    // the ones held.
    const int64_t want = n_top < n ? n_top : n;
    if (want <= 0) return 1;
    top_of_row(x, n, want, top_ids);
    for (int64_t j = 0; j < want; ++j) {
        top_probs[j] = static_cast<float>(std::exp(static_cast<double>(x[top_ids[j]]) - m - log_sum));
    }
    return 1;
}

}  // extern "C"

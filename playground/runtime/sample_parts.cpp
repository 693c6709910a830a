// The passes sample_row.cpp makes over a row: exp (vectorised), sums, and the selections (a held top list, a
// quickselect that follows the probability mass). Included by sample_row.cpp, which is built by
// playground/runtime/native_sampler.py; here no entry point of its own.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "top_held.cpp"

namespace {

// Below this, exp(d) rounds to 0 in float32. Between it and -87 exp(d) is a subnormal float32: torch's softmax
// keeps those (a probability above zero counts as a kept token), so the exp here does too.
constexpr float EXP_FLOOR = -104.0f;
constexpr int64_t BLOCK = 256;  // entries per block of the sums and of the cumulative distribution
constexpr int64_t HEAP_MOST = 256;  // up to this many best entries are held by insertion, more by nth_element

// exp(d) for d <= 0 within a few float32 ulps (row_summary.cpp's, its 2^n applied in two halves so that the
// subnormal results come out too): 0 below EXP_FLOOR and for -inf.
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
    const int32_t half = static_cast<int32_t>(std::floor(n * 0.5f));
    const float low = __builtin_bit_cast(float, (half + 127) << 23);
    const float high = __builtin_bit_cast(float, (static_cast<int32_t>(n) - half + 127) << 23);
    return d < EXP_FLOOR ? 0.0f : p * high * low;
}

#if defined(__AVX2__) && defined(__FMA__)
// The same, eight entries at a time (gcc does not vectorise the scalar loop that stores and sums).
inline __m256 exp8(__m256 d) {
    const __m256 floor_v = _mm256_set1_ps(EXP_FLOOR);
    const __m256 normal = _mm256_cmp_ps(d, floor_v, _CMP_GE_OQ);  // false for -inf too
    const __m256 xc = _mm256_max_ps(d, floor_v);
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc));
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 5040.0f), r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256 half = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256i low = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(half), bias), 23);
    const __m256i high = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_sub_ps(n, half)), bias), 23);
    p = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(high)), _mm256_castsi256_ps(low));
    return _mm256_and_ps(p, normal);
}
#endif

struct Sums {
    double sum = 0.0, weighted = 0.0;  // Σ exp(w) and Σ exp(w)·w, for the normaliser and the entropy
};

double entropy_bits(const Sums& s) { return (std::log(s.sum) - s.weighted / s.sum) / std::log(2.0); }

// w[i] = x[i] - m, divided by t when ``divide`` (float32 operations, as torch's), and e[i] = exp(w[i]).
// Blocks of 256: the vector lanes hold 32 float32 terms each before they are added in double.
// e·w is left out below EXP_FLOOR, where 0 · -inf would be NaN.
void exp_pass(const float* x, int64_t n, float m, float t, bool divide, float* w, float* e, Sums& s) {
    for (int64_t start = 0; start < n; start += BLOCK) {
        const int64_t stop = start + BLOCK < n ? start + BLOCK : n;
        int64_t i = start;
#if defined(__AVX2__) && defined(__FMA__)
        const __m256 vm = _mm256_set1_ps(m), vt = _mm256_set1_ps(t), floor_v = _mm256_set1_ps(EXP_FLOOR);
        __m256 vs = _mm256_setzero_ps(), vw = _mm256_setzero_ps();
        for (; i + 8 <= stop; i += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
            if (divide) d = _mm256_div_ps(d, vt);
            const __m256 ev = exp8(d);
            _mm256_storeu_ps(w + i, d);
            _mm256_storeu_ps(e + i, ev);
            vs = _mm256_add_ps(vs, ev);
            // 0 · -inf is NaN: the mask keeps only entries above the floor
            vw = _mm256_add_ps(vw, _mm256_and_ps(_mm256_mul_ps(ev, d), _mm256_cmp_ps(d, floor_v, _CMP_GE_OQ)));
        }
        alignas(32) float fs[8], fw[8];
        _mm256_store_ps(fs, vs);
        _mm256_store_ps(fw, vw);
        for (int j = 0; j < 8; ++j) {
            s.sum += fs[j];
            s.weighted += fw[j];
        }
#endif
        for (; i < stop; ++i) {
            float d = x[i] - m;
            if (divide) d = d / t;
            const float ev = exp_nonpositive(d);
            w[i] = d;
            e[i] = ev;
            s.sum += ev;
            s.weighted += d >= EXP_FLOOR ? static_cast<double>(ev * d) : 0.0;
        }
    }
}

// The normaliser of a softmax as torch's CPU kernel sums it: float32 lanes, entry i in lane i % lanes in order
// (entries outside ``ids`` are exp(-inf) = 0 there and change no lane), then the lanes pairwise, halves first.
// A float32 sum of a peaked row drops the smallest terms' low bits, up to ~1e-4 of the exact sum: summed the
// same way, the probabilities top-p adds up are torch's within an ulp or so, not off by that common factor.
constexpr int64_t MAX_LANES = 64;
float torch_sum(const float* e, const int32_t* ids, int64_t count, int64_t lanes) {
    float acc[MAX_LANES] = {};
    if (ids == nullptr) {
        int64_t i = 0;
        for (; i + lanes <= count; i += lanes) {
#pragma omp simd
            for (int64_t j = 0; j < lanes; ++j) acc[j] += e[i + j];
        }
        for (int64_t j = 0; i + j < count; ++j) acc[j] += e[i + j];
    } else {
        for (int64_t j = 0; j < count; ++j) acc[ids[j] % lanes] += e[ids[j]];
    }
    for (int64_t half = lanes / 2; half >= 1; half /= 2) {
        for (int64_t j = 0; j < half; ++j) acc[j] += acc[j + half];
    }
    return acc[0];
}

struct Pair {
    float v;
    int32_t i;
    float e = 0.0f;  // exp(v), where a selection follows the mass
};

// The ``want`` best of the entries ``ids`` (ascending; 0..count-1 when null) into ``out``, best first;
// returns how many. A few by insertion (blocks of 16 that cannot enter skipped with one comparison), more by
// nth_element and a sort of only those.
int64_t best(const float* w, const int32_t* ids, int64_t count, int64_t want, int32_t* out, std::vector<Pair>& pairs) {
    if (want > count) want = count;
    if (want <= 0) return 0;
    if (want > HEAP_MOST) {
        pairs.resize(count);
        for (int64_t j = 0; j < count; ++j) {
            const int32_t i = ids ? ids[j] : static_cast<int32_t>(j);
            pairs[j] = {w[i], i};
        }
        auto before = [](const Pair& a, const Pair& b) { return a.v > b.v || (a.v == b.v && a.i < b.i); };
        std::nth_element(pairs.begin(), pairs.begin() + (want - 1), pairs.end(), before);
        std::sort(pairs.begin(), pairs.begin() + want, before);
        for (int64_t j = 0; j < want; ++j) out[j] = pairs[j].i;
        return want;
    }
    if (ids == nullptr) {
        top_of_row(w, count, want, out);
        return want;
    }
    TopHeld top{w, out, want};
    for (int64_t j = 0; j < count; ++j) top.insert(ids[j]);
    return want;
}

// A value of w (whose largest is 0) above which the entries' Σ e reaches ``mass``, among 16 thresholds summed
// in one pass (each entry against all of them at once); -inf if none does.
float mass_floor(const float* w, const float* e, int64_t n, double mass) {
    constexpr int K = 16;
    constexpr float FLOORS[K] = {-0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f,
                                 -8.0f, -10.0f, -12.0f, -16.0f, -20.0f, -24.0f, -32.0f, -48.0f};
    double total[K] = {};
    for (int64_t start = 0; start < n; start += BLOCK) {
        const int64_t stop = start + BLOCK < n ? start + BLOCK : n;
        float block[K] = {};
        for (int64_t i = start; i < stop; ++i) {
            const float wi = w[i], ei = e[i];
#pragma omp simd
            for (int k = 0; k < K; ++k) block[k] += wi >= FLOORS[k] ? ei : 0.0f;
        }
        for (int k = 0; k < K; ++k) total[k] += block[k];
    }
    for (int k = 0; k < K; ++k) {
        if (total[k] >= mass) return FLOORS[k];
    }
    return -INFINITY;
}

// The ids i (ascending) with w[i] >= floor_w into ``out``, without a branch per entry.
void collect(const float* w, int64_t n, float floor_w, std::vector<int32_t>& out) {
    out.resize(n);
    int32_t* o = out.data();
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) {
        o[c] = static_cast<int32_t>(i);
        c += w[i] >= floor_w;
    }
    out.resize(c);
}

// Moves the entries of d[lo..hi) that pass ``keep`` to the front, without a branch (a data-dependent branch
// mispredicts on half the entries); returns where the others begin, with the kept ones' Σ e in ``mass``.
template <class Keep>
int64_t split(Pair* d, int64_t lo, int64_t hi, Keep keep, double& mass) {
    int64_t k = lo;
    double m = 0.0;
    for (int64_t j = lo; j < hi; ++j) {
        const Pair q = d[j];
        const bool c = keep(q);
        d[j] = d[k];
        d[k] = q;
        k += c;
        m += c ? static_cast<double>(q.e) : 0.0;
    }
    mass = m;
    return k;
}

// The most likely entries of ``ids`` (0..count-1 when null) whose Σ e reaches ``mass``, and the next one, in
// order (larger value, then lower id) into ``order``; returns how many. A quickselect that follows the mass instead of a count: each
// partition puts the entries above a pivot first and keeps the side where the mass is reached, so only the
// entries taken are sorted.
int64_t by_mass(const float* w, const float* e, const int32_t* ids, int64_t count, double mass,
                std::vector<int32_t>& order, std::vector<Pair>& pairs) {
    pairs.resize(count);
    for (int64_t j = 0; j < count; ++j) {
        const int32_t i = ids ? ids[j] : static_cast<int32_t>(j);
        pairs[j] = {w[i], i, e[i]};
    }
    auto before = [](const Pair& a, const Pair& b) { return a.v > b.v || (a.v == b.v && a.i < b.i); };
    Pair* data = pairs.data();
    int64_t lo = 0, hi = count, end = count;
    double need = mass;
    while (hi - lo > 64) {
        float a = data[lo].v, b = data[lo + (hi - lo) / 2].v, c = data[hi - 1].v;
        const float pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));  // the median of three
        double m_above = 0.0, m_equal = 0.0;
        Pair* above = data + split(data, lo, hi, [pivot](const Pair& q) { return q.v > pivot; }, m_above);
        if (m_above >= need) {
            hi = above - data;
            continue;
        }
        need -= m_above;
        Pair* equal = data + split(data, above - data, hi, [pivot](const Pair& q) { return q.v == pivot; }, m_equal);
        if (m_equal >= need) {  // the pivot's ties reach it: the ones with lower ids first
            std::sort(above, equal, before);
            end = equal - data;
            for (Pair* q = above; q != equal; ++q) {
                need -= q->e;
                if (need <= 0.0) {
                    end = q - data + 1;
                    break;
                }
            }
            need = 0.0;
            break;
        }
        need -= m_equal;
        lo = equal - data;
    }
    if (need > 0.0) {  // the last few, in order, until the mass is reached
        std::sort(data + lo, data + hi, before);
        end = hi;
        for (int64_t j = lo; j < hi; ++j) {
            need -= data[j].e;
            if (need <= 0.0) {
                end = j + 1;
                break;
            }
        }
    }
    if (end < count) {  // and the next most likely: the first one top-p drops is then among those taken
        Pair* next = std::min_element(data + end, data + count, before);
        std::swap(*next, data[end]);
        ++end;
    }
    std::sort(data, data + end, before);
    order.resize(end);
    for (int64_t j = 0; j < end; ++j) order[j] = data[j].i;
    return end;
}

// How near p (relative) the mass before the top-p cut may come before the cut is left to the reference sampler.
constexpr float P_MARGIN = 1e-6f;

// Top-p over the top-k stage's probabilities (et[i] * inv_k; ``ids``/``count`` the ids top-k kept, or every
// id when ``ids`` is null), most likely first: an entry is dropped once the mass of those before it (float32
// cumulative sum accumulated in double, as torch.cumsum) reaches p. Only the first 64, then the entries whose
// mass passes p, then all, are ordered until one is dropped. ``order`` begins with the kept ids, most likely
// first; returns how many, or -1 when the cut lies within float32 rounding of p (the reference sampler's row).
int64_t top_p_keep(const float* wt, const float* et, int64_t n, const int32_t* ids, int64_t count, float inv_k,
                   float p32, std::vector<int32_t>& order, std::vector<int32_t>& kept_p, std::vector<Pair>& pairs) {
    for (int pass = 0;; ++pass) {
        int64_t size = count;
        if (pass == 0) {  // the top 64 usually reach p already
            size = 64 < count ? 64 : count;
            order.resize(size);
            best(wt, ids, count, size, order.data(), pairs);
        } else if (pass == 1) {  // the most likely entries whose mass passes p, and a little more
            const double mass = static_cast<double>(p32) * (1.0 + 1e-4) / inv_k;
            const int32_t* among = ids;
            int64_t among_count = count;
            if (ids == nullptr) {  // first only the entries above a floor that holds the mass
                const float floor_w = mass_floor(wt, et, n, mass * (1.0 + 1e-3));
                collect(wt, n, floor_w, kept_p);
                among = kept_p.data();
                among_count = static_cast<int64_t>(kept_p.size());
            }
            size = by_mass(wt, et, among, among_count, mass, order, pairs);
        } else {
            order.resize(size);
            best(wt, ids, count, size, order.data(), pairs);
        }
        double c = 0.0;
        float last_before = 0.0f;  // the mass before the last entry looked at
        for (int64_t j = 0; j < size; ++j) {
            const float p = et[order[j]] * inv_k;
            c += p;
            const float before = static_cast<float>(c) - p;
            if (before >= p32) {
                // The probabilities are torch's within its exp's rounding (the sums are summed as torch sums
                // them), ~1e-7 of the mass: a cut this close to p may fall one entry apart there, so the row is
                // the reference sampler's.
                if (before - p32 <= P_MARGIN * p32 || p32 - last_before <= P_MARGIN * p32) return -1;
                return j;
            }
            last_before = before;
        }
        if (size == count) return p32 - last_before <= P_MARGIN * p32 ? -1 : size;
    }
}

}  // namespace

// One sampled step of the teaching sampler (playground/engine/sampling.py, Generation._choose) on one float32
// row of logits, in a few vectorised passes: the raw softmax, temperature ((x - max) / T), top-k (ties at the
// k-th value kept), top-p (the smallest most likely set whose mass reaches p), the final distribution, the token
// by the inverse CDF (receipts.py), its rank, the top ids, the entropies, the slices and the stage rows.
//
// Two calls per row, on one thread: ``pg_sample_prepare`` does everything the uniform draw does not decide and
// says whether the row can be taken here; only then does the caller draw u from its generator and call
// ``pg_sample_draw``. The row's working arrays live in thread-local storage between the two calls.
//
// Every stage shares exp(w) with w = the temperature stage's logits minus their maximum (0 after the
// temperature stage): a filter only changes which entries a stage's sum runs over, as in torch's softmax of
// a row with -inf entries. Built and loaded by playground/runtime/native_sampler.py.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace {

// Below this, exp(d) rounds to 0 in float32. Between it and -87 exp(d) is a subnormal float32: torch's softmax
// keeps those (a probability above zero counts as a kept token), so the exp here does too.
constexpr float EXP_FLOOR = -104.0f;
constexpr int64_t BLOCK = 256;  // entries per block of the sums and of the cumulative distribution
constexpr int64_t HEAP_MOST = 256;  // up to this many best entries are held by insertion, more by nth_element
// How near p (relative) the mass before the top-p cut may come before the cut is left to the reference sampler.
constexpr float P_MARGIN = 4e-6f;

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

// Whether entry a ranks before entry b: the larger value, then the lower id (the stable order).
struct Before {
    const float* w;
    bool operator()(int32_t a, int32_t b) const { return w[a] > w[b] || (w[a] == w[b] && a < b); }
};

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
    int64_t held = 0;
    float floor_value = -INFINITY;  // the held want-th value once all are held
    constexpr int64_t SKIP = 16;
    for (int64_t start = 0; start < count; start += SKIP) {
        const int64_t stop = start + SKIP < count ? start + SKIP : count;
        if (held == want && ids == nullptr && stop - start == SKIP) {
#if defined(__AVX2__) && defined(__FMA__)
            const __m256 most = _mm256_max_ps(_mm256_loadu_ps(w + start), _mm256_loadu_ps(w + start + 8));
            if (!_mm256_movemask_ps(_mm256_cmp_ps(most, _mm256_set1_ps(floor_value), _CMP_GT_OQ))) continue;
#else
            float block_max = -INFINITY;
            for (int64_t j = start; j < stop; ++j) block_max = w[j] > block_max ? w[j] : block_max;
            if (!(block_max > floor_value)) continue;
#endif
        }
        for (int64_t j = start; j < stop; ++j) {
            const int32_t i = ids ? ids[j] : static_cast<int32_t>(j);
            const float v = w[i];
            if (held == want && !(v > floor_value)) continue;  // an equal value later ranks after those held
            int64_t at = held < want ? held : want - 1;
            while (at > 0 && w[out[at - 1]] < v) {
                out[at] = out[at - 1];
                --at;
            }
            out[at] = i;
            if (held < want) ++held;
            if (held == want) floor_value = w[out[want - 1]];
        }
    }
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

// What one row's prepare leaves for its draw (this thread's last row).
struct Row {
    std::vector<float> wr, er, wt_own, et_own, values;
    std::vector<int32_t> kept_k, kept_p, final_ids, order;
    std::vector<Pair> pairs;
    std::vector<double> final_cdf, block_start;  // cumulative sums: per final id, or at each block's start
    const float* wt = nullptr;  // the temperature stage's logits minus their maximum, and their exp
    const float* et = nullptr;
    int64_t n = 0, want = 0, top_held = 0;
    bool k_on = false, p_on = false, all_final = false, top_ready = false;
    float kth = 0.0f, inv_raw = 0.0f, inv_t = 0.0f, inv_k = 0.0f, inv_f = 0.0f;
    double total = 0.0;

    float final_prob(int32_t i) const { return et[i] * inv_f; }
    bool in_final(int32_t i) const {
        if (all_final) return true;
        if (p_on) return std::binary_search(final_ids.begin(), final_ids.end(), i);
        return wt[i] >= kth;
    }
    // The cumulative final probability through id i, as the draw walks it.
    double cdf_at(int64_t i) const {
        if (!all_final) {
            const auto after = std::upper_bound(final_ids.begin(), final_ids.end(), static_cast<int32_t>(i));
            return after == final_ids.begin() ? 0.0 : final_cdf[after - final_ids.begin() - 1];
        }
        const int64_t b = i / BLOCK;
        double c = block_start[b];
        for (int64_t j = b * BLOCK; j <= i; ++j) c += static_cast<double>(final_prob(static_cast<int32_t>(j)));
        return c;
    }
};

thread_local Row ROW;

// Output layout (N1 = n_top + 1): ints [top | raw top | candidates | shown | positive ids], each N1 long;
// floats [top probs | 4 stage rows | positive probs]; doubles [16 scalars | lo | hi | positive cdf].
enum Out { ENTROPY, RAW_ENTROPY, KEPT, TOP_HELD, N_POSITIVE, TOKEN, PROB, RAW_PROB, RANK, N_CAND, N_SHOWN, TOTAL };
constexpr int SCALARS = 16;

}  // namespace

extern "C" {

// Everything of the step but the draw. Returns 0 if an entry is NaN or ±inf or float32(T) is 0 (the caller
// takes its own path, which says what is wrong), 2 if the top ids of the final or the raw distribution have
// equal probabilities (torch.topk orders ties its own way) or the top-p cut lies within float32 rounding of p
// (the caller's sampler takes the row), 3 if fewer
// than n_top final probabilities are above zero (the caller chooses the zero entries the top shows, as
// torch.topk would, from the positive ids, probabilities and cumulative sums written here), else 1.
int pg_sample_prepare(const float* x, int64_t n, double temperature, int64_t top_k, double top_p, int64_t n_top,
                      int32_t* ints, float* floats, double* doubles) {
    if (n <= 0 || n_top < 0 || n > INT32_MAX) return 0;
    int bad = 0;
    float m = -INFINITY;
#pragma omp simd reduction(| : bad) reduction(max : m)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        bad |= !((v - v) == 0.0f);
        m = v > m ? v : m;
    }
    const float t = static_cast<float>(temperature);
    if (bad || !(t > 0.0f) || !std::isfinite(t)) return 0;
    Row& r = ROW;
    const int64_t n1 = n_top + 1;
    r.n = n;
    r.want = n_top < n ? n_top : n;
    r.top_ready = false;
    r.wr.resize(n);
    r.er.resize(n);
    Sums raw;
    exp_pass(x, n, m, 1.0f, false, r.wr.data(), r.er.data(), raw);
    r.inv_raw = static_cast<float>(1.0 / raw.sum);
    doubles[RAW_ENTROPY] = entropy_bits(raw);
    Sums temp = raw;
    if (temperature == 1.0) {  // x / 1 is x: the stage is the raw softmax itself
        r.wt = r.wr.data();
        r.et = r.er.data();
    } else {
        r.wt_own.resize(n);
        r.et_own.resize(n);
        temp = Sums();
        exp_pass(x, n, m, t, true, r.wt_own.data(), r.et_own.data(), temp);
        r.wt = r.wt_own.data();
        r.et = r.et_own.data();
    }
    const float* wt = r.wt;
    const float* et = r.et;
    r.inv_t = static_cast<float>(1.0 / temp.sum);

    // Top-k: the k-th largest value, every entry at least as large kept (ids ascending).
    r.k_on = top_k > 0 && top_k < n;
    Sums kept_sums = temp;
    r.inv_k = r.inv_t;
    if (r.k_on) {
        if (top_k <= HEAP_MOST) {
            r.order.resize(top_k);
            best(wt, nullptr, n, top_k, r.order.data(), r.pairs);
            r.kth = wt[r.order[top_k - 1]];
        } else {
            r.values.assign(wt, wt + n);
            std::nth_element(r.values.begin(), r.values.begin() + (top_k - 1), r.values.end(), std::greater<float>());
            r.kth = r.values[top_k - 1];
        }
        collect(wt, n, r.kth, r.kept_k);
        kept_sums = Sums();
        for (int32_t i : r.kept_k) kept_sums.sum += et[i];
        r.inv_k = static_cast<float>(1.0 / kept_sums.sum);
    }

    // Top-p over the top-k stage's probabilities, most likely first: an entry is dropped once the mass of those
    // before it (float32 cumulative sum accumulated in double, as torch.cumsum) reaches p. Only the first
    // 64, 512, 4096, ... are ordered until one is dropped.
    r.p_on = top_p < 1.0;
    r.all_final = !r.k_on && !r.p_on;
    r.inv_f = r.inv_k;
    if (r.p_on) {
        const float p32 = static_cast<float>(top_p);
        const int32_t* ids = r.k_on ? r.kept_k.data() : nullptr;
        const int64_t count = r.k_on ? static_cast<int64_t>(r.kept_k.size()) : n;
        int64_t keep = count;
        for (int pass = 0;; ++pass) {
            int64_t size = count;
            if (pass == 0) {  // the top 64 usually reach p already
                size = 64 < count ? 64 : count;
                r.order.resize(size);
                best(wt, ids, count, size, r.order.data(), r.pairs);
            } else if (pass == 1) {  // the most likely entries whose mass passes p, and a little more
                const double mass = static_cast<double>(p32) * (1.0 + 1e-4) / r.inv_k;
                const int32_t* among = ids;
                int64_t among_count = count;
                if (ids == nullptr) {  // first only the entries above a floor that holds the mass
                    const float floor_w = mass_floor(wt, et, n, mass * (1.0 + 1e-3));
                    collect(wt, n, floor_w, r.kept_p);
                    among = r.kept_p.data();
                    among_count = static_cast<int64_t>(r.kept_p.size());
                }
                size = by_mass(wt, et, among, among_count, mass, r.order, r.pairs);
            } else {
                r.order.resize(size);
                best(wt, ids, count, size, r.order.data(), r.pairs);
            }
            double c = 0.0;
            int64_t dropped = -1;
            float last_before = 0.0f;  // the mass before the last entry looked at
            for (int64_t j = 0; j < size; ++j) {
                const float p = et[r.order[j]] * r.inv_k;
                c += p;
                const float before = static_cast<float>(c) - p;
                if (before >= p32) {
                    dropped = j;
                    // torch's float32 softmax is off the exact one by a common factor up to ~1e-6: a cut this
                    // close to p may fall one entry apart there, so the row is the reference sampler's.
                    if (before - p32 <= P_MARGIN * p32 || p32 - last_before <= P_MARGIN * p32) return 2;
                    break;
                }
                last_before = before;
            }
            if (dropped >= 0 || size == count) {
                if (dropped < 0 && p32 - last_before <= P_MARGIN * p32) return 2;
                keep = dropped >= 0 ? dropped : size;
                break;
            }
        }
        r.final_ids.assign(r.order.begin(), r.order.begin() + keep);
        std::sort(r.final_ids.begin(), r.final_ids.end());
    } else if (r.k_on) {
        r.final_ids = r.kept_k;
    }

    // The final distribution: its normaliser, entropy, count above zero and cumulative sums.
    Sums fin = temp;
    int64_t kept = 0;
    if (r.all_final) {
        const float inv = r.inv_f;
#pragma omp simd reduction(+ : kept)
        for (int64_t i = 0; i < n; ++i) kept += et[i] * inv > 0.0f;
        const int64_t blocks = (n + BLOCK - 1) / BLOCK;
        r.block_start.resize(blocks + 1);
        double c = 0.0;
        for (int64_t b = 0; b < blocks; ++b) {
            r.block_start[b] = c;
            const int64_t stop = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
            double s = 0.0;
#pragma omp simd reduction(+ : s)
            for (int64_t i = b * BLOCK; i < stop; ++i) s += static_cast<double>(et[i] * inv);
            c += s;
        }
        r.block_start[blocks] = c;
        r.total = c;
    } else {
        if (r.p_on) {
            fin = Sums();
            for (int32_t i : r.final_ids) fin.sum += et[i];
            r.inv_f = static_cast<float>(1.0 / fin.sum);
        } else {
            fin = kept_sums;
        }
        fin.weighted = 0.0;
        r.final_cdf.resize(r.final_ids.size());
        double c = 0.0;
        for (size_t j = 0; j < r.final_ids.size(); ++j) {
            const int32_t i = r.final_ids[j];
            const float p = et[i] * r.inv_f;
            kept += p > 0.0f;
            fin.weighted += wt[i] >= EXP_FLOOR ? static_cast<double>(et[i] * wt[i]) : 0.0;
            c += p;
            r.final_cdf[j] = c;
        }
        r.total = c;
    }
    doubles[ENTROPY] = r.all_final ? entropy_bits(temp) : entropy_bits(fin);
    doubles[KEPT] = static_cast<double>(kept);
    doubles[TOTAL] = r.total;

    // The raw top n (+1, to see a tie at the n-th place), by larger logit then lower id, as probabilities.
    int32_t* raw_top = ints + n1;
    std::vector<int32_t>& look = r.order;
    const int64_t raw_held = best(x, nullptr, n, r.want + 1, (look.resize(r.want + 1), look.data()), r.pairs);
    for (int64_t j = 0; j < r.want; ++j) raw_top[j] = look[j];
    for (int64_t j = 0; j + 1 < raw_held; ++j) {
        if (!(r.er[look[j]] * r.inv_raw > r.er[look[j + 1]] * r.inv_raw)) return 2;
    }

    // The final top n: fewer positive entries than n leave the choice among zeros to the caller.
    doubles[N_POSITIVE] = 0;
    if (kept < r.want) {
        int32_t* pos = ints + 4 * n1;
        float* pos_probs = floats + 5 * n1;
        double* pos_cdf = doubles + SCALARS + 2 * n1;
        int64_t held = 0;
        double c = 0.0;
        const int64_t count = r.all_final ? n : static_cast<int64_t>(r.final_ids.size());
        for (int64_t j = 0; j < count && held < kept; ++j) {
            const int32_t i = r.all_final ? static_cast<int32_t>(j) : r.final_ids[j];
            const float p = r.final_prob(i);
            if (p > 0.0f) {
                c += p;
                pos[held] = i;
                pos_probs[held] = p;
                pos_cdf[held++] = c;
            }
        }
        doubles[N_POSITIVE] = static_cast<double>(held);
        return 3;
    }
    const int32_t* fids = r.all_final ? nullptr : r.final_ids.data();
    const int64_t fcount = r.all_final ? n : static_cast<int64_t>(r.final_ids.size());
    const int64_t top_held = best(wt, fids, fcount, r.want + 1, (look.resize(r.want + 1), look.data()), r.pairs);
    for (int64_t j = 0; j + 1 < top_held; ++j) {
        if (!(r.final_prob(look[j]) > r.final_prob(look[j + 1]))) return 2;
    }
    for (int64_t j = 0; j < r.want; ++j) {
        ints[j] = look[j];
        floats[j] = r.final_prob(look[j]);
    }
    doubles[TOP_HELD] = static_cast<double>(r.want);
    r.top_ready = true;
    return 1;
}

// The draw for the row this thread last prepared: u in [0, 1) picks the first id whose cumulative final
// probability exceeds u · total; then the token's probabilities, rank, candidates, stage rows and (when
// prepare returned 1) the slices of the top ids and the token. Returns the token id.
int64_t pg_sample_draw(double u, int64_t n_top, int32_t* ints, float* floats, double* doubles) {
    const Row& r = ROW;
    const int64_t n1 = n_top + 1;
    const double target = u * r.total;
    int64_t token = -1;
    if (r.all_final) {
        const int64_t blocks = static_cast<int64_t>(r.block_start.size()) - 1;
        int64_t b = 0;
        while (b + 1 < blocks && !(r.block_start[b + 1] > target)) ++b;
        double c = r.block_start[b];
        for (int64_t i = b * BLOCK; i < r.n; ++i) {
            c += static_cast<double>(r.final_prob(static_cast<int32_t>(i)));
            if (c > target) {
                token = i;
                break;
            }
        }
        if (token < 0) {  // u · total rounded up to the total: the last slice with any width
            for (int64_t i = r.n - 1; i >= 0 && token < 0; --i) token = r.final_prob(static_cast<int32_t>(i)) > 0 ? i : -1;
        }
    } else {
        const auto at = std::upper_bound(r.final_cdf.begin(), r.final_cdf.end(), target);
        if (at != r.final_cdf.end()) {
            token = r.final_ids[at - r.final_cdf.begin()];
        } else {
            for (int64_t j = static_cast<int64_t>(r.final_ids.size()) - 1; j >= 0 && token < 0; --j) {
                token = r.final_prob(r.final_ids[j]) > 0 ? r.final_ids[j] : -1;
            }
        }
    }
    const int32_t tok = static_cast<int32_t>(token);
    const float raw_prob = r.er[tok] * r.inv_raw;
    int64_t above = 0;
    const float* er = r.er.data();
    const float inv_raw = r.inv_raw;
#pragma omp simd reduction(+ : above)
    for (int64_t i = 0; i < r.n; ++i) above += er[i] * inv_raw > raw_prob;
    doubles[TOKEN] = static_cast<double>(tok);
    doubles[PROB] = r.final_prob(tok);
    doubles[RAW_PROB] = raw_prob;
    doubles[RANK] = static_cast<double>(above + 1);

    // Candidates: the raw top n, then the token if it is not among them; each one's probability per stage.
    const int32_t* raw_top = ints + n1;
    int32_t* cand = ints + 2 * n1;
    int64_t n_cand = 0;
    bool in_top = false;
    for (int64_t j = 0; j < r.want; ++j) {
        cand[n_cand++] = raw_top[j];
        in_top |= raw_top[j] == tok;
    }
    if (!in_top) cand[n_cand++] = tok;
    float* stages = floats + n1;
    for (int64_t j = 0; j < n_cand; ++j) {
        const int32_t i = cand[j];
        stages[j] = r.er[i] * r.inv_raw;
        stages[n1 + j] = r.et[i] * r.inv_t;
        stages[2 * n1 + j] = r.k_on && r.wt[i] < r.kth ? 0.0f : r.et[i] * r.inv_k;
        stages[3 * n1 + j] = r.in_final(i) ? r.final_prob(i) : 0.0f;
    }
    doubles[N_CAND] = static_cast<double>(n_cand);

    // The slices of the shown ids (the top, then the token if it is not there), normalised by the total.
    int64_t n_shown = 0;
    if (r.top_ready) {
        int32_t* shown = ints + 3 * n1;
        double* lo = doubles + SCALARS;
        double* hi = lo + n1;
        bool token_shown = false;
        for (int64_t j = 0; j < r.want; ++j) {
            shown[n_shown++] = ints[j];
            token_shown |= ints[j] == tok;
        }
        if (!token_shown) shown[n_shown++] = tok;
        for (int64_t j = 0; j < n_shown; ++j) {
            const int64_t i = shown[j];
            lo[j] = i > 0 ? r.cdf_at(i - 1) / r.total : 0.0;
            hi[j] = r.cdf_at(i) / r.total;
        }
    }
    doubles[N_SHOWN] = static_cast<double>(n_shown);
    return token;
}

}  // extern "C"

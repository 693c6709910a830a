// The first passes of sample_row.cpp's prepare fused, where the CPU has AVX2 (eight entries at a time) or AVX-512
// (sixteen): one pass over the logits for their maximum and their best ids (the raw top and top-k's k-th value),
// then one pass for both stages' exp, their sums (as exp_pass sums each), their softmax normalisers (as torch_sum
// sums each) and top-k's kept ids. Every value is computed with the same float32 operations in the same order as
// the separate passes compute it (exp16 is exp8 on twice the lanes; the sums add the same terms into the same
// lanes), so a row's numbers are those of the separate passes, bit for bit; only the passes over the 50,257
// entries are fewer (five to two). Built with PG_SAMPLE_SEPARATE, the separate passes run everywhere (the tests
// compare the builds). Included by sample_row.cpp after sample_parts.cpp.

#include <cstring>

namespace {

#if defined(__AVX2__) && defined(__FMA__) && !defined(PG_SAMPLE_SEPARATE)
constexpr bool FUSED = true;

// The ids i + j of the set bits j of ``mask``, ascending, into kept[held...].
inline void keep_ids(int64_t i, unsigned mask, int32_t* kept, int64_t& held) {
    while (mask) {
        kept[held++] = static_cast<int32_t>(i + __builtin_ctz(mask));
        mask &= mask - 1;
    }
}

#if defined(__AVX512F__)
using Wide = __m512;  // what stages_vectors takes: sixteen entries
inline Wide wide(float v) { return _mm512_set1_ps(v); }

inline __m256 upper8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// exp8's arithmetic on sixteen entries (each lane the same operations, so each value is exp8's, bit for bit).
inline __m512 exp16(__m512 d) {
    const __m512 floor_v = _mm512_set1_ps(EXP_FLOOR);
    const __mmask16 normal = _mm512_cmp_ps_mask(d, floor_v, _CMP_GE_OQ);  // false for -inf too
    const __m512 xc = _mm512_max_ps(d, floor_v);
    const __m512 n = _mm512_roundscale_ps(
        _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc));
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 5040.0f), r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512 half = _mm512_roundscale_ps(_mm512_mul_ps(n, _mm512_set1_ps(0.5f)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512i low = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(half), bias), 23);
    const __m512i high = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_sub_ps(n, half)), bias), 23);
    p = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(high)), _mm512_castsi512_ps(low));
    return _mm512_maskz_mov_ps(normal, p);
}

// scan's entries [0, n) sixteen at a time: whether one is NaN or ±inf, their maximum, each into ``top`` where it
// may enter; returns where it stopped.
inline int64_t scan_vectors(const float* x, int64_t n, TopHeld& top, bool& bad, float& max_v) {
    __mmask16 bad_v = 0;
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int64_t start = 0;
    for (; start + 16 <= n; start += 16) {
        const __m512 v = _mm512_loadu_ps(x + start);
        bad_v |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_setzero_ps(), _CMP_NEQ_UQ);
        vmax = _mm512_max_ps(v, vmax);
        if (top.want > 0 && (top.open() || _mm512_cmp_ps_mask(v, _mm512_set1_ps(top.floor_value), _CMP_GT_OQ))) {
            for (int64_t j = start; j < start + 16; ++j) top.insert(j);
        }
    }
    bad = bad_v != 0;
    max_v = _mm512_reduce_max_ps(vmax);
    return start;
}

// The lanes of torch's softmax sum (torch_sum) for entries in order, kept in registers: lane i % lanes of
// entry i, for lanes 8 or 16.
struct LaneSum {
    __m512 l16 = _mm512_setzero_ps();  // lanes 16: entry i in lane i % 16
    __m256 l8 = _mm256_setzero_ps();   // lanes 8
    int64_t lanes;
    explicit LaneSum(int64_t l) : lanes(l) {}
    void add8(int64_t i, __m256 e) {  // entries i..i+7, i a multiple of 8
        if (lanes == 16) {
            const bool upper = (i & 8) != 0;
            const __m512 wide = _mm512_castps256_ps512(e);  // its upper half unused (masked)
            l16 = upper ? _mm512_mask_add_ps(l16, 0xFF00, l16, _mm512_shuffle_f32x4(wide, wide, _MM_SHUFFLE(1, 0, 1, 0)))
                        : _mm512_mask_add_ps(l16, 0x00FF, l16, wide);
        } else {
            l8 = _mm256_add_ps(l8, e);
        }
    }
    float* spill(float* a) const {
        _mm512_store_ps(a, l16);
        if (lanes == 8) _mm256_store_ps(a, l8);
        return a;
    }
    void load(const float* a) {
        l16 = _mm512_load_ps(a);
        l8 = _mm256_load_ps(a);
    }
    void add_scalar(int64_t i, float e) {
        alignas(64) float a[16];
        spill(a)[i % lanes] += e;
        load(a);
    }
    float total() const {  // the lanes pairwise, halves first, as torch_sum adds them
        alignas(64) float a[16];
        spill(a);
        for (int64_t half = lanes / 2; half >= 1; half /= 2) {
            for (int64_t j = 0; j < half; ++j) a[j] += a[j + half];
        }
        return a[0];
    }
};

#else
using Wide = __m256;  // what stages_vectors takes: eight entries (sixteen a pass)
inline Wide wide(float v) { return _mm256_set1_ps(v); }

// scan's entries [0, n) eight at a time (as the AVX-512 scan_vectors).
inline int64_t scan_vectors(const float* x, int64_t n, TopHeld& top, bool& bad, float& max_v) {
    __m256 bad_v = _mm256_setzero_ps();
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int64_t start = 0;
    for (; start + 8 <= n; start += 8) {
        const __m256 v = _mm256_loadu_ps(x + start);
        bad_v = _mm256_or_ps(bad_v, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(), _CMP_NEQ_UQ));
        vmax = _mm256_max_ps(v, vmax);
        if (top.want > 0 &&
            (top.open() || _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(top.floor_value), _CMP_GT_OQ)))) {
            for (int64_t j = start; j < start + 8; ++j) top.insert(j);
        }
    }
    bad = _mm256_movemask_ps(bad_v) != 0;
    alignas(32) float lanes_max[8];
    _mm256_store_ps(lanes_max, vmax);
    max_v = lanes_max[0];
    for (int j = 1; j < 8; ++j) max_v = lanes_max[j] > max_v ? lanes_max[j] : max_v;
    return start;
}

// The lanes of torch's softmax sum (torch_sum) for entries in order, kept in registers: lane i % lanes of entry
// i, for lanes 8 (``lo``) or 16 (entries i % 16 < 8 in ``lo``, the others in ``hi``).
struct LaneSum {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int64_t lanes;
    explicit LaneSum(int64_t l) : lanes(l) {}
    void add8(int64_t i, __m256 e) {  // entries i..i+7, i a multiple of 8
        if (lanes == 16 && (i & 8) != 0) {
            hi = _mm256_add_ps(hi, e);
        } else {
            lo = _mm256_add_ps(lo, e);
        }
    }
    float* spill(float* a) const {
        _mm256_store_ps(a, lo);
        _mm256_store_ps(a + 8, hi);
        return a;
    }
    void add_scalar(int64_t i, float e) {
        alignas(32) float a[16];
        spill(a)[i % lanes] += e;
        lo = _mm256_load_ps(a);
        hi = _mm256_load_ps(a + 8);
    }
    float total() const {  // the lanes pairwise, halves first, as torch_sum adds them
        alignas(32) float a[16];
        spill(a);
        for (int64_t half = lanes / 2; half >= 1; half /= 2) {
            for (int64_t j = 0; j < half; ++j) a[j] += a[j + half];
        }
        return a[0];
    }
};

#endif

// One stage's running sums: exp_pass's eight float lanes per block (then added in double) and torch_sum's lanes.
struct StageSums {
    __m256 vs = _mm256_setzero_ps(), vw = _mm256_setzero_ps();
    LaneSum lane;
    explicit StageSums(int64_t lanes) : lane(lanes) {}
    void add8(int64_t i, __m256 d, __m256 e) {
        vs = _mm256_add_ps(vs, e);
        vw = _mm256_add_ps(vw, _mm256_and_ps(_mm256_mul_ps(e, d), _mm256_cmp_ps(d, _mm256_set1_ps(EXP_FLOOR), _CMP_GE_OQ)));
        lane.add8(i, e);
    }
    void end_vectors(Sums& s) {  // a block's vector part done: its lanes into the double sums, as exp_pass does
        alignas(32) float fs[8], fw[8];
        _mm256_store_ps(fs, vs);
        _mm256_store_ps(fw, vw);
        for (int j = 0; j < 8; ++j) {
            s.sum += fs[j];
            s.weighted += fw[j];
        }
        vs = vw = _mm256_setzero_ps();
    }
    void add_scalar(int64_t i, float d, float e, Sums& s) {
        s.sum += e;
        s.weighted += d >= EXP_FLOOR ? static_cast<double>(e * d) : 0.0;
        lane.add_scalar(i, e);
    }
};

#if defined(__AVX512F__)
// One stage's vector accumulators as locals, for sixteen entries at a time (StageSums takes the eights and the
// single entries): a StageSums whose address a call can reach stays in memory, and every addition then waits on
// the store before it.
struct StageRegs {
    __m256 vs, vw, l8;
    __m512 l16;
    explicit StageRegs(const StageSums& s) : vs(s.vs), vw(s.vw), l8(s.lane.l8), l16(s.lane.l16) {}
    void back(StageSums& s) const {
        s.vs = vs;
        s.vw = vw;
        s.lane.l8 = l8;
        s.lane.l16 = l16;
    }
    template <bool L16>
    inline void add16(__m512 d, __m512 e) {  // entries i..i+15 as exp_pass adds them: the lower eight, then the upper
        const __m512 de = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(d, _mm512_set1_ps(EXP_FLOOR), _CMP_GE_OQ), e, d);
        const __m256 e_lo = _mm512_castps512_ps256(e), e_hi = upper8(e);
        vs = _mm256_add_ps(_mm256_add_ps(vs, e_lo), e_hi);
        vw = _mm256_add_ps(_mm256_add_ps(vw, _mm512_castps512_ps256(de)), upper8(de));
        if constexpr (L16) {
            l16 = _mm512_add_ps(l16, e);
        } else {
            l8 = _mm256_add_ps(l8, e_lo);
            l8 = _mm256_add_ps(l8, e_hi);
        }
    }
};

// stages_pass's entries [i, stop) sixteen at a time, for a block; returns where it stopped. The kept ids go
// to ``kept`` from ``n_kept`` on (room for every entry), so no call sits in the loop.
template <bool TWO, bool K_ON, bool L16>
inline int64_t stages_vectors(const float* x, int64_t i, int64_t stop, __m512 vm, __m512 vt, __m512 vk, float* wr,
                              float* er, float* wt, float* et, StageSums& rs, StageSums& ts, int32_t* kept,
                              int64_t& n_kept) {
    StageRegs r(rs), q(ts);
    int64_t held = n_kept;
    for (; i + 16 <= stop; i += 16) {
        const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
        const __m512 e = exp16(d);
        if constexpr (!TWO) _mm512_storeu_ps(wr + i, d);
        _mm512_storeu_ps(er + i, e);
        r.add16<L16>(d, e);
        __m512 dt = d;
        if constexpr (TWO) {
            dt = _mm512_div_ps(d, vt);
            const __m512 f = exp16(dt);
            _mm512_storeu_ps(wt + i, dt);
            _mm512_storeu_ps(et + i, f);
            q.add16<L16>(dt, f);
        }
        if constexpr (K_ON) keep_ids(i, _mm512_cmp_ps_mask(dt, vk, _CMP_GE_OQ), kept, held);
    }
    r.back(rs);
    if constexpr (TWO) q.back(ts);
    n_kept = held;
    return i;
}

#else
// One stage's vector accumulators as locals (a StageSums whose address a call can reach stays in memory, and
// every addition then waits on the store before it).
struct StageRegs {
    __m256 vs, vw, lo, hi;
    explicit StageRegs(const StageSums& s) : vs(s.vs), vw(s.vw), lo(s.lane.lo), hi(s.lane.hi) {}
    void back(StageSums& s) const {
        s.vs = vs;
        s.vw = vw;
        s.lane.lo = lo;
        s.lane.hi = hi;
    }
    template <bool HI>
    inline void add8(__m256 d, __m256 e) {  // eight entries as exp_pass adds them; into ``hi`` where HI
        vs = _mm256_add_ps(vs, e);
        vw = _mm256_add_ps(vw, _mm256_and_ps(_mm256_mul_ps(e, d), _mm256_cmp_ps(d, _mm256_set1_ps(EXP_FLOOR), _CMP_GE_OQ)));
        if constexpr (HI) {
            hi = _mm256_add_ps(hi, e);
        } else {
            lo = _mm256_add_ps(lo, e);
        }
    }
};

// Eight entries from i of both stages (see stages_pass), their sums into ``r`` and ``q``.
template <bool TWO, bool K_ON, bool HI>
inline void stages_eight(const float* x, int64_t i, __m256 vm, __m256 vt, __m256 vk, float* wr, float* er, float* wt,
                         float* et, StageRegs& r, StageRegs& q, int32_t* kept, int64_t& held) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
    const __m256 e = exp8(d);
    if constexpr (!TWO) _mm256_storeu_ps(wr + i, d);
    _mm256_storeu_ps(er + i, e);
    r.add8<HI>(d, e);
    __m256 dt = d;
    if constexpr (TWO) {
        dt = _mm256_div_ps(d, vt);
        const __m256 f = exp8(dt);
        _mm256_storeu_ps(wt + i, dt);
        _mm256_storeu_ps(et + i, f);
        q.add8<HI>(dt, f);
    }
    if constexpr (K_ON) {
        keep_ids(i, static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(dt, vk, _CMP_GE_OQ))), kept, held);
    }
}

// stages_pass's entries [i, stop) of a block (which starts at a multiple of 16) sixteen at a time, the lower eight
// into torch_sum's lower lanes and the upper eight into its upper ones where it has sixteen (L16); returns where
// it stopped. The kept ids go to ``kept`` from ``n_kept`` on (room for every entry).
template <bool TWO, bool K_ON, bool L16>
inline int64_t stages_vectors(const float* x, int64_t i, int64_t stop, __m256 vm, __m256 vt, __m256 vk, float* wr,
                              float* er, float* wt, float* et, StageSums& rs, StageSums& ts, int32_t* kept,
                              int64_t& n_kept) {
    StageRegs r(rs), q(ts);
    int64_t held = n_kept;
    for (; i + 16 <= stop; i += 16) {
        stages_eight<TWO, K_ON, false>(x, i, vm, vt, vk, wr, er, wt, et, r, q, kept, held);
        stages_eight<TWO, K_ON, L16>(x, i + 8, vm, vt, vk, wr, er, wt, et, r, q, kept, held);
    }
    r.back(rs);
    if constexpr (TWO) q.back(ts);
    n_kept = held;
    return i;
}

#endif

using StagesVectors = int64_t (*)(const float*, int64_t, int64_t, Wide, Wide, Wide, float*, float*, float*, float*,
                                  StageSums&, StageSums&, int32_t*, int64_t&);

inline StagesVectors stages_vectors_for(bool two, bool k_on, bool l16) {
    constexpr StagesVectors table[8] = {
        stages_vectors<false, false, false>, stages_vectors<false, false, true>, stages_vectors<false, true, false>,
        stages_vectors<false, true, true>,   stages_vectors<true, false, false>, stages_vectors<true, false, true>,
        stages_vectors<true, true, false>,   stages_vectors<true, true, true>,
    };
    return table[(two ? 4 : 0) + (k_on ? 2 : 0) + (l16 ? 1 : 0)];
}

// Whether x holds a NaN or ±inf, its maximum, and its ``want`` best ids by larger value then lower id into
// ``out`` (as best(x, nullptr, n, want, ...) orders them; want <= HEAP_MOST), in one pass. Returns how many
// are held (want, or n if fewer).
int64_t scan(const float* x, int64_t n, int64_t want, int32_t* out, bool& bad, float& max_out) {
    TopHeld top{x, out, want > n ? n : want};
    bool bad_v = false;
    float m_v = -INFINITY;
    int64_t start = scan_vectors(x, n, top, bad_v, m_v);
    int bad_s = 0;
    float m_s = -INFINITY;
    for (int64_t j = start; j < n; ++j) {
        const float v = x[j];
        bad_s |= !((v - v) == 0.0f);
        m_s = v > m_s ? v : m_s;
        if (top.want > 0) top.insert(j);
    }
    bad = bad_v || bad_s != 0;
    max_out = m_s > m_v ? m_s : m_v;
    return top.want;
}

// Both stages in one pass: d = x - m, er = exp(d) (and wr = d when ``wr``), and where ``wt``, dt = d / t into
// wt and et = exp(dt); each stage's Sums and softmax normaliser sum (``raw_sum``, ``t_sum``); with ``kth``
// (top-k, not NaN) the ids whose dt (d without wt) is at least kth, ascending, into ``kept``.
void stages_pass(const float* x, int64_t n, float m, float t, float* wr, float* er, float* wt, float* et,
                 int64_t lanes, Sums& raw, Sums& temp, float& raw_sum, float& t_sum, bool k_on, float kth,
                 std::vector<int32_t>& kept) {
    StageSums rs(lanes), ts(lanes);
    const bool two = wt != nullptr;
    const Wide vm = wide(m), vt = wide(t), vk = wide(kth);
    const StagesVectors vectors = stages_vectors_for(two, k_on, lanes == 16);
    thread_local std::vector<int32_t> room;  // every entry's place: the kept ids go here, then into ``kept``
    if (static_cast<int64_t>(room.size()) < n) room.resize(n);
    int64_t n_kept = 0;
    for (int64_t start = 0; start < n; start += BLOCK) {
        const int64_t stop = start + BLOCK < n ? start + BLOCK : n;
        int64_t i = vectors(x, start, stop, vm, vt, vk, wr, er, wt, et, rs, ts, room.data(), n_kept);
        if (i + 8 <= stop) {  // eight left in the block (their lanes the lower eight): exp8, as exp_pass takes them
            const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(m));
            const __m256 e = exp8(d);
            if (wr) _mm256_storeu_ps(wr + i, d);
            _mm256_storeu_ps(er + i, e);
            rs.add8(i, d, e);
            const __m256 dt = two ? _mm256_div_ps(d, _mm256_set1_ps(t)) : d;
            if (two) {
                const __m256 f = exp8(dt);
                _mm256_storeu_ps(wt + i, dt);
                _mm256_storeu_ps(et + i, f);
                ts.add8(i, dt, f);
            }
            if (k_on) {
                const __m256 at_least = _mm256_cmp_ps(dt, _mm256_set1_ps(kth), _CMP_GE_OQ);
                keep_ids(i, static_cast<unsigned>(_mm256_movemask_ps(at_least)), room.data(), n_kept);
            }
            i += 8;
        }
        rs.end_vectors(raw);
        if (two) ts.end_vectors(temp);
        for (; i < stop; ++i) {
            const float d = x[i] - m;
            const float e = exp_nonpositive(d);
            if (wr) wr[i] = d;
            er[i] = e;
            rs.add_scalar(i, d, e, raw);
            float dt = d;
            if (two) {
                dt = d / t;
                const float f = exp_nonpositive(dt);
                wt[i] = dt;
                et[i] = f;
                ts.add_scalar(i, dt, f, temp);
            }
            if (k_on && dt >= kth) room[n_kept++] = static_cast<int32_t>(i);
        }
    }
    kept.assign(room.begin(), room.begin() + n_kept);
    raw_sum = rs.lane.total();
    t_sum = two ? ts.lane.total() : raw_sum;
    if (!two) temp = raw;
}

#else
constexpr bool FUSED = false;  // the separate passes; these two are never called
int64_t scan(const float*, int64_t, int64_t, int32_t*, bool& bad, float&) {
    bad = true;
    return 0;
}
void stages_pass(const float*, int64_t, float, float, float*, float*, float*, float*, int64_t, Sums&, Sums&, float&,
                 float&, bool, float, std::vector<int32_t>&) {}
#endif

}  // namespace

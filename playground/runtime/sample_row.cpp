// One sampled step of the teaching sampler (playground/engine/sampling.py, Generation._choose) on one float32
// row of logits, in a few vectorised passes: the raw softmax, temperature ((x - max) / T), top-k (ties at the
// k-th value kept), top-p (the smallest most likely set whose mass reaches p), the final distribution, the token
// by the inverse CDF (receipts.py), its rank, the top ids, the entropies, the slices and the stage rows.
//
// Two calls per row, on one thread: ``pg_sample_prepare`` does everything the uniform draw does not decide and
// says whether the row can be taken here; only then does the caller draw u from its generator and call
// ``pg_sample_draw``. The row's working arrays live in thread-local storage between the two calls.
// ``pg_sample_rows`` makes several rows' steps in one call, each row's u drawn beforehand.
//
// Every stage shares exp(w) with w = the temperature stage's logits minus their maximum (0 after the
// temperature stage): a filter only changes which entries a stage's sum runs over, as in torch's softmax of
// a row with -inf entries. Built and loaded by playground/runtime/native_sampler.py.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sample_parts.cpp"
#include "sample_fused.cpp"

namespace {

// What one row's prepare leaves for its draw (this thread's last row).
struct Row {
    std::vector<float> wr, er, wt_own, et_own, values;
    std::vector<int32_t> kept_k, kept_p, final_ids, order;
    std::vector<int32_t> top_x;  // the fused scan's best ids of the logits, best first (empty without it)
    std::vector<Pair> pairs;
    std::vector<double> final_cdf, block_start;  // cumulative sums: per final id, or at each block's start
    const float* wt = nullptr;  // the temperature stage's logits minus their maximum, and their exp
    const float* et = nullptr;
    int64_t n = 0, want = 0;
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
                      int64_t lanes, int32_t* ints, float* floats, double* doubles) {
    if (n <= 0 || n_top < 0 || n > INT32_MAX || lanes < 1 || lanes > MAX_LANES) return 0;
    Row& r = ROW;
    const int64_t n1 = n_top + 1;
    r.n = n;
    r.want = n_top < n ? n_top : n;
    r.top_ready = false;
    r.k_on = top_k > 0 && top_k < n;
    // Where the passes fuse (sample_fused.cpp), one scan finds the maximum, the raw top and top-k's k-th value
    // (the k-th largest logit: (x - m) / t never reorders two logits, so its k-th largest is the k-th logit's).
    const bool fused = FUSED && (lanes == 8 || lanes == 16);
    const bool k_early = fused && r.k_on && top_k <= HEAP_MOST;
    int bad = 0;
    float m = -INFINITY;
    r.top_x.clear();
    if (fused) {
        const int64_t want_x = k_early && top_k > r.want + 1 ? top_k : r.want + 1;
        r.top_x.resize(want_x);
        bool bad_x = false;
        r.top_x.resize(scan(x, n, want_x, r.top_x.data(), bad_x, m));
        bad = bad_x;
    } else {
#pragma omp simd reduction(| : bad) reduction(max : m)
        for (int64_t i = 0; i < n; ++i) {
            const float v = x[i];
            bad |= !((v - v) == 0.0f);
            m = v > m ? v : m;
        }
    }
    const float t = static_cast<float>(temperature);
    if (bad || !(t > 0.0f) || !std::isfinite(t)) return 0;
    r.er.resize(n);
    Sums raw, temp;
    if (fused) {
        const bool one = temperature == 1.0;
        if (k_early) {
            float d = x[r.top_x[top_k - 1]] - m;
            r.kth = one ? d : d / t;
        }
        r.wr.resize(one ? n : 0);
        r.wt_own.resize(one ? 0 : n);
        r.et_own.resize(one ? 0 : n);
        float raw_sum = 0.0f, t_sum = 0.0f;
        stages_pass(x, n, m, t, one ? r.wr.data() : nullptr, r.er.data(), one ? nullptr : r.wt_own.data(),
                    one ? nullptr : r.et_own.data(), lanes, raw, temp, raw_sum, t_sum, k_early, r.kth, r.kept_k);
        r.inv_raw = 1.0f / raw_sum;
        r.wt = one ? r.wr.data() : r.wt_own.data();
        r.et = one ? r.er.data() : r.et_own.data();
        r.inv_t = one ? r.inv_raw : 1.0f / t_sum;
        doubles[RAW_ENTROPY] = entropy_bits(raw);
    } else {
        r.wr.resize(n);
        exp_pass(x, n, m, 1.0f, false, r.wr.data(), r.er.data(), raw);
        r.inv_raw = 1.0f / torch_sum(r.er.data(), nullptr, n, lanes);
        doubles[RAW_ENTROPY] = entropy_bits(raw);
        temp = raw;
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
        r.inv_t = temperature == 1.0 ? r.inv_raw : 1.0f / torch_sum(r.et, nullptr, n, lanes);
    }
    const float* wt = r.wt;
    const float* et = r.et;

    // Top-k: the k-th largest value, every entry at least as large kept (ids ascending).
    Sums kept_sums = temp;
    r.inv_k = r.inv_t;
    if (r.k_on) {
        if (k_early) {  // the k-th value and the kept ids came with the fused passes
        } else if (top_k <= HEAP_MOST) {
            r.order.resize(top_k);
            best(wt, nullptr, n, top_k, r.order.data(), r.pairs);
            r.kth = wt[r.order[top_k - 1]];
        } else {
            r.values.assign(wt, wt + n);
            std::nth_element(r.values.begin(), r.values.begin() + (top_k - 1), r.values.end(), std::greater<float>());
            r.kth = r.values[top_k - 1];
        }
        if (!k_early) collect(wt, n, r.kth, r.kept_k);
        kept_sums = Sums();
        for (int32_t i : r.kept_k) kept_sums.sum += et[i];
        r.inv_k = 1.0f / torch_sum(et, r.kept_k.data(), static_cast<int64_t>(r.kept_k.size()), lanes);
    }

    // Top-p over the top-k stage's probabilities (top_p_keep, sample_parts.cpp), the kept ids ascending.
    r.p_on = top_p < 1.0;
    r.all_final = !r.k_on && !r.p_on;
    r.inv_f = r.inv_k;
    if (r.p_on) {
        const int32_t* ids = r.k_on ? r.kept_k.data() : nullptr;
        const int64_t count = r.k_on ? static_cast<int64_t>(r.kept_k.size()) : n;
        const int64_t keep = top_p_keep(wt, et, n, ids, count, r.inv_k, static_cast<float>(top_p), r.order,
                                        r.kept_p, r.pairs);
        if (keep < 0) return 2;
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
            // Eight lanes in a fixed order, added in a fixed tree: the same sum whatever vector width the
            // compiler picks (an ``omp simd`` reduction's order follows the width, and -march=znver4 prefers
            // 512 bits where the portable build has 256).
            double lane[8] = {};
            int64_t i = b * BLOCK;
            for (; i + 8 <= stop; i += 8)
                for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(et[i + l] * inv);
            double s = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            for (; i < stop; ++i) s += static_cast<double>(et[i] * inv);
            c += s;
        }
        r.block_start[blocks] = c;
        r.total = c;
    } else {
        if (r.p_on) {
            fin = Sums();
            for (int32_t i : r.final_ids) fin.sum += et[i];
            r.inv_f = 1.0f / torch_sum(et, r.final_ids.data(), static_cast<int64_t>(r.final_ids.size()), lanes);
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
    int64_t raw_held;
    if (fused) {  // the scan's first want + 1: the order best gives them
        raw_held = std::min<int64_t>(r.want + 1, static_cast<int64_t>(r.top_x.size()));
        look.assign(r.top_x.begin(), r.top_x.begin() + raw_held);
    } else {
        raw_held = best(x, nullptr, n, r.want + 1, (look.resize(r.want + 1), look.data()), r.pairs);
    }
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
    // An entry more likely than the token has a larger logit: where the token is among the scan's best ids,
    // those before it are every candidate, and the count over them is the count over the row.
    const auto at_tok = std::find(r.top_x.begin(), r.top_x.end(), tok);
    if (at_tok != r.top_x.end()) {
        for (auto j = r.top_x.begin(); j != at_tok; ++j) above += er[*j] * inv_raw > raw_prob;
    } else {
#pragma omp simd reduction(+ : above)
        for (int64_t i = 0; i < r.n; ++i) above += er[i] * inv_raw > raw_prob;
    }
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

// Several rows' sampled steps in one call (a room's, after its shared forward): each row prepared and, where
// prepare returns 1 or 3, drawn with its own u, both on one thread (that thread's ROW), the threads taking rows
// in turn. A row's arithmetic is what it gets alone, whichever thread takes it and whatever rows share the call.
// got[r]: what prepare returned; tokens[r]: the drawn token, or -1.
void pg_sample_rows(int64_t rows, const float* const* xs, const int64_t* ns, const double* temperatures,
                    const int64_t* top_ks, const double* top_ps, const double* us, const int64_t* n_tops, int64_t lanes,
                    int32_t* const* ints, float* const* floats, double* const* doubles, int32_t* got, int64_t* tokens,
                    int64_t threads) {
    const int team = static_cast<int>(threads < rows ? threads : rows);  // one row: no team to wake
#pragma omp parallel for num_threads(team > 1 ? team : 1) schedule(dynamic, 1)
    for (int64_t r = 0; r < rows; ++r) {
        got[r] = pg_sample_prepare(xs[r], ns[r], temperatures[r], top_ks[r], top_ps[r], n_tops[r], lanes, ints[r],
                                   floats[r], doubles[r]);
        tokens[r] = got[r] == 1 || got[r] == 3 ? pg_sample_draw(us[r], n_tops[r], ints[r], floats[r], doubles[r]) : -1;
    }
}

}  // extern "C"

// One GPT-2 decode step in one call: embeddings, every block, the final LayerNorm and the output head.
//
// Built by playground/runtime/native_step.py like one_row_gemv.cpp (whose row kernels it includes),
// and called once per generated token. Between the operations of a step there is then no Python, no
// torch dispatch and no waking of threads: one OpenMP parallel region runs the whole step, every
// matrix product split across the team by output rows (the way llama.cpp runs a token), the
// LayerNorms computed by every thread into its own buffer (cheaper than a barrier), Q/K/V and attention
// split by heads (a thread attends with the rows it computed), and a barrier wherever a result of the whole
// team is needed next: four per block (the step's own, spinning: SpinBarrier below).
//
// The numbers follow the model's plain forward (playground/engine/model.py): pre-norm blocks, the
// keys and values of the new position written into the KV cache's own tensors at the same place the
// torch forward writes them, one query's attention over every cached position in float32, GELU in
// its tanh form. A bfloat16 model rounds to bfloat16 wherever its torch forward stores a tensor
// (each product's output, the residual stream, the LayerNorms' and GELU's outputs, the keys and
// values), so both paths agree to bfloat16 rounding.
//
// An int8 model (engine/quantize.py) passes its int8 weight matrices where a float model passes float
// ones, with each matrix's per-row scales (and, for int8-dynamic, its row sums) after the float tensors.
// Weight-only int8 widens the weights to float32 in registers and scales each row's sum, rounded as the
// activations are stored; int8-dynamic (float32 activations) quantizes each product's input row as torch
// does and sums on the CPU's int8 dot product. Every thread quantizes the input row into its own buffer
// (identical on every thread, as its LayerNorm output is), which costs less than a barrier around one
// shared row.
//
// Several rows (generations of one model, each with its own token, position and KV cache) can share one
// step (pg_step_rows_*): the same region, split and barriers, every product reading each block of weight
// rows once for all rows (batched_rows.cpp) and summing every output exactly as the single-row kernel does,
// the norms and attention computed row by row by the same code. A row's logits, keys, values and attention
// are then bit for bit those it gets alone, whatever rows share its step and whatever the team size (the
// split of a product's rows falls on whole blocks of ROWS). The single-row step is its one-row case.
//
// Rows may share a cache at consecutive positions (a prompt fed in one step): a thread writes a head's key
// and value of every row before it attends with the next row, in row order, so each position attends over
// the ones before it as the forward's causal mask allows. A row without logits (a prompt's earlier
// positions) only fills its cache: the final norm and the output head run for the rows with logits.

#include "one_row_gemv.cpp"
#include "batched_rows.cpp"
#include "head_tiles.cpp"
#include "step_parts.cpp"

#include <math.h>
#include <sched.h>

#include <atomic>
#include <vector>

namespace {

// The step's barriers. libgomp's own waits only 100 spins before it sleeps on a futex whenever it manages
// more threads than there are cores, which is the case in any process where a second thread ever ran a
// parallel torch operation (the server's decode loop beside the thread that built the model): every barrier
// of a step then costs two thread wake-ups, tens of microseconds each. The team's threads are on the cores
// for the whole step, so they spin here instead, and yield their core only after a long wait (a thread of
// the team was descheduled: a busy machine).
class SpinBarrier {
  public:
    void wait(int team) {
        const unsigned phase = phase_.load(std::memory_order_relaxed);  // cannot move before this thread arrives
        if (arrived_.fetch_add(1, std::memory_order_acq_rel) == team - 1) {
            arrived_.store(0, std::memory_order_relaxed);
            phase_.store(phase + 1, std::memory_order_release);
            return;
        }
        for (int spins = 0; phase_.load(std::memory_order_acquire) == phase;) {
            if (++spins < SPINS_BEFORE_YIELD)
                _mm_pause();
            else
                sched_yield();
        }
    }

  private:
    static constexpr int SPINS_BEFORE_YIELD = 1 << 12;  // a few hundred microseconds of pause
    std::atomic<int> arrived_{0};
    std::atomic<unsigned> phase_{0};
};

// The tensors of one block, in the order native_step.py passes them.
enum { LN1_S, LN1_B, WQ, BQ, WK, BK, WV, BV, WO, BO, LN2_S, LN2_B, W1, B1, W2, B2, PER_BLOCK };

struct Dims {
    int64_t d, heads, hd, layers, vocab, ff, capacity, pos, token, activation, products_only, quant, packed_head;
};

// How the weight matrices are stored: as the activations are, or int8 (see the header).
enum { FLOAT_WEIGHTS, INT8_WEIGHTS, INT8_DYNAMIC };
// After the float tensors of an int8 model: per block, for Q, K, V, out_proj, the two MLP layers in turn, the
// matrix's scales and row sums (null for weight-only int8); then the output head's two; then the token
// embedding's scales.
constexpr int INT8_PER_BLOCK = 12;

// One weight matrix: its values, and for int8 its per-row scales and Σ_k q[row, k].
struct Matrix {
    const void* w;
    const void* scale;  // in the activations' dtype
    const int32_t* row_sums;
};

// The int8-dynamic input row of one thread: x quantized as quantize_row_u8 does, and its scale r.
struct QuantRow {
    uint8_t* xu;
    float r;
};


// y[lo..hi) = W x (no bias); x in float32 (xf) and, for bfloat16 weights, also in bfloat16 (xh).
inline void rows(const float* w, const float* xf, const uint16_t*, int64_t k, int64_t lo, int64_t hi, float* y) {
    rows_block<float>(w, xf, nullptr, k, lo, hi, y);
}
inline void rows(const uint16_t* w, const float* xf, const uint16_t* xh, int64_t k, int64_t lo, int64_t hi, float* y) {
#if defined(__AVX512BF16__)
    (void)xf;
    int64_t r = lo;
    if (rows_at_once == ROWS)
        for (; r + ROWS <= hi; r += ROWS) dot_rows_bf16<ROWS>(w + r * k, xh, k, y + r);
    for (; r < hi; ++r) dot_rows_bf16<1>(w + r * k, xh, k, y + r);
#else
    (void)xh;
    rows_block<uint16_t>(w, xf, nullptr, k, lo, hi, y);
#endif
}

// y[lo..hi) = W x (no bias) for any storage of W; ``q`` holds x quantized (int8-dynamic only).
template <typename T>
inline void product(const Matrix& m, int64_t quant, const float* xf, const uint16_t* xh, const QuantRow& q, int64_t k,
                    int64_t lo, int64_t hi, float* y) {
    if (quant == FLOAT_WEIGHTS) {
        rows(static_cast<const T*>(m.w), xf, xh, k, lo, hi, y);
    } else if (quant == INT8_WEIGHTS) {  // the sum times the row's scale, rounded as torch's int8 kernel stores it
        rows_block<int8_t>(static_cast<const int8_t*>(m.w), xf, nullptr, k, lo, hi, y);
        const T* scale = static_cast<const T*>(m.scale);
        for (int64_t j = lo; j < hi; ++j) y[j] = round_to(y[j] * load(scale, j), sizeof(T) == 2);
    } else {
#if PG_I8_DOT_BITS
        i8_rows_block(static_cast<const int8_t*>(m.w), q.xu, m.row_sums, q.r, static_cast<const float*>(m.scale),
                      nullptr, k, lo, hi, y, nullptr);
#else
        (void)q;  // never asked of such a build: native_gemv.int8_dot_ready is false with the same flags
#endif
    }
}

// Quantize x (k) into this thread's row when the products are int8-dynamic.
inline void quantize_input(int64_t quant, const float* x, int64_t k, QuantRow* q) {
    if (quant == INT8_DYNAMIC) q->r = quantize_row_u8(x, k, q->xu);
}

// One row of a batched step: its token at its position, and its own cache (capacity positions), logits and
// attention (null: not captured).
template <typename T>
struct RowIO {
    int64_t token, pos, capacity;
    T* k_cache;
    T* v_cache;
    float* logits;
    float* attention;
};

template <typename T>
void step_rows(const void* const* tensors, const int64_t* dims_in, float eps, int64_t n_rows, const RowIO<T>* io,
               int threads) {
    const Dims dm = {dims_in[0], dims_in[1], dims_in[2], dims_in[3], dims_in[4], dims_in[5],
                     dims_in[6], dims_in[7], dims_in[8], dims_in[9], dims_in[10], dims_in[11], dims_in[12]};
    // products_only: the same products on the same team, split and barriers, and nothing else -- the
    // step's time minus this is its time outside the products (bench prints it). Writes no cache.
    const bool all = !dm.products_only;
    const bool bf16 = sizeof(T) == 2;
    const int64_t d = dm.d, hd = dm.hd, ff = dm.ff, B = n_rows;
    const float inv_sqrt_hd = 1.0f / sqrtf(static_cast<float>(hd));
    if (threads < 1) threads = 1;
    int64_t max_keys = 1;
    for (int64_t b = 0; b < B; ++b) max_keys = io[b].pos + 1 > max_keys ? io[b].pos + 1 : max_keys;
    // Shared, per row: the residual stream, q|k|v, the attention's output, the MLP's hidden row, one product's
    // output. Per thread: one head's scores; per row its LayerNorm output (float32 and bfloat16), the hidden row
    // in bfloat16, for int8-dynamic the quantized input row of the next product.
    const int64_t half_d = (d + 1) / 2 + 8, half_ff = (ff + 1) / 2 + 8;
    const int64_t quarter_row = dm.quant == INT8_DYNAMIC ? (ff > d ? ff : d) / 4 + 16 : 0;
    const int64_t shared_row = 6 * d + ff, own_row = d + half_d + half_ff + quarter_row;
    const int64_t per_thread = max_keys + B * own_row;
    std::vector<float> buf(B * shared_row + threads * per_thread);
    auto x = [&](int64_t b) { return buf.data() + b * shared_row; };
    auto qkv = [&](int64_t b) { return x(b) + d; };
    auto ctx = [&](int64_t b) { return x(b) + 4 * d; };
    auto hidden = [&](int64_t b) { return x(b) + 5 * d; };
    auto out = [&](int64_t b) { return x(b) + 5 * d + ff; };
    float* own = buf.data() + B * shared_row;
    const T* const* layer = reinterpret_cast<const T* const*>(tensors + 2);
    const T* const* tail = layer + PER_BLOCK * dm.layers;  // final_norm scale, shift, out_head weight
    const bool int8 = dm.quant != FLOAT_WEIGHTS;
    const void* const* extra = reinterpret_cast<const void* const*>(tail + 3);  // int8 scales and row sums
    // Matrix m of block l (0..5: Q, K, V, out_proj, MLP in, MLP out), or the output head (l = layers).
    auto matrix = [&](int64_t l, int m) -> Matrix {
        const int slot = m < 4 ? WQ + 2 * m : W1 + 2 * (m - 4);
        const void* w = l < dm.layers ? static_cast<const void*>(layer[PER_BLOCK * l + slot]) : tail[2];
        if (!int8) return {w, nullptr, nullptr};
        const void* const* e = extra + INT8_PER_BLOCK * l + 2 * m;
        return {w, e[0], static_cast<const int32_t*>(e[1])};
    };
    std::vector<int64_t> outs;  // the rows with logits to compute
    for (int64_t b = 0; b < B; ++b)
        if (io[b].logits) outs.push_back(b);

    SpinBarrier barrier;
    // The output head's chunks of tiles (below): thread t's share starts at chunk t * chunks / threads, and
    // head_next[t] is the next chunk of that share not yet claimed, by t or by a thread that finished its own.
    const int64_t head_chunks = (dm.vocab + HEAD_TILE * HEAD_CHUNK - 1) / (HEAD_TILE * HEAD_CHUNK);
    std::vector<std::atomic<int64_t>> head_next(threads);
    for (int i = 0; i < threads; ++i) head_next[i].store(head_chunks * i / threads, std::memory_order_relaxed);
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        float* scores = own + t * per_thread;
        auto xn = [&](int64_t b) { return scores + max_keys + b * own_row; };
        auto xh = [&](int64_t b) { return reinterpret_cast<uint16_t*>(xn(b) + d); };  // d bfloat16 in d / 2 floats
        auto hh = [&](int64_t b) { return reinterpret_cast<uint16_t*>(xn(b) + d + half_d); };
        std::vector<QuantRow> q(B);
        for (int64_t b = 0; b < B; ++b) q[b] = {reinterpret_cast<uint8_t*>(xn(b) + d + half_d + half_ff), 1.0f};
        std::vector<const float*> xs(B);
        std::vector<const uint16_t*> xhs(B);
        std::vector<float*> ys(B);
        // y(b)[lo..hi) = matrix m of block l times in_f(b) (in_h(b): its bfloat16 copy), for the n rows
        // b = row(0..n-1): every row, or the output head's rows
        auto product_of = [&](int64_t n, auto row, int64_t l, int m, auto in_f, auto in_h, int64_t k, int64_t lo,
                              int64_t hi, auto y) {
            const Matrix mat = matrix(l, m);
            if (n == 1 || dm.quant == INT8_DYNAMIC) {  // row by row within each block of weight rows
                blocks_for_rows(lo, hi, n, [&](int64_t i, int64_t r0, int64_t r1) {
                    const int64_t b = row(i);
                    product<T>(mat, dm.quant, in_f(b), in_h(b), q[b], k, r0, r1, y(b));
                });
                return;
            }
            for (int64_t i = 0; i < n; ++i) xs[i] = in_f(row(i)), xhs[i] = in_h(row(i)), ys[i] = y(row(i));
            if (dm.quant == FLOAT_WEIGHTS) {
                rows_multi(static_cast<const T*>(mat.w), xs.data(), xhs.data(), n, k, lo, hi, ys.data());
                return;
            }
            rows_multi(static_cast<const int8_t*>(mat.w), xs.data(), xhs.data(), n, k, lo, hi, ys.data());
            const T* scale = static_cast<const T*>(mat.scale);  // as product() scales an int8 row's sums
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = lo; j < hi; ++j) ys[i][j] = round_to(ys[i][j] * load(scale, j), bf16);
        };
        auto every = [](int64_t b) { return b; };
        auto product_rows = [&](int64_t l, int m, auto in_f, auto in_h, int64_t k, int64_t lo, int64_t hi, auto y) {
            product_of(B, every, l, m, in_f, in_h, k, lo, hi, y);
        };
        int64_t lo, hi;
        for (int64_t b = 0; b < B && all && t == 0; ++b) {
            const T* tok = static_cast<const T*>(tensors[0]) + io[b].token * d;
            const T* posrow = static_cast<const T*>(tensors[1]) + io[b].pos * d;
            const int8_t* tok8 = static_cast<const int8_t*>(tensors[0]) + io[b].token * d;
            const T* tok_scale = int8 ? static_cast<const T*>(extra[INT8_PER_BLOCK * dm.layers + 2]) + io[b].token : nullptr;
            float* xb = x(b);
            for (int64_t i = 0; i < d; ++i) {
                if (int8) {  // Int8Embedding: the row's int8 values times its scale, rounded, then the position added
                    float e = round_to(static_cast<float>(tok8[i]) * load(tok_scale, 0), bf16);
                    asm("" : "+x"(e));  // rounded before the add, as torch's two operations are
                    xb[i] = round_to(e + load(posrow, i), bf16);
                } else {
                    xb[i] = round_to(load(tok, i) + load(posrow, i), bf16);
                }
            }
        }
        barrier.wait(nt);
        for (int64_t l = 0; l < dm.layers; ++l) {
            const T* const* w = layer + PER_BLOCK * l;
            for (int64_t b = 0; b < B; ++b) {
                if (all) layer_norm(x(b), w[LN1_S], w[LN1_B], d, eps, bf16, xn(b), bf16 ? xh(b) : nullptr);
                quantize_input(dm.quant, xn(b), d, &q[b]);
            }
            // Q, K and V by heads: each thread computes the rows of its own heads for every row, which are all
            // its attention reads next, so no barrier is needed between the two.
            for (int64_t h = t; h < dm.heads; h += nt)
                for (int m = 0; m < 3; ++m) {
                    const T* bm = w[BQ + 2 * m];
                    product_rows(l, m, xn, xh, d, h * hd, (h + 1) * hd, [&](int64_t b) { return qkv(b) + m * d; });
                    for (int64_t b = 0; b < B && all; ++b) {
                        float* y = qkv(b) + m * d;
                        for (int64_t j = h * hd; j < (h + 1) * hd; ++j)
                            y[j] = round_to(y[j] + (bm ? load(bm, j) : 0.0f), bf16);
                    }
                }
            // Attention, one (row, head) pair at a time, each thread its own heads: this position's key and
            // value into the row's cache, then its new query over every cached key.
            for (int64_t h = t; h < dm.heads && all; h += nt)
                for (int64_t b = 0; b < B; ++b) {
                    const RowIO<T>& r = io[b];
                    const int64_t keys = r.pos + 1;
                    T* kh = r.k_cache + ((l * dm.heads + h) * r.capacity) * hd;
                    T* vh = r.v_cache + ((l * dm.heads + h) * r.capacity) * hd;
                    const float* qb = qkv(b);
                    const float* qh = qb + h * hd;
                    for (int64_t e = 0; e < hd; ++e) {
                        store(kh, r.pos * hd + e, qb[d + h * hd + e]);
                        store(vh, r.pos * hd + e, qb[2 * d + h * hd + e]);
                    }
                    float* p = r.attention ? r.attention + (l * dm.heads + h) * keys : scores;
                    float top = -INFINITY;
                    for (int64_t j = 0; j < keys; ++j) {
                        const T* kj = kh + j * hd;
                        float s = 0.0f;
#pragma omp simd reduction(+ : s)
                        for (int64_t e = 0; e < hd; ++e) s += qh[e] * load(kj, e);
                        p[j] = s * inv_sqrt_hd;
                        top = fmaxf(top, p[j]);
                    }
                    float total = 0.0f;
#pragma omp simd reduction(+ : total)
                    for (int64_t j = 0; j < keys; ++j) {
                        p[j] = fast_exp(p[j] - top);
                        total += p[j];
                    }
                    const float inv_total = 1.0f / total;
                    float* c = ctx(b) + h * hd;
                    for (int64_t e = 0; e < hd; ++e) c[e] = 0.0f;
                    for (int64_t j = 0; j < keys; ++j) {
                        const float pj = p[j] * inv_total;
                        p[j] = pj;
                        const T* vj = vh + j * hd;
#pragma omp simd
                        for (int64_t e = 0; e < hd; ++e) c[e] += pj * load(vj, e);
                    }
                    for (int64_t e = 0; e < hd; ++e) c[e] = round_to(c[e], bf16);
                }
            barrier.wait(nt);
            // out_proj and the residual add, row by row: each thread owns its rows of x.
            for (int64_t b = 0; b < B; ++b) {
                if (bf16)
                    for (int64_t i = 0; i < d; ++i) xh(b)[i] = float_to_bf16(ctx(b)[i]);
                quantize_input(dm.quant, ctx(b), d, &q[b]);
            }
            thread_rows(d, t, nt, &lo, &hi);
            product_rows(l, 3, ctx, xh, d, lo, hi, out);
            for (int64_t b = 0; b < B && all; ++b)
                for (int64_t j = lo; j < hi; ++j)
                    x(b)[j] = round_to(x(b)[j] + round_to(out(b)[j] + (w[BO] ? load(w[BO], j) : 0.0f), bf16), bf16);
            barrier.wait(nt);
            for (int64_t b = 0; b < B; ++b) {
                if (all) layer_norm(x(b), w[LN2_S], w[LN2_B], d, eps, bf16, xn(b), bf16 ? xh(b) : nullptr);
                quantize_input(dm.quant, xn(b), d, &q[b]);
            }
            thread_rows(ff, t, nt, &lo, &hi);
            product_rows(l, 4, xn, xh, d, lo, hi, hidden);
            for (int64_t b = 0; b < B && all; ++b)
                bias_activate(hidden(b) + lo, w[B1] ? w[B1] + lo : nullptr, hi - lo, dm.activation, bf16);
            barrier.wait(nt);
            thread_rows(d, t, nt, &lo, &hi);
            for (int64_t b = 0; b < B; ++b) {
#if defined(__AVX512BF16__)
                if (bf16)  // the bfloat16 dot-product instruction reads the hidden row as bfloat16
                    for (int64_t i = 0; i < ff; ++i) hh(b)[i] = float_to_bf16(hidden(b)[i]);
#endif
                quantize_input(dm.quant, hidden(b), ff, &q[b]);
            }
            product_rows(l, 5, hidden, hh, ff, lo, hi, out);
            for (int64_t b = 0; b < B && all; ++b)
                for (int64_t j = lo; j < hi; ++j)
                    x(b)[j] = round_to(x(b)[j] + round_to(out(b)[j] + (w[B2] ? load(w[B2], j) : 0.0f), bf16), bf16);
            barrier.wait(nt);
        }
        // The final norm and the output head for the rows that asked for logits only (a prompt's earlier
        // positions just fill their cache).
        const int64_t n_out = static_cast<int64_t>(outs.size());
        auto out_row = [&](int64_t i) { return outs[i]; };
        for (int64_t i = 0; i < n_out; ++i) {
            const int64_t b = outs[i];
            if (all) layer_norm(x(b), tail[0], tail[1], d, eps, bf16, xn(b), bf16 ? xh(b) : nullptr);
            quantize_input(dm.quant, xn(b), d, &q[b]);
        }
        if (dm.packed_head && !bf16 && !int8) {  // the packed copy after the head's own weight (head_tiles.cpp)
            // Each thread streams its own share front to back a chunk at a time, then takes the chunks another
            // thread has not reached: a thread the OS sets aside for a while (a busy server's other threads on
            // the same cores) leaves the rest of its share to the team instead of holding the step until it
            // returns. Which thread makes a tile does not change its outputs (head_tiles.cpp).
            for (int64_t i = 0; i < n_out; ++i) xs[i] = xn(outs[i]), ys[i] = io[outs[i]].logits;
            const float* packed = reinterpret_cast<const float*>(tail[3]);
            const int64_t tiles = (dm.vocab + HEAD_TILE - 1) / HEAD_TILE;
            for (int k = 0; k < threads && n_out > 0; ++k) {  // (every share, should the team be smaller)
                const int share = (t + k) % threads;
                const int64_t share_end = head_chunks * (share + 1) / threads;
                for (int64_t c; (c = head_next[share].fetch_add(1)) < share_end;) {
                    const int64_t t0 = HEAD_CHUNK * c, t1 = t0 + HEAD_CHUNK < tiles ? t0 + HEAD_CHUNK : tiles;
                    head_rows(packed, xs.data(), n_out, d, dm.vocab, t0, t1, ys.data());
                }
            }
        } else {
            thread_rows(dm.vocab, t, nt, &lo, &hi);
            if (n_out > 0)
                product_of(n_out, out_row, dm.layers, 0, xn, xh, d, lo, hi, [&](int64_t b) { return io[b].logits; });
        }
        if (bf16)
            for (int64_t i = 0; i < n_out; ++i)
                for (int64_t j = lo; j < hi; ++j) io[outs[i]].logits[j] = round_to(io[outs[i]].logits[j], true);
    }
}

// The single-row step: the batched one with one row.
template <typename T>
void step(const void* const* tensors, const int64_t* dims, float eps, T* k_cache, T* v_cache, float* logits,
          float* attention, int threads) {
    const RowIO<T> row = {dims[8], dims[7], dims[6], k_cache, v_cache, logits, attention};
    step_rows<T>(tensors, dims, eps, 1, &row, threads);
}

// The rows of a batched call: row_dims (token, position, capacity) and row_ptrs (k cache, v cache, logits,
// attention or null) per row.
template <typename T>
void step_batch(const void* const* tensors, const int64_t* dims, float eps, int64_t n_rows, const int64_t* row_dims,
                void* const* row_ptrs, int threads) {
    std::vector<RowIO<T>> io(n_rows);
    for (int64_t b = 0; b < n_rows; ++b) {
        const int64_t* rd = row_dims + 3 * b;
        void* const* rp = row_ptrs + 4 * b;
        io[b] = {rd[0], rd[1], rd[2], static_cast<T*>(rp[0]), static_cast<T*>(rp[1]), static_cast<float*>(rp[2]),
                 static_cast<float*>(rp[3])};
    }
    step_rows<T>(tensors, dims, eps, n_rows, io.data(), threads);
}

}  // namespace

extern "C" {

// tensors: token embedding, position table, 16 per block (see PER_BLOCK; a missing bias is null), final
// LayerNorm scale and shift, output head weight -- all float32, contiguous, weights (out, in).
// dims: emb_dim, heads, head_dim, layers, vocab, ff, cache capacity, position, token, activation (0 GELU
// tanh, 1 ReLU), products only (1: see Dims), weights (0 as the activations, 1 int8, 2 int8-dynamic: the
// token embedding and every weight matrix int8, their scales and row sums after the output head, see
// INT8_PER_BLOCK), packed head (1: float32 weights only, the head's packed copy after its weight, see
// head_tiles.cpp). The caches are (layers, heads, capacity, head_dim); logits (vocab); attention, if not
// null, (layers, heads, position + 1): the new query's probabilities over every cached position.
void pg_step_f32(const void* const* tensors, const int64_t* dims, float eps, float* k_cache, float* v_cache,
                 float* logits, float* attention, int threads) {
    step<float>(tensors, dims, eps, k_cache, v_cache, logits, attention, threads);
}

// The same with every tensor and the caches in bfloat16 (float32 sums; logits and attention float32).
void pg_step_bf16(const void* const* tensors, const int64_t* dims, float eps, uint16_t* k_cache, uint16_t* v_cache,
                  float* logits, float* attention, int threads) {
    step<uint16_t>(tensors, dims, eps, k_cache, v_cache, logits, attention, threads);
}

// Several rows in one step, each as it is alone (bit for bit, for any rows beside it and any team size):
// every weight block is read once for all of them, each output summed by the single-row kernel. dims as
// pg_step_f32's (capacity, position and token unused); per row, row_dims (token, position, cache capacity)
// and row_ptrs (its k cache, v cache, logits or null, attention or null), shaped as pg_step_f32's. Rows of one
// cache come in order of position.
void pg_step_rows_f32(const void* const* tensors, const int64_t* dims, float eps, int64_t rows,
                      const int64_t* row_dims, void* const* row_ptrs, int threads) {
    step_batch<float>(tensors, dims, eps, rows, row_dims, row_ptrs, threads);
}

// The same with every tensor and the caches in bfloat16.
void pg_step_rows_bf16(const void* const* tensors, const int64_t* dims, float eps, int64_t rows,
                       const int64_t* row_dims, void* const* row_ptrs, int threads) {
    step_batch<uint16_t>(tensors, dims, eps, rows, row_dims, row_ptrs, threads);
}
}

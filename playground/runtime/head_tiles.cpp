// The output head of a float32 model from its packed copy: 16 vocabulary rows a tile, each output summed in
// order of its columns.
//
// Included by decode_step.cpp. The head is the step's largest product (a vocabulary of 50,257 rows) and its
// rows are short (emb_dim), where the row kernels' two accumulators and horizontal sum per output cost as much
// as the multiply-adds themselves, and many rows beside each other need each tile turned on its side first
// (tile_rows.cpp). Here the weights are packed once, beside the model (native_decode.packed_head): tile t holds
// vocabulary rows 16t..16t+15, column c of the tile is the 16 rows' weights of column c, contiguous, so the 16
// outputs of a tile sit in the lanes of one vector and column after column is one fused multiply-add onto them,
// the input's value broadcast. One row streams the whole copy front to back once; many rows share every loaded
// weight vector, and nothing is transposed or reduced across lanes.
//
// The arithmetic of every output is one chain: acc = 0, then acc = fma(w[c], x[c], acc) for c = 0, 1, ...,
// k - 1. It does not depend on how many rows share the step, which tiles a kernel call takes together, which
// thread claims a chunk of tiles or the vector width (AVX-512, AVX2 and the scalar loop make the same chain),
// so a row's logits are bit for bit the same alone or beside any others.

namespace {

constexpr int64_t HEAD_TILE = 16;  // vocabulary rows a tile: one AVX-512 vector of outputs

// out[i][16v + l] for the I inputs x[i] and the V tiles at ``w`` (each k x 16): the outputs of V tiles.
template <int I, int V>
inline void head_kernel(const float* w, const float* const* x, int64_t k, float* const* out) {
#if defined(__AVX512F__)
    __m512 acc[I][V];
    PG_UNROLL
    for (int i = 0; i < I; ++i)
        PG_UNROLL
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t c = 0; c < k; ++c) {
        __m512 wv[V];
        PG_UNROLL
        for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_ps(w + (v * k + c) * HEAD_TILE);
        PG_UNROLL
        for (int i = 0; i < I; ++i) {
            const __m512 xb = _mm512_set1_ps(x[i][c]);
            PG_UNROLL
            for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(wv[v], xb, acc[i][v]);
        }
    }
    PG_UNROLL
    for (int i = 0; i < I; ++i)
        PG_UNROLL
        for (int v = 0; v < V; ++v) _mm512_storeu_ps(out[i] + HEAD_TILE * v, acc[i][v]);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[I][V][2];
    PG_UNROLL
    for (int i = 0; i < I; ++i)
        PG_UNROLL
        for (int v = 0; v < V; ++v) acc[i][v][0] = acc[i][v][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < k; ++c) {
        PG_UNROLL
        for (int i = 0; i < I; ++i) {
            const __m256 xb = _mm256_set1_ps(x[i][c]);
            PG_UNROLL
            for (int v = 0; v < V; ++v) {
                const float* p = w + (v * k + c) * HEAD_TILE;
                acc[i][v][0] = _mm256_fmadd_ps(_mm256_loadu_ps(p), xb, acc[i][v][0]);
                acc[i][v][1] = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8), xb, acc[i][v][1]);
            }
        }
    }
    PG_UNROLL
    for (int i = 0; i < I; ++i)
        PG_UNROLL
        for (int v = 0; v < V; ++v) {
            _mm256_storeu_ps(out[i] + HEAD_TILE * v, acc[i][v][0]);
            _mm256_storeu_ps(out[i] + HEAD_TILE * v + 8, acc[i][v][1]);
        }
#else
    for (int i = 0; i < I; ++i)
        for (int64_t o = 0; o < V * HEAD_TILE; ++o) {
            const float* p = w + (o / HEAD_TILE) * k * HEAD_TILE + o % HEAD_TILE;
            float acc = 0.0f;
            for (int64_t c = 0; c < k; ++c) acc = madd(p[c * HEAD_TILE], x[i][c], acc);  // fused where the CPU has it
            out[i][o] = acc;
        }
#endif
}

// Inputs a kernel call shares each loaded weight vector between, and tiles a call takes side by side: 5 x 4
// accumulators leave the loaded weights and the broadcast input their registers (measured in docs/benchmarks.md).
// With AVX2's sixteen registers 5 inputs take one tile (10 accumulators), and the last few inputs of a step go
// two at a time over two tiles: the widest shapes whose accumulators, weights and input fit (measured there too).
// One input alone takes HEAD_V_ONE tiles: chains enough to hide the multiply-add's latency while the copy
// streams in. A step takes the tiles HEAD_GROUP at a time (the larger of HEAD_V and HEAD_REST_V).
#if defined(__AVX512F__)
constexpr int HEAD_IN = 5, HEAD_V = 4, HEAD_REST_IN = 4, HEAD_REST_V = 4, HEAD_V_ONE = 8;
#else
constexpr int HEAD_IN = 5, HEAD_V = 1, HEAD_REST_IN = 2, HEAD_REST_V = 2, HEAD_V_ONE = 4;
#endif
constexpr int HEAD_GROUP = HEAD_V > HEAD_REST_V ? HEAD_V : HEAD_REST_V;

// head_kernel over the V tiles at ``w`` for the I inputs xs[i], F tiles a call (F divides V).
template <int I, int V, int F>
inline void head_calls(const float* w, const float* const* xs, int64_t k, float* const* os) {
    float* o[I];
    PG_UNROLL
    for (int v = 0; v < V; v += F) {
        PG_UNROLL
        for (int j = 0; j < I; ++j) o[j] = os[j] + HEAD_TILE * v;
        head_kernel<I, F>(w + v * k * HEAD_TILE, xs, k, o);
    }
}

// head_calls for 0 < left <= I inputs (the last few rows), the template chosen for ``left``.
template <int V, int F, int I = HEAD_REST_IN>
inline void head_rest(int left, const float* w, const float* const* x, int64_t k, float* const* out) {
    if constexpr (I > 0) {
        if (left == I) return head_calls<I, V, F>(w, x, k, out);
        head_rest<V, F, I - 1>(left, w, x, k, out);
    }
}

// The V tiles at ``w`` for all n inputs, into out[i] + r (the tiles' first vocabulary row r): HEAD_IN inputs a
// call, then the rest HEAD_REST_IN at a time. Which inputs and tiles share a call does not change an output.
template <int V>
inline void head_tiles_for(const float* w, const float* const* x, int64_t n, int64_t k, int64_t r, float* const* y) {
    constexpr int F = V < HEAD_V ? V : HEAD_V, FR = V < HEAD_REST_V ? V : HEAD_REST_V;
    const float* xs[HEAD_IN];
    float* os[HEAD_IN];
    int64_t b = 0;
    for (; b + HEAD_IN <= n; b += HEAD_IN) {
        PG_UNROLL
        for (int j = 0; j < HEAD_IN; ++j) xs[j] = x[b + j], os[j] = y[b + j] + r;
        head_calls<HEAD_IN, V, F>(w, xs, k, os);
    }
    for (; b < n; b += HEAD_REST_IN) {
        const int left = static_cast<int>(n - b < HEAD_REST_IN ? n - b : HEAD_REST_IN);
        for (int j = 0; j < left; ++j) xs[j] = x[b + j], os[j] = y[b + j] + r;
        head_rest<V, FR>(left, w, xs, k, os);
    }
}

// y[i][0..vocab) over the tiles [t0, t1) of the packed head for the n inputs x[i] (each k long): the tiles in
// groups of HEAD_GROUP (HEAD_V_ONE for one input), then one at a time; a tile past the vocabulary's end (its
// padding rows) through a buffer.
inline void head_rows(const float* packed, const float* const* x, int64_t n, int64_t k, int64_t vocab, int64_t t0,
                      int64_t t1, float* const* y) {
    const int64_t whole = vocab / HEAD_TILE;  // tiles all inside the vocabulary
    const int64_t full_end = t1 < whole ? t1 : whole;
    int64_t t = t0;
    if (n == 1)
        for (; t + HEAD_V_ONE <= full_end; t += HEAD_V_ONE) {
            float* one[1] = {y[0] + t * HEAD_TILE};
            head_kernel<1, HEAD_V_ONE>(packed + t * k * HEAD_TILE, x, k, one);
        }
    for (; t + HEAD_GROUP <= full_end; t += HEAD_GROUP)
        head_tiles_for<HEAD_GROUP>(packed + t * k * HEAD_TILE, x, n, k, t * HEAD_TILE, y);
    for (; t < full_end; ++t) head_tiles_for<1>(packed + t * k * HEAD_TILE, x, n, k, t * HEAD_TILE, y);
    if (t < t1) {  // the last tile, partly past the vocabulary: its outputs into a buffer, the real ones copied
        float buf[HEAD_TILE];
        float* one[1] = {buf};
        for (int64_t b = 0; b < n; ++b) {
            head_kernel<1, 1>(packed + t * k * HEAD_TILE, x + b, k, one);
            for (int64_t o = 0; o < vocab - t * HEAD_TILE; ++o) y[b][t * HEAD_TILE + o] = buf[o];
        }
    }
}

// Tiles a thread of the step's team claims at a time (a multiple of HEAD_GROUP and HEAD_V_ONE): about two hundred
// chunks of GPT-2's vocabulary, so the team's shares end within a chunk of each other (16 tiles of a 768-wide
// head are 768 KB of weights).
constexpr int64_t HEAD_CHUNK = 16;

}  // namespace

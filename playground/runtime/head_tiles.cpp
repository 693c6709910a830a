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
    for (int i = 0; i < I; ++i)
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t c = 0; c < k; ++c) {
        __m512 wv[V];
        for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_ps(w + (v * k + c) * HEAD_TILE);
        for (int i = 0; i < I; ++i) {
            const __m512 xb = _mm512_set1_ps(x[i][c]);
            for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(wv[v], xb, acc[i][v]);
        }
    }
    for (int i = 0; i < I; ++i)
        for (int v = 0; v < V; ++v) _mm512_storeu_ps(out[i] + HEAD_TILE * v, acc[i][v]);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[I][V][2];
    for (int i = 0; i < I; ++i)
        for (int v = 0; v < V; ++v) acc[i][v][0] = acc[i][v][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < k; ++c) {
        for (int i = 0; i < I; ++i) {
            const __m256 xb = _mm256_set1_ps(x[i][c]);
            for (int v = 0; v < V; ++v) {
                const float* p = w + (v * k + c) * HEAD_TILE;
                acc[i][v][0] = _mm256_fmadd_ps(_mm256_loadu_ps(p), xb, acc[i][v][0]);
                acc[i][v][1] = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8), xb, acc[i][v][1]);
            }
        }
    }
    for (int i = 0; i < I; ++i)
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
// One input alone takes 8 tiles: eight chains to hide the multiply-add's latency while the copy streams in.
#if defined(__AVX512F__)
constexpr int HEAD_IN = 5, HEAD_V = 4, HEAD_V_ONE = 8;
#else
constexpr int HEAD_IN = 2, HEAD_V = 2, HEAD_V_ONE = 4;
#endif

// head_kernel<I, V> for 0 < left <= I inputs (the last few rows), the template chosen for ``left``.
template <int V, int I = HEAD_IN>
inline void head_rest(int left, const float* w, const float* const* x, int64_t k, float* const* out) {
    if constexpr (I > 0) {
        if (left == I) return head_kernel<I, V>(w, x, k, out);
        head_rest<V, I - 1>(left, w, x, k, out);
    }
}

// The V tiles at ``w`` for all n inputs, into out[i] + r (the tiles' first vocabulary row r).
template <int V>
inline void head_tiles_for(const float* w, const float* const* x, int64_t n, int64_t k, int64_t r, float* const* y) {
    const float* xs[HEAD_IN];
    float* os[HEAD_IN];
    int64_t b = 0;
    for (; b + HEAD_IN <= n; b += HEAD_IN) {
        for (int j = 0; j < HEAD_IN; ++j) xs[j] = x[b + j], os[j] = y[b + j] + r;
        head_kernel<HEAD_IN, V>(w, xs, k, os);
    }
    const int left = static_cast<int>(n - b);
    for (int j = 0; j < left; ++j) xs[j] = x[b + j], os[j] = y[b + j] + r;
    if (left > 0) head_rest<V>(left, w, xs, k, os);
}

// y[i][0..vocab) over the tiles [t0, t1) of the packed head for the n inputs x[i] (each k long): the tiles in
// groups of V, then one at a time; a tile past the vocabulary's end (its padding rows) through a buffer.
inline void head_rows(const float* packed, const float* const* x, int64_t n, int64_t k, int64_t vocab, int64_t t0,
                      int64_t t1, float* const* y) {
    const int64_t whole = vocab / HEAD_TILE;  // tiles all inside the vocabulary
    const int64_t full_end = t1 < whole ? t1 : whole;
    int64_t t = t0;
    if (n == 1)
        for (; t + HEAD_V_ONE <= full_end; t += HEAD_V_ONE)
            head_tiles_for<HEAD_V_ONE>(packed + t * k * HEAD_TILE, x, n, k, t * HEAD_TILE, y);
    for (; t + HEAD_V <= full_end; t += HEAD_V)
        head_tiles_for<HEAD_V>(packed + t * k * HEAD_TILE, x, n, k, t * HEAD_TILE, y);
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

// Tiles a thread of the step's team claims at a time (a multiple of HEAD_V and HEAD_V_ONE): about two hundred
// chunks of GPT-2's vocabulary, so the team's shares end within a chunk of each other (16 tiles of a 768-wide
// head are 768 KB of weights).
constexpr int64_t HEAD_CHUNK = 16;

}  // namespace

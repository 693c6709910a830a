// One-row matrix products for decoding: y = W x + b, W stored (out, in) row-major.
//
// Built by playground/runtime/native_gemv.py with this machine's compiler (-O3 -march=native) and
// loaded with ctypes; no torch headers, so the build takes a second or two instead of a minute.
// Decoding multiplies every weight matrix by a single row, so the only thing that matters is how
// fast the weights stream from memory: each thread takes a contiguous block of output rows, reads each
// weight row exactly once, front to back, and allocates nothing. Whether a thread reads four rows side by
// side (four streams, every load of x serving four rows) or one row after the other (one stream, as
// llama.cpp's ggml_vec_dot) is the machine's to say: on one 2-core EPYC four streams reached the memory's
// bandwidth, on another they left half of it unused (docs/benchmarks.md). runtime/weight_streams.py times
// both once per machine and sets it here (pg_set_rows_at_once); a row's arithmetic is the same either way,
// so the choice changes no number. bfloat16 weights are
// widened to float32 in registers, or, where the compiler targets AVX512-BF16, multiplied as they are by
// the CPU's bfloat16 dot-product instruction (float32 sums either way). int8 weights times an activation row
// quantized to int8 in the call ("int8-dynamic") use the CPU's int8 dot-product instruction (VNNI) where the
// compiler targets it, with int32 sums up to one float scale per output.
//
// The OpenMP team is torch's own: the library links the libgomp that torch loaded, so its threads
// are the ones ATen's kernels use and no second pool spins against them.

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

// Before each loop over a kernel's small arrays (accumulators and loaded rows, and the input and output pointers
// a call is handed): unrolled whole, every index is a constant and GCC keeps each entry in a register. Left
// rolled, GCC may keep the array in memory and store every accumulator to the stack at every step of the loop
// around it; the arithmetic is the same either way (docs/benchmarks.md measures what the stores cost).
#define PG_UNROLL _Pragma("GCC unroll 32")

namespace {

constexpr int64_t ROWS = 4;  // weight rows read side by side; the unit of a thread's share of rows

int rows_at_once = ROWS;  // ROWS or 1: the rows a thread reads at once (pg_set_rows_at_once; see the header)

// The rows [lo, hi) of thread t of nt: one contiguous block per thread, a multiple of ROWS long.
inline void thread_rows(int64_t n, int t, int nt, int64_t* lo, int64_t* hi) {
    int64_t blocks = (n + ROWS - 1) / ROWS;
    *lo = blocks * t / nt * ROWS;
    *hi = blocks * (t + 1) / nt * ROWS;
    if (*hi > n) *hi = n;
    if (*lo > n) *lo = n;
}

// block(lo, hi) over each thread's rows of n, on ``threads`` of torch's OpenMP team (1: the caller alone).
template <typename Block>
inline void split_rows(int64_t n, int threads, Block&& block) {
    if (threads <= 1) {
        block(int64_t{0}, n);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int64_t lo, hi;
        thread_rows(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (lo < hi) block(lo, hi);
    }
}

inline float bf16_to_float(uint16_t h) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even, as torch's .to(bfloat16) does
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
}

#if defined(__AVX512F__)
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#elif defined(__AVX2__) && defined(__FMA__)
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

// int8 weights (weight-only int8) widened to float32 in registers: sign-extend, convert, then the same FMA loop.
#if defined(__AVX512F__)
inline __m512 load16(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#elif defined(__AVX2__) && defined(__FMA__)
inline __m256 load8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
#endif

// acc + a·b for the columns past the vectors: one fused multiply-add where the CPU has it, written out so every
// kernel's tail rounds alike (left to the compiler, whether it fuses the two differs between the places a
// kernel is inlined under some tunings, e.g. -march=znver4: a row's logits then depended on its batch).
inline float madd(float a, float b, float acc) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    return fmaf(a, b, acc);
#else
    return acc + a * b;
#endif
}

inline float scalar(const float* p) { return *p; }
inline float scalar(const uint16_t* p) { return bf16_to_float(*p); }
inline float scalar(const int8_t* p) { return static_cast<float>(*p); }

// out[r] = dot(w rows r0..r0+R-1, x) for R <= ROWS rows of length k.
template <typename W, int R>
inline void dot_rows(const W* w, const float* x, int64_t k, float* out) {
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 acc[R][2];
    PG_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (; i + 32 <= k; i += 32) {
        __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            acc[r][0] = _mm512_fmadd_ps(load16(w + r * k + i), x0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(load16(w + r * k + i + 16), x1, acc[r][1]);
        }
    }
    PG_UNROLL
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[R][2];
    PG_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (; i + 16 <= k; i += 16) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            acc[r][0] = _mm256_fmadd_ps(load8(w + r * k + i), x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(load8(w + r * k + i + 8), x1, acc[r][1]);
        }
    }
    PG_UNROLL
    for (int r = 0; r < R; ++r) out[r] = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
#else
    for (int r = 0; r < R; ++r) out[r] = 0.0f;
#endif
    for (; i < k; ++i)
        for (int r = 0; r < R; ++r) out[r] = madd(scalar(w + r * k + i), x[i], out[r]);
}

#if defined(__AVX512BF16__)
// bfloat16 weights times bfloat16 activations, pairs multiplied and summed in float32 by the CPU's own
// bfloat16 dot-product instruction: half the instructions of widening each weight to float32 first.
template <int R>
inline void dot_rows_bf16(const uint16_t* w, const uint16_t* x, int64_t k, float* out) {
    int64_t i = 0;
    __m512 acc[R][2];
    PG_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (; i + 64 <= k; i += 64) {
        __m512bh x0 = (__m512bh)_mm512_loadu_si512(x + i), x1 = (__m512bh)_mm512_loadu_si512(x + i + 32);
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)_mm512_loadu_si512(w + r * k + i), x0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)_mm512_loadu_si512(w + r * k + i + 32), x1);
        }
    }
    PG_UNROLL
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
    for (; i < k; ++i)
        for (int r = 0; r < R; ++r) out[r] = madd(bf16_to_float(w[r * k + i]), bf16_to_float(x[i]), out[r]);
}

void gemv_bf16_dot(const uint16_t* w, const uint16_t* x, const float* bias, float* y, int64_t n, int64_t k,
                   int threads) {
    auto block = [&](int64_t lo, int64_t hi) {
        int64_t r = lo;
        if (rows_at_once == ROWS)
            for (; r + ROWS <= hi; r += ROWS) dot_rows_bf16<ROWS>(w + r * k, x, k, y + r);
        for (; r < hi; ++r) dot_rows_bf16<1>(w + r * k, x, k, y + r);
        if (bias)
            for (int64_t j = lo; j < hi; ++j) y[j] += bias[j];
    };
    split_rows(n, threads, block);
}
#endif

template <typename W>
inline void rows_block(const W* w, const float* x, const float* bias, int64_t k, int64_t lo, int64_t hi, float* y) {
    int64_t r = lo;
    if (rows_at_once == ROWS)
        for (; r + ROWS <= hi; r += ROWS) dot_rows<W, ROWS>(w + r * k, x, k, y + r);
    for (; r < hi; ++r) dot_rows<W, 1>(w + r * k, x, k, y + r);
    if (bias)
        for (int64_t j = lo; j < hi; ++j) y[j] += bias[j];
}

template <typename W>
void gemv(const W* w, const float* x, const float* bias, float* y, int64_t n, int64_t k, int threads) {
    split_rows(n, threads, [&](int64_t lo, int64_t hi) { rows_block(w, x, bias, k, lo, hi, y); });
}

// ---------------------------------------------------------------------------------------------
// int8 weights × int8 activations (the "int8-dynamic" precision): y = (Σ xq·q) · r · s + b.
//
// The activation row is quantized here, in one pass over x, as engine/quantize.py's quantize_activations
// does it in torch: r = max|x| / 127 (1 for an all-zero row), xq = round-half-even(x / r) clamped to
// ±127. The CPU's int8 dot product (vpdpbusd) multiplies unsigned by signed bytes, so the row is stored
// as xu = xq + 128 and each output subtracts 128 · Σ_k q[row, k] (the weight's row sums, computed once
// by the caller), as ONNX Runtime's MLAS and oneDNN do. Every sum is int32 and exact up to the scale.

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define PG_I8_DOT_BITS 512
#elif defined(__AVXVNNI__) && defined(__AVX2__)
#define PG_I8_DOT_BITS 256
#elif defined(__AVX2__)
// AVX2 without a dot-product instruction: the bytes widened to 16 bits and multiplied in pairs into 32 bits
// (vpmaddwd), 16 products an instruction where vpdpbusd makes 32; the same exact int32 sums.
#define PG_I8_DOT_BITS 256
#define PG_I8_DOT_WIDENED 1
#else
#define PG_I8_DOT_BITS 0  // no int8 dot-product instruction targeted: the callers keep torch's kernels
#endif

#if PG_I8_DOT_BITS == 512
// out[r] = Σ_i xu[i] · w[r, i] for R <= ROWS rows of length k; the last partial 64 bytes by masked loads
// (masked-off bytes read as zero and never fault, so no row is read past its end).
template <int R>
inline void dot_rows_u8s8(const int8_t* w, const uint8_t* xu, int64_t k, int32_t* out) {
    __m512i acc[R][2];
    PG_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + 128 <= k; i += 128) {
        __m512i x0 = _mm512_loadu_si512(xu + i), x1 = _mm512_loadu_si512(xu + i + 64);
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x0, _mm512_loadu_si512(w + r * k + i));
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x1, _mm512_loadu_si512(w + r * k + i + 64));
        }
    }
    for (int h = 0; i < k; ++h, i += 64) {
        int64_t left = k - i;
        __mmask64 m = left >= 64 ? ~0ULL : (1ULL << left) - 1;
        __m512i xv = _mm512_maskz_loadu_epi8(m, xu + i);
        PG_UNROLL
        for (int r = 0; r < R; ++r)
            acc[r][h] = _mm512_dpbusd_epi32(acc[r][h], xv, _mm512_maskz_loadu_epi8(m, w + r * k + i));
    }
    PG_UNROLL
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_epi32(_mm512_add_epi32(acc[r][0], acc[r][1]));
}
#elif PG_I8_DOT_BITS == 256
inline int32_t hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

template <int R>
inline void dot_rows_u8s8(const int8_t* w, const uint8_t* xu, int64_t k, int32_t* out) {
    __m256i acc[R][2];
    PG_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    int64_t i = 0;
#if defined(PG_I8_DOT_WIDENED)
    for (; i + 32 <= k; i += 32) {  // xu · w <= 255 · 128 a product: a pair's sum fits vpmaddwd's int32 exactly
        const __m128i* xp = reinterpret_cast<const __m128i*>(xu + i);
        const __m256i x0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(xp)), x1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(xp + 1));
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m128i* wr = reinterpret_cast<const __m128i*>(w + r * k + i);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x0, _mm256_cvtepi8_epi16(_mm_loadu_si128(wr))));
            acc[r][1] =
                _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x1, _mm256_cvtepi8_epi16(_mm_loadu_si128(wr + 1))));
        }
    }
#else
    for (; i + 64 <= k; i += 64) {
        __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xu + i));
        __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xu + i + 32));
        PG_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m256i* wr = reinterpret_cast<const __m256i*>(w + r * k + i);
            acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], x0, _mm256_loadu_si256(wr));
            acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], x1, _mm256_loadu_si256(wr + 1));
        }
    }
#endif
    PG_UNROLL
    for (int r = 0; r < R; ++r) out[r] = hsum8_epi32(_mm256_add_epi32(acc[r][0], acc[r][1]));
    for (; i < k; ++i)
        for (int r = 0; r < R; ++r) out[r] += static_cast<int32_t>(xu[i]) * w[r * k + i];
}
#endif

// xu[i] = round-half-even(x[i] / r) + 128 with r = max|x| / 127 (1 when that is not > 0); returns r.
// Division, not a multiplication by 1/r, and the CPU's default rounding: torch's x / r and torch.round.
inline float quantize_row_u8(const float* x, int64_t k, uint8_t* xu) {
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
        float a = x[i] < 0 ? -x[i] : x[i];
        if (a > amax) amax = a;
    }
    float r = amax / 127.0f;
    if (!(r > 0.0f)) r = 1.0f;
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 rv = _mm512_set1_ps(r);
    __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127), off = _mm512_set1_epi32(128);
    for (; i + 16 <= k; i += 16) {
        __m512i q = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(x + i), rv));
        q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), off);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(xu + i), _mm512_cvtepi32_epi8(q));
    }
#endif
    for (; i < k; ++i) {
        float q = nearbyintf(x[i] / r);
        q = q >= -127.0f ? (q > 127.0f ? 127.0f : q) : -127.0f;  // NaN to -127 too, as the vector loop does
        xu[i] = static_cast<uint8_t>(static_cast<int32_t>(q) + 128);
    }
    return r;
}

#if PG_I8_DOT_BITS
// Rows lo..hi: the exact int32 sums Σ xq·q into ``sums`` when it is given, else y = sum · (r · s) + b.
inline void i8_rows_block(const int8_t* w, const uint8_t* xu, const int32_t* row_sums, float r, const float* scale,
                          const float* bias, int64_t k, int64_t lo, int64_t hi, float* y, int32_t* sums) {
    int32_t acc[ROWS];
    const int64_t at_once = rows_at_once;
    for (int64_t j = lo; j < hi;) {
        int64_t take = at_once == ROWS && hi - j >= ROWS ? ROWS : 1;
        if (take == ROWS)
            dot_rows_u8s8<ROWS>(w + j * k, xu, k, acc);
        else
            dot_rows_u8s8<1>(w + j * k, xu, k, acc);
        for (int64_t t = 0; t < take; ++t, ++j) {
            int32_t s = acc[t] - 128 * row_sums[j];
            if (sums) {
                sums[j] = s;
                continue;
            }
            float v = static_cast<float>(s) * (r * scale[j]);  // torch: int32 sums times the float (r · s)
            // v rounded before the bias is added, as torch's two operations do: a fused multiply-add, which the
            // compiler would otherwise form, rounds once and differs from them in the last bit.
            asm("" : "+x"(v));
            y[j] = bias ? v + bias[j] : v;
        }
    }
}

void gemv_i8_rows(const float* x, const int8_t* w, const int32_t* row_sums, const float* scale, const float* bias,
                  float* y, int32_t* sums, float* r_out, int64_t n, int64_t k, int threads, uint8_t* scratch) {
    float r = quantize_row_u8(x, k, scratch);
    if (r_out) *r_out = r;
    split_rows(n, threads,
               [&](int64_t lo, int64_t hi) { i8_rows_block(w, scratch, row_sums, r, scale, bias, k, lo, hi, y, sums); });
}
#endif

// The "int8-dynamic" one-row product: x (k) float32, w (n, k) int8, row_sums (n) = Σ_k w[row, k], scale (n),
// bias (n) or null, y (n); ``scratch`` holds k bytes (the quantized row). Returns false, computing nothing,
// where the build has no int8 dot-product instruction.
inline bool gemv_i8_dynamic(const float* x, const int8_t* w, const int32_t* row_sums, const float* scale,
                            const float* bias, float* y, int64_t n, int64_t k, int threads, uint8_t* scratch) {
#if PG_I8_DOT_BITS
    gemv_i8_rows(x, w, row_sums, scale, bias, y, nullptr, nullptr, n, k, threads, scratch);
    return true;
#else
    (void)x, (void)w, (void)row_sums, (void)scale, (void)bias, (void)y, (void)n, (void)k, (void)threads, (void)scratch;
    return false;
#endif
}

// Weight-only int8, float32 activations: y[j] = (Σ_i x[i] · w[j, i]) · scale[j] + bias[j], float32 sums.
inline void i8w_rows_block(const int8_t* w, const float* x, const float* scale, const float* bias, int64_t k,
                           int64_t lo, int64_t hi, float* y) {
    int64_t r = lo;
    if (rows_at_once == ROWS)
        for (; r + ROWS <= hi; r += ROWS) dot_rows<int8_t, ROWS>(w + r * k, x, k, y + r);
    for (; r < hi; ++r) dot_rows<int8_t, 1>(w + r * k, x, k, y + r);
    for (int64_t j = lo; j < hi; ++j) y[j] = bias ? y[j] * scale[j] + bias[j] : y[j] * scale[j];
}

void gemv_i8_weights(const float* x, const int8_t* w, const float* scale, const float* bias, float* y, int64_t n,
                     int64_t k, int threads) {
    split_rows(n, threads, [&](int64_t lo, int64_t hi) { i8w_rows_block(w, x, scale, bias, k, lo, hi, y); });
}

}  // namespace

extern "C" {

// The weight rows a thread reads at once in every one-row product of this library: 1, or else 4.
void pg_set_rows_at_once(int rows) { rows_at_once = rows == 1 ? 1 : ROWS; }
int pg_rows_at_once() { return static_cast<int>(rows_at_once); }

// Which vector width this build uses: 512, 256 or 0 (scalar).
int pg_vector_bits() {
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX2__) && defined(__FMA__)
    return 256;
#else
    return 0;
#endif
}

// float32: x (k), w (n, k), bias (n) or null, y (n).
void pg_gemv_f32(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t k, int threads) {
    gemv(w, x, bias, y, n, k, threads);
}

// bfloat16 weights, activations and bias, float32 accumulation; ``scratch`` holds k + 2n floats
// (x, y and the bias in float32), so the call allocates nothing.
void pg_gemv_bf16(const uint16_t* x, const uint16_t* w, const uint16_t* bias, uint16_t* y, float* scratch, int64_t n,
                  int64_t k, int threads) {
    float* xf = scratch;
    float* yf = scratch + k;
    float* bf = bias ? scratch + k + n : nullptr;
#if !defined(__AVX512BF16__)
    for (int64_t i = 0; i < k; ++i) xf[i] = bf16_to_float(x[i]);
#endif
    if (bias)
        for (int64_t j = 0; j < n; ++j) bf[j] = bf16_to_float(bias[j]);
#if defined(__AVX512BF16__)
    (void)xf;  // the dot-product instruction reads x as it is
    gemv_bf16_dot(w, x, bf, yf, n, k, threads);
#else
    gemv(w, xf, bf, yf, n, k, threads);
#endif
    for (int64_t j = 0; j < n; ++j) y[j] = float_to_bf16(yf[j]);
}

// The width of the int8 products this build makes: 512 (AVX512-VNNI), 256 (AVX-VNNI, or AVX2's 16-bit pairs) or 0
// (none: pg_gemv_i8_dynamic and pg_gemv_i8_sums compute nothing and return 0).
int pg_i8_dot_bits() { return PG_I8_DOT_BITS; }

// int8-dynamic: see gemv_i8_dynamic. Returns 1 if it computed y, 0 where the build has no int8 dot product.
int pg_gemv_i8_dynamic(const float* x, const int8_t* w, const int32_t* row_sums, const float* scale,
                       const float* bias, float* y, int64_t n, int64_t k, int threads, uint8_t* scratch) {
    return gemv_i8_dynamic(x, w, row_sums, scale, bias, y, n, k, threads, scratch) ? 1 : 0;
}

// The same product's exact integer part, for checking: sums (n) = Σ_k xq[k] · w[row, k] and *r_out = r.
int pg_gemv_i8_sums(const float* x, const int8_t* w, const int32_t* row_sums, int32_t* sums, float* r_out, int64_t n,
                    int64_t k, int threads, uint8_t* scratch) {
#if PG_I8_DOT_BITS
    gemv_i8_rows(x, w, row_sums, nullptr, nullptr, nullptr, sums, r_out, n, k, threads, scratch);
    return 1;
#else
    (void)x, (void)w, (void)row_sums, (void)sums, (void)r_out, (void)n, (void)k, (void)threads, (void)scratch;
    return 0;
#endif
}

// Weight-only int8, float32: x (k), w (n, k) int8, scale (n), bias (n) or null, y (n).
void pg_gemv_i8w_f32(const float* x, const int8_t* w, const float* scale, const float* bias, float* y, int64_t n,
                     int64_t k, int threads) {
    gemv_i8_weights(x, w, scale, bias, y, n, k, threads);
}

// Weight-only int8, bfloat16 activations, scales, bias and output, float32 accumulation; ``scratch`` holds
// k + 2n floats (x, y and the scales in float32). The product times the scale is rounded to bfloat16 before
// the bias is added, as torch's int8 kernel followed by its bias add does.
void pg_gemv_i8w_bf16(const uint16_t* x, const int8_t* w, const uint16_t* scale, const uint16_t* bias, uint16_t* y,
                      float* scratch, int64_t n, int64_t k, int threads) {
    float* xf = scratch;
    float* yf = scratch + k;
    float* sf = scratch + k + n;
    for (int64_t i = 0; i < k; ++i) xf[i] = bf16_to_float(x[i]);
    for (int64_t j = 0; j < n; ++j) sf[j] = bf16_to_float(scale[j]);
    gemv_i8_weights(xf, w, sf, nullptr, yf, n, k, threads);
    for (int64_t j = 0; j < n; ++j) {
        uint16_t v = float_to_bf16(yf[j]);
        y[j] = bias ? float_to_bf16(bf16_to_float(v) + bf16_to_float(bias[j])) : v;
    }
}
}

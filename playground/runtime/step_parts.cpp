// The elementwise parts of a decode step (decode_step.cpp): exp, rounding to the activations' dtype,
// LayerNorm, bias and activation. Included by decode_step.cpp after one_row_gemv.cpp.

#include <math.h>

namespace {

// expf for a vector loop: 2^n · p(r), r = x - n·ln2 in two parts, a degree-6 polynomial (a few ulp);
// written so that the compiler vectorises it, where libm's expf would run one value at a time.
inline float fast_exp(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);
    // round to nearest by the 1.5·2^23 trick: libm's rounding calls would keep the loop scalar
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = fmaf(n, -0.693145751953125f, x);
    r = fmaf(n, -1.428606765330187e-06f, r);
    float p = 1.0f / 720.0f;
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

inline float round_to(float v, bool bf16) { return bf16 ? bf16_to_float(float_to_bf16(v)) : v; }

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) { return bf16_to_float(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) { p[i] = float_to_bf16(v); }

// out = LayerNorm(x) (rounded as the model's dtype stores it), also as bfloat16 in outh when wanted.
template <typename T>
void layer_norm(const float* x, const T* scale, const T* shift, int64_t d, float eps, bool bf16, float* out,
                uint16_t* outh) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; ++i) sum += x[i];
    float mean = static_cast<float>(sum / d);
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < d; ++i) sq += static_cast<double>(x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf(static_cast<float>(sq / d) + eps);
    for (int64_t i = 0; i < d; ++i) out[i] = round_to((x[i] - mean) * inv * load(scale, i) + load(shift, i), bf16);
    if (outh)
        for (int64_t i = 0; i < d; ++i) outh[i] = float_to_bf16(out[i]);
}

// y = activation(round(y + bias)), rounded, over n values: each step a loop of its own, which the compiler vectorises.
// Not inlined: inside the step's loop over rows the compiler left its loops scalar (GELU's exp included).
template <typename T>
__attribute__((noinline)) void bias_activate(float* y, const T* bias, int64_t n, int64_t kind, bool bf16) {
    if (bias)
        for (int64_t j = 0; j < n; ++j) y[j] += load(bias, j);
    if (bf16)
        for (int64_t j = 0; j < n; ++j) y[j] = round_to(y[j], true);
    if (kind == 1) {  // ReLU
        for (int64_t j = 0; j < n; ++j) y[j] = y[j] > 0.0f ? y[j] : 0.0f;
    } else {  // GELU, tanh form: 0.5·v·(1 + tanh(u)) with 1 + tanh(u) = 2 - 2 / (exp(2u) + 1)
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
            const float v = y[j], u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
            y[j] = v * (1.0f - 1.0f / (fast_exp(2.0f * u) + 1.0f));
        }
    }
    if (bf16)
        for (int64_t j = 0; j < n; ++j) y[j] = round_to(y[j], true);
}

}  // namespace

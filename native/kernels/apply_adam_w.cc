#include "kernels/apply_adam_w.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <immintrin.h>
#include <type_traits>

#include "kernels/element.h"
#include "kernels/row.h"

namespace oao {
namespace {

// The double of the shortest decimal that rounds to `value`: 0.999f is 0.99900001287..., whose
// 1 - beta2 is 1.3e-5 off torch's 1 - 0.999; a float32 attribute holds the decimal the user wrote
// (up to 6 significant digits), and torch computes with that decimal's double.
double written(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text - 1, value).ptr;
  *end = '\0';
  return std::strtod(text, nullptr);
}

}  // namespace

AdamWScalars adam_w_scalars(double step, double lr, float beta1, float beta2, float weight_decay, float eps,
                            bool maximize) {
  const double b1 = written(beta1), b2 = written(beta2);
  return AdamWScalars{static_cast<float>(1.0 - lr * written(weight_decay)),
                      static_cast<float>(1.0 - b1),
                      static_cast<float>(b2),
                      static_cast<float>(1.0 - b2),
                      static_cast<float>(std::sqrt(1.0 - std::pow(b2, step))),
                      static_cast<float>(-(lr / (1.0 - std::pow(b1, step)))),
                      eps,
                      maximize};
}

namespace {

// torch's CPU kernels, op by op (mul_, lerp_, mul_ and addcmul_, sqrt and div and add_, addcdiv_),
// each rounded to float32 as torch's float32 tensors round them, over float32 arrays: plain loops
// that the compiler vectorizes (no FMA contraction: see CMakeLists.txt), so every ISA gives the
// same bits.
__attribute__((always_inline)) inline void update_floats(float* p, float* m, float* v, const float* g, int64_t n,
                                                         const AdamWScalars& s) {
  const float w = s.lerp_weight, one_minus_w = 1.f - s.lerp_weight;
  const float sign = s.maximize ? -1.f : 1.f;
  const auto step = [&](int64_t i, bool small_weight) {
    const float gi = g[i] * sign;
    const float pi = p[i] * s.decay;
    // torch.lerp's two forms, chosen by the weight.
    const float mi = small_weight ? m[i] + w * (gi - m[i]) : gi - (gi - m[i]) * one_minus_w;
    const float vi = v[i] * s.beta2 + s.rest2 * gi * gi;
    const float denom = std::sqrt(vi) / s.correction2_sqrt + s.eps;
    p[i] = pi + s.neg_step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  };
  if (std::fabs(w) < 0.5f) {
    for (int64_t i = 0; i < n; ++i) step(i, true);
  } else {
    for (int64_t i = 0; i < n; ++i) step(i, false);
  }
}

template <class From, class To>
__attribute__((always_inline)) inline void convert(const From* from, To* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = from_float<To>(to_float(from[i]));
}

// dst[0, n) = src with streaming stores (SSE, in every x86-64) from dst's first 16-byte boundary:
// outputs too large to stay in cache skip the read for ownership, 12 of ApplyAdamW's 40 bytes
// per float32 element out of place.
inline void stream_floats(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 16 != 0; ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
}

// float32 in the output buffers themselves (copied there first unless in place). Otherwise, and
// for float32 with streaming stores (kStream), chunks widened to float32 on the stack, updated,
// and rounded back (an output may be its input's buffer: each chunk is read before it is
// written), each a loop the compiler vectorizes where element by element it would not.
template <bool kStream, class TP, class T>
__attribute__((always_inline)) inline void update(const TP* param, const TP* exp_avg, const TP* exp_avg_sq,
                                                  const T* grad, const AdamWScalars& s, TP* param_out,
                                                  TP* exp_avg_out, TP* exp_avg_sq_out, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<TP, float> && std::is_same_v<T, float> && !kStream) {
    const int64_t n = end - begin;
    const auto take = [&](const float* in, float* out) {
      if (in != out) std::copy_n(in + begin, n, out + begin);  // nothing to copy when in place
    };
    take(param, param_out);
    take(exp_avg, exp_avg_out);
    take(exp_avg_sq, exp_avg_sq_out);
    update_floats(param_out + begin, exp_avg_out + begin, exp_avg_sq_out + begin, grad + begin, n, s);
    return;
  }
  constexpr int64_t kChunk = 512;
  float p[kChunk], m[kChunk], v[kChunk], g[kChunk];
  for (int64_t c = begin; c < end; c += kChunk) {
    const int64_t n = std::min(kChunk, end - c);
    convert(param + c, p, n);
    convert(exp_avg + c, m, n);
    convert(exp_avg_sq + c, v, n);
    convert(grad + c, g, n);
    update_floats(p, m, v, g, n, s);
    if constexpr (kStream && std::is_same_v<TP, float>) {
      stream_floats(p, param_out + c, n);
      stream_floats(m, exp_avg_out + c, n);
      stream_floats(v, exp_avg_sq_out + c, n);
    } else {
      convert(p, param_out + c, n);
      convert(m, exp_avg_out + c, n);
      convert(v, exp_avg_sq_out + c, n);
    }
  }
  if constexpr (kStream) _mm_sfence();
}

template <bool kStream, class TP, class T>
void update_baseline(const TP* param, const TP* exp_avg, const TP* exp_avg_sq, const T* grad, const AdamWScalars& s,
                     TP* param_out, TP* exp_avg_out, TP* exp_avg_sq_out, int64_t begin, int64_t end) {
  update<kStream>(param, exp_avg, exp_avg_sq, grad, s, param_out, exp_avg_out, exp_avg_sq_out, begin, end);
}

template <bool kStream, class TP, class T>
OAO_AVX2_TARGET void update_avx2(const TP* param, const TP* exp_avg, const TP* exp_avg_sq, const T* grad,
                                 const AdamWScalars& s, TP* param_out, TP* exp_avg_out, TP* exp_avg_sq_out,
                                 int64_t begin, int64_t end) {
  update<kStream>(param, exp_avg, exp_avg_sq, grad, s, param_out, exp_avg_out, exp_avg_sq_out, begin, end);
}

}  // namespace

template <class TP, class T>
void apply_adam_w(const TP* param, const TP* exp_avg, const TP* exp_avg_sq, const T* grad, const AdamWScalars& s,
                  TP* param_out, TP* exp_avg_out, TP* exp_avg_sq_out, int64_t count, const Parallel& parallel) {
  // Elements are independent: any split gives the same bits; blocks of at least 32K elements.
  const size_t blocks = block_count(static_cast<size_t>(count), 1);
  // Streaming stores for float32 outputs past kStreamingBytes, none its input's buffer.
  const bool stream = std::is_same_v<TP, float> && param_out != param && exp_avg_out != exp_avg &&
                      exp_avg_sq_out != exp_avg_sq && static_cast<size_t>(count) * sizeof(TP) >= kStreamingBytes;
  const auto block_fn = use_avx2() ? (stream ? update_avx2<true, TP, T> : update_avx2<false, TP, T>)
                                   : (stream ? update_baseline<true, TP, T> : update_baseline<false, TP, T>);
  parallel.for_each(blocks, [&](size_t b) {
    block_fn(param, exp_avg, exp_avg_sq, grad, s, param_out, exp_avg_out, exp_avg_sq_out,
           block_begin(b, blocks, count), block_begin(b + 1, blocks, count));
  });
}

#define OAO_APPLY_ADAM_W(TP, T)                                                                          \
  template void apply_adam_w<TP, T>(const TP*, const TP*, const TP*, const T*, const AdamWScalars&, TP*, \
                                    TP*, TP*, int64_t, const Parallel&);
OAO_APPLY_ADAM_W(float, float)
OAO_APPLY_ADAM_W(float, half)
OAO_APPLY_ADAM_W(float, bfloat16)
OAO_APPLY_ADAM_W(half, half)
OAO_APPLY_ADAM_W(bfloat16, bfloat16)
#undef OAO_APPLY_ADAM_W

}  // namespace oao

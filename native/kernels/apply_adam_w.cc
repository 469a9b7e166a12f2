#include "kernels/apply_adam_w.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "kernels/element.h"

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
// each rounded to float32 as torch's float32 tensors round them; plain loops that the compiler
// vectorizes (no FMA contraction: see CMakeLists.txt), so every ISA gives the same bits.
template <class TP, class T>
void update(const TP* param, const TP* exp_avg, const TP* exp_avg_sq, const T* grad, const AdamWScalars& s,
            TP* param_out, TP* exp_avg_out, TP* exp_avg_sq_out, int64_t begin, int64_t end) {
  const float w = s.lerp_weight, one_minus_w = 1.f - s.lerp_weight;
  const bool small_weight = std::fabs(w) < 0.5f;
  const float sign = s.maximize ? -1.f : 1.f;
  for (int64_t i = begin; i < end; ++i) {
    const float g = to_float(grad[i]) * sign;
    const float p = to_float(param[i]) * s.decay;
    const float m_old = to_float(exp_avg[i]);
    // torch.lerp's two forms, chosen by the weight.
    const float m = small_weight ? m_old + w * (g - m_old) : g - (g - m_old) * one_minus_w;
    const float v = to_float(exp_avg_sq[i]) * s.beta2 + s.rest2 * g * g;
    const float denom = std::sqrt(v) / s.correction2_sqrt + s.eps;
    param_out[i] = from_float<TP>(p + s.neg_step_size * (m / denom));
    exp_avg_out[i] = from_float<TP>(m);
    exp_avg_sq_out[i] = from_float<TP>(v);
  }
}

}  // namespace

template <class TP, class T>
void apply_adam_w(const TP* param, const TP* exp_avg, const TP* exp_avg_sq, const T* grad, const AdamWScalars& s,
                  TP* param_out, TP* exp_avg_out, TP* exp_avg_sq_out, int64_t count, const Parallel& parallel) {
  // Elements are independent: any split gives the same bits; blocks of at least 32K elements.
  const size_t blocks = block_count(static_cast<size_t>(count), 1);
  parallel.for_each(blocks, [&](size_t b) {
    update(param, exp_avg, exp_avg_sq, grad, s, param_out, exp_avg_out, exp_avg_sq_out,
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

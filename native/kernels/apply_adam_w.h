// ApplyAdamW on contiguous buffers: torch.optim.AdamW's step, one pass over the elements.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// The step's scalars, each computed in float64 from step and lr and rounded to float32 once, as
// torch rounds the Python floats it passes to its tensor ops.
struct AdamWScalars {
  float decay;             // 1 - lr * weight_decay
  float lerp_weight;       // 1 - beta1
  float beta2;
  float rest2;             // 1 - beta2
  float correction2_sqrt;  // sqrt(1 - beta2^t)
  float neg_step_size;     // -lr / (1 - beta1^t)
  float eps;
  bool maximize;
};

AdamWScalars adam_w_scalars(double step, double lr, float beta1, float beta2, float weight_decay, float eps,
                            bool maximize);

// The updated param, exp_avg and exp_avg_sq of `count` elements. Each output may be its input's
// buffer (in place): element i is read before it is written, and by nobody else. TP float32 takes
// every gradient type T; a 16-bit TP takes its own.
template <class TP, class T>
void apply_adam_w(const TP* param, const TP* exp_avg, const TP* exp_avg_sq, const T* grad, const AdamWScalars& s,
                  TP* param_out, TP* exp_avg_out, TP* exp_avg_sq_out, int64_t count, const Parallel& parallel);

}  // namespace oao

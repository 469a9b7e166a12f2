// FlashAttentionScoreGrad on the tensors in their layout (see FlashAttentionGeometry).
#pragma once

#include <cstdint>

#include "kernels/flash_attention_score_tiles.h"
#include "kernels/parallel.h"

namespace oao {

// dq, dk and dv of every query row, key and head, FlashAttention-2's backward without atomics: per
// tile of a task's query rows (fa_query_tasks: heads of one group stacked) and one block of
// kFaKeyBlock keys, the probabilities P = exp(S - softmax_max) / softmax_sum (the first of a row's
// 8 values; P 0 where the sum is 0) are recomputed from S = scale q k^T, and dv += P^T dy,
// dS = P (dy v^T - rowsum(dy attention_in)), dk += scale dS^T q, dq += scale dS k, all float32,
// each output rounded to T once. Pass 1 gives every block of keys (one task) its dk and dv, summed
// over the query tasks in their order; pass 2 every query task its dq, summed over its key blocks
// in order: whichever thread runs them, the bits depend on the problem only. mask: atten_mask's
// bytes (nonzero: masked) or null.
template <class T>
void flash_attention_score_grad(const T* query, const T* key, const T* value, const T* dy,
                                const uint8_t* mask, const float* softmax_max, const float* softmax_sum,
                                const T* attention_in, const FlashAttentionGeometry& g, T* dq, T* dk, T* dv,
                                const Parallel& parallel);

}  // namespace oao

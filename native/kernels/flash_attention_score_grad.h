// FlashAttentionScoreGrad on the tensors in their layout (see FlashAttentionGeometry).
#pragma once

#include <cstdint>

#include "kernels/flash_attention_score_tiles.h"
#include "kernels/parallel.h"

namespace oao {

// dq, dk and dv of every query row, key and head, FlashAttention-2's backward without atomics: per
// tile of one query head's rows and one block of keys, the probabilities P = exp(S - softmax_max)
// / softmax_sum (the first of a row's 8 values; P 0 where the sum is 0) are recomputed from S =
// scale q k^T, and dv += P^T dy, dS = P (dy v^T - rowsum(dy attention_in)), dk += scale dS^T q,
// dq += scale dS k, all float32, each output rounded to T once. Every dk/dv block sums its tiles
// in query head then row order and every dq tile its key blocks in order, whichever thread runs
// them: the bits depend on the problem only. mask: atten_mask's bytes (nonzero: masked) or null.
template <class T>
void flash_attention_score_grad(const T* query, const T* key, const T* value, const T* dy,
                                const uint8_t* mask, const float* softmax_max, const float* softmax_sum,
                                const T* attention_in, const FlashAttentionGeometry& g, T* dq, T* dk, T* dv,
                                const Parallel& parallel);

}  // namespace oao

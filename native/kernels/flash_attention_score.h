// FlashAttentionScore's forward on the tensors in their layout (see FlashAttentionGeometry).
#pragma once

#include <cstdint>

#include "kernels/flash_attention_score_tiles.h"
#include "kernels/parallel.h"

namespace oao {

// attention_out, softmax_max and softmax_sum (8 equal values a row) of every query row and head,
// by the online softmax over blocks of kFaKeyBlock keys: the scores of a task's tile only are ever
// stored. mask: atten_mask's bytes (nonzero: masked) or null. A row with no allowed key gives
// out 0, max -inf and sum 0.
template <class T>
void flash_attention_score(const T* query, const T* key, const T* value, const uint8_t* mask,
                           const FlashAttentionGeometry& g, T* out, float* softmax_max, float* softmax_sum,
                           const Parallel& parallel);

}  // namespace oao

// FlashAttentionScoreGrad on the tensors in their layout (see FlashAttentionGeometry).
#pragma once

#include <cstdint>

#include "kernels/flash_attention_score_tiles.h"
#include "kernels/parallel.h"

namespace oao {

// dq, dk and dv of every query row, key and head, FlashAttention-2's backward in one pass without
// atomics: per tile of a task's query rows (fa_query_tasks: heads of one group stacked) and one block
// of kFaKeyBlock keys, five products: S = scale q k^T, dP = dy v^T, dv += P^T dy, dk += scale dS^T q
// and dq += scale dS k, with P = exp(S - softmax_max) / softmax_sum (the first of a row's 8 values;
// P 0 where the sum is 0) and dS = P (dP - rowsum(dy attention_in)), all float32, each output
// rounded to T once. Each task owns a run of whole key blocks of one batch and key/value head (at
// most 4 runs per pair, cut on the problem's work, never on the thread count): it gives its keys
// their dk and dv, summed over the query tasks in their order, and keeps its own float32 dq partial
// per query task, summed over its blocks in order; a last pass adds each task's partials in run
// order. Whichever thread runs what, the bits depend on the problem only. Scratch: float32 copies of
// q and dy and up to 4 dq partials. mask: atten_mask's bytes (nonzero: masked) or null.
template <class T>
void flash_attention_score_grad(const T* query, const T* key, const T* value, const T* dy,
                                const uint8_t* mask, const float* softmax_max, const float* softmax_sum,
                                const T* attention_in, const FlashAttentionGeometry& g, T* dq, T* dk, T* dv,
                                const Parallel& parallel);

}  // namespace oao

// LightningIndexer (forward: score every allowed key, keep the best k) on contiguous buffers.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"
#include "kernels/lightning_indexer_rows.h"

namespace oao {

// For each query token t of batch b: I[s] = sum_j weights[t,j] relu(query[t,j] . key[b,s]) over the
// keys sparse_mode allows (all S2_b for 0; s <= S2_b - S1_b + pos for 3), then the k best in
// descending score, ties to the lower key index (NaN scores last), into indices (local to the
// batch) and values; slots past the allowed keys hold -1 and 0.
template <class T>
void lightning_indexer(const T* query, const T* key, const T* weights, const TokenSpans& spans, int64_t n1,
                       int64_t d, int64_t k, int sparse_mode, int32_t* indices, T* values,
                       const Parallel& parallel);

}  // namespace oao

// LightningIndexerGrad on contiguous buffers.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"
#include "kernels/lightning_indexer_rows.h"

namespace oao {

// For each query token t (heads j < n1, head dim d, k top-k slots; slots counted per sparse_mode
// and not -1, with indices already checked against their batch):
//   s_jv = query[t,j] . key[idx_v];  d_weights[t,j] = sum_v relu(s_jv) dy[t,v]
//   g_jv = weights[t,j] dy[t,v] where s_jv > 0;  d_query[t,j] = sum_v g_jv key[idx_v]
//   d_key[idx_v] += sum_j g_jv query[t,j]  (float32, in token then slot order, any thread count)
// The three products are GEMMs on the token's gathered key rows; d_key is summed by strips of key
// rows, each strip by one task at a time.
template <class T, class I>
void lightning_indexer_grad(const T* query, const T* key, const T* dy, const I* indices, const T* weights,
                            const TokenSpans& spans, int64_t n1, int64_t d, int64_t k, int sparse_mode,
                            T* d_query, T* d_key, T* d_weights, const Parallel& parallel);

}  // namespace oao

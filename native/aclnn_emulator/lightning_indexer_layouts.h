// What aclnnLightningIndexer and its grad share: layouts, the batches behind BSND and TND, and
// the rules for which keys a query token may see.
#pragma once

#include <cstdint>
#include <vector>

#include "emulator.h"

namespace aclemu {

enum class Layout { kBSND, kTND };

// 161001 for NULL, 161002 for anything but "BSND" or "TND".
Layout parse_layout(const char* text, const char* name);

// Query [B, S1, N1, D] or [T1, N1, D] by layout, one key head [B, S2, 1, D] or [T2, 1, D], weights
// [B, S1, N1] or [T1, N1] (561002 otherwise).
struct QueryShape {
  std::vector<int64_t> lead;  // [B, S1] or [T1]
  int64_t n1, d;
};
QueryShape check_query_key_weights(const aclTensor& q, const aclTensor& key, const aclTensor& w,
                                   Layout layout);

// One batch: its query tokens and key rows, as spans of the flattened token axes.
struct Batch {
  int64_t q_begin, q_len;
  int64_t k_begin, k_len;
};

std::vector<Batch> equal_batches(int64_t batches, int64_t s1, int64_t s2);
// TND: B cumulative ends, no leading zero, read from the tensors' memory (561002 if they do
// not describe t1 query tokens and t2 key rows).
std::vector<Batch> cumulative_batches(const aclTensor& ends_q, const aclTensor& ends_k, int64_t t1,
                                      int64_t t2);

// Keys that token s of the batch may select: all, or sparse mode 3's right-down causal prefix.
int64_t allowed_keys(const Batch& batch, int64_t s, int64_t sparse_mode);

}  // namespace aclemu

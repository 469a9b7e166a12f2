#include "lightning_indexer_layouts.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "op.h"
#include "tensor.h"

namespace aclemu {

Layout parse_layout(const char* text, const char* name) {
  if (text == nullptr) fail(kErrParamNullptr, std::string(name) + " is NULL");
  if (std::strcmp(text, "BSND") == 0) return Layout::kBSND;
  if (std::strcmp(text, "TND") == 0) return Layout::kTND;
  fail(kErrParamInvalid, std::string(name) + " \"" + text + "\" not supported (BSND, TND)");
}

QueryShape check_query_key_weights(const aclTensor& q, const aclTensor& key, const aclTensor& w,
                                   Layout layout) {
  const bool bsnd = layout == Layout::kBSND;
  const size_t rank = bsnd ? 4 : 3;
  check_rank(q, "query", rank, rank);
  check_rank(key, "key", rank, rank);
  const QueryShape shape{{q.dims.begin(), q.dims.end() - 2}, q.dims[rank - 2], q.dims.back()};
  const std::vector<int64_t> want_key = bsnd ? std::vector<int64_t>{shape.lead[0], key.dims[1], 1, shape.d}
                                             : std::vector<int64_t>{key.dims[0], 1, shape.d};
  check_shape(key, "key", want_key, "one key head and query's batch and head dim");
  std::vector<int64_t> want_w = shape.lead;
  want_w.push_back(shape.n1);
  check_shape(w, "weights", want_w, "query's tokens and heads");
  return shape;
}

std::vector<Batch> equal_batches(int64_t batches, int64_t s1, int64_t s2) {
  std::vector<Batch> out;
  for (int64_t b = 0; b < batches; ++b) out.push_back({b * s1, s1, b * s2, s2});
  return out;
}

namespace {

std::vector<int64_t> read_ends(const aclTensor& ends, const char* name, int64_t total) {
  check_rank(ends, name, 1, 1);
  check_host_read(ends, name);
  const std::vector<int64_t> values = read_ints(ends);
  int64_t previous = 0;
  for (int64_t v : values) {
    if (v < previous) fail(kErrTiling, std::string(name) + " must be non-decreasing cumulative ends from 0");
    previous = v;
  }
  if (previous != total) {
    fail(kErrTiling, std::string(name) + " ends at " + std::to_string(previous) + ", the tensor holds " +
                         std::to_string(total) + " tokens");
  }
  return values;
}

}  // namespace

std::vector<Batch> cumulative_batches(const aclTensor& ends_q, const aclTensor& ends_k, int64_t t1,
                                      int64_t t2) {
  const std::vector<int64_t> q = read_ends(ends_q, "actualSeqLengthsQuery", t1);
  const std::vector<int64_t> k = read_ends(ends_k, "actualSeqLengthsKey", t2);
  if (q.size() != k.size())
    fail(kErrTiling, "actualSeqLengthsQuery and actualSeqLengthsKey differ in batch count");
  std::vector<Batch> out;
  for (size_t b = 0; b < q.size(); ++b) {
    const int64_t q_begin = b ? q[b - 1] : 0, k_begin = b ? k[b - 1] : 0;
    out.push_back({q_begin, q[b] - q_begin, k_begin, k[b] - k_begin});
  }
  return out;
}

int64_t allowed_keys(const Batch& batch, int64_t s, int64_t sparse_mode) {
  if (sparse_mode == 0) return batch.k_len;
  return std::clamp<int64_t>(batch.k_len - batch.q_len + s + 1, 0, batch.k_len);
}

}  // namespace aclemu

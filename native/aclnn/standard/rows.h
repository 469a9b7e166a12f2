// Each family of standard ops adds its rows to the table (table.cc), from a file of its own.
#pragma once

#include <vector>

#include "aclnn/standard/op.h"

namespace oao::standard {

std::vector<Row> elementwise_rows();  // arithmetic, comparisons, logic, activations, Where, Cast
std::vector<Row> layout_rows();       // views, Transpose, Expand, Concat, Slice, Split, Pad, Range, ...
std::vector<Row> matmul_rows();       // MatMul, Gemm
std::vector<Row> softmax_rows();      // Softmax, LogSoftmax and the losses built on them
std::vector<Row> reduce_rows();       // reductions, CumSum, ArgMax, TopK
std::vector<Row> index_rows();        // gathers and scatters
std::vector<Row> collective_rows();   // data parallel's HcclAllReduce (not an ONNX op)

}  // namespace oao::standard

#include "aclnn/standard/rows.h"

namespace oao::standard {

const std::vector<Row>& table() {
  // Built once: ORT keeps pointers to the rows for as long as any session lives.
  static const std::vector<Row> rows = [] {
    std::vector<Row> all;
    for (auto family : {elementwise_rows, layout_rows, matmul_rows, softmax_rows, reduce_rows, index_rows,
                        collective_rows}) {
      for (Row& row : family()) all.push_back(std::move(row));
    }
    return all;
  }();
  return rows;
}

}  // namespace oao::standard

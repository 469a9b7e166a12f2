// libfmk_onnx_parser.so: the graph engine's entry points ONNX Runtime's CANN execution provider
// links for its graph mode (ONNX parsing, model build). The objects keep GE's public layouts,
// because the provider destroys them with GE's inline destructors; the graph calls refuse.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "emulator.h"

// The library builds with hidden visibility; GE's headers mark what its libraries export.
#define GE_FUNC_VISIBILITY ACLEMU_EXPORT

namespace ge {

using graphStatus = uint32_t;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;

// graph/ascend_string.h
class GE_FUNC_VISIBILITY AscendString {
 public:
  AscendString() = default;
  ~AscendString() = default;
  explicit AscendString(const char* name);
  bool operator<(const AscendString& d) const;

 private:
  std::shared_ptr<std::string> name_;
};

class GraphImpl {
 public:
  explicit GraphImpl(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// graph/graph.h
class GE_FUNC_VISIBILITY Graph {
 public:
  explicit Graph(const char* name);
  Graph() = default;
  ~Graph() = default;

 private:
  std::shared_ptr<GraphImpl> impl_{nullptr};
};

// ge/ge_ir_build.h
struct ModelBufferData {
  std::shared_ptr<uint8_t> data = nullptr;
  uint64_t length;
};

using Options = std::map<AscendString, AscendString>;

GE_FUNC_VISIBILITY graphStatus aclgrphBuildInitialize(Options& global_options);
GE_FUNC_VISIBILITY void aclgrphBuildFinalize();
GE_FUNC_VISIBILITY graphStatus aclgrphBuildModel(const Graph& graph, const Options& build_options, ModelBufferData& model);
GE_FUNC_VISIBILITY graphStatus aclgrphSaveModel(const char* output_file, const ModelBufferData& model);
// parser/onnx_parser.h
GE_FUNC_VISIBILITY graphStatus aclgrphParseONNXFromMem(const char* buffer, size_t size, const Options& parser_params, Graph& graph);

AscendString::AscendString(const char* name) {
  if (name != nullptr) name_ = std::make_shared<std::string>(name);
}

// GE orders a missing string before every present one.
bool AscendString::operator<(const AscendString& d) const {
  if (name_ == nullptr || d.name_ == nullptr) return name_ == nullptr && d.name_ != nullptr;
  return *name_ < *d.name_;
}

Graph::Graph(const char* name) : impl_(std::make_shared<GraphImpl>(name != nullptr ? name : "")) {}

namespace {

// The provider reports a GE failure with its code only, so the reason also goes to stderr.
graphStatus refuse(const char* symbol) {
  if (aclemu::hooks().enter(symbol) != 0) return GRAPH_FAILED;
  const std::string message = std::string(symbol) +
                              ": CANN graph mode (ONNX parsing and graph build) is not emulated; run the "
                              "CANN execution provider with enable_cann_graph=0";
  aclemu::hooks().set_error(message);
  std::fprintf(stderr, "aclnn emulator: %s\n", message.c_str());
  return GRAPH_FAILED;
}

}  // namespace

graphStatus aclgrphBuildInitialize(Options&) { return refuse("ge::aclgrphBuildInitialize"); }

// Nothing was initialized, so there is nothing to finalize.
void aclgrphBuildFinalize() { aclemu::hooks().enter("ge::aclgrphBuildFinalize"); }

graphStatus aclgrphBuildModel(const Graph&, const Options&, ModelBufferData&) {
  return refuse("ge::aclgrphBuildModel");
}

graphStatus aclgrphSaveModel(const char*, const ModelBufferData&) { return refuse("ge::aclgrphSaveModel"); }

graphStatus aclgrphParseONNXFromMem(const char*, size_t, const Options&, Graph&) {
  return refuse("ge::aclgrphParseONNXFromMem");
}

}  // namespace ge

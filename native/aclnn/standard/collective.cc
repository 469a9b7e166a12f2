// Data parallel's collective nodes (not ONNX ops: the training API inserts them into a training
// graph for many NPUs, each in kAclnnDomain with a function body that is Identity, the same
// reduction over a group of one). HcclAllReduce(g...) -> (sum...) copies each gradient into its
// output on the compute stream, then queues the vendor's all-reduce of the outputs on the
// communicator's own stream once the compute stream reaches it (an event), and returns: the
// backward's later nodes run while the bucket travels, and the host waits for the communicator's
// stream after the run. Outputs that lie end to end in memory (the gradients' flat buffer) go as
// one call.
#include <algorithm>
#include <numeric>

#include "aclnn/hccl.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

using RecordEvent = aclError (*)(hccl::aclrtEvent event, aclrtStream stream);
using StreamWaitEvent = aclError (*)(aclrtStream stream, hccl::aclrtEvent event);

HcclDataType hccl_type_of(ONNXTensorElementDataType type) {
  switch (type) {
    case kF16:
      return HCCL_DATA_TYPE_FP16;
    case kBF16:
      return HCCL_DATA_TYPE_BFP16;
    case kI32:
      return HCCL_DATA_TYPE_INT32;
    default:
      return HCCL_DATA_TYPE_FP32;
  }
}

struct Span {
  char* data;
  size_t bytes;
};

Ort::Status all_reduce(Call& call) {
  const auto name = call.attribute_string("group");
  if (!name) return call.error("attribute 'group' (the communicator's name) is required");
  const hccl::Group group = hccl::group(*name);
  const auto& cann = call.aclnn().cann();
  std::vector<Span> spans;
  ONNXTensorElementDataType type = kF32;
  for (size_t i = 0; i < call.input_count(); ++i) {
    const Tensor in = call.input(i);
    type = in.type;
    void* out = call.output(i, in.shape);
    call.aclnn().copy_on_stream(out, in.data, in.bytes());
    if (in.bytes() > 0) spans.push_back({static_cast<char*>(out), in.bytes()});
  }
  if (spans.empty()) return Ort::Status(nullptr);
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.data < b.data; });
  std::vector<Span> runs{spans.front()};
  for (size_t i = 1; i < spans.size(); ++i) {
    Span& last = runs.back();
    if (last.data + last.bytes == spans[i].data) {
      last.bytes += spans[i].bytes;
    } else {
      runs.push_back(spans[i]);
    }
  }
  void* compute = call.aclnn().stream();
  if (const aclError code = cann.base<RecordEvent>("aclrtRecordEvent")(group.ready, compute); code != 0)
    return call.error("aclrtRecordEvent failed with " + std::to_string(code));
  if (const aclError code = cann.base<StreamWaitEvent>("aclrtStreamWaitEvent")(group.stream, group.ready); code != 0)
    return call.error("aclrtStreamWaitEvent failed with " + std::to_string(code));
  const auto reduce = cann.collective<hccl::AllReduce>("HcclAllReduce");
  const size_t item = type_size(type);
  for (const Span& run : runs) {
    const HcclResult code =
        reduce(run.data, run.data, run.bytes / item, hccl_type_of(type), HCCL_REDUCE_SUM, group.comm, group.stream);
    if (code != HCCL_SUCCESS)
      return call.error("HcclAllReduce of " + std::to_string(run.bytes) + " bytes failed with " +
                        std::to_string(code) + ": " + call.aclnn().recent_error());
  }
  call.aclnn().launched();  // on the communicator's stream, ordered after the copies by the event
  return Ort::Status(nullptr);
}

}  // namespace

std::vector<Row> collective_rows() {
  return {
      Row{"HcclAllReduce", "HcclAllReduce", all_reduce, 1, 1, typed({kF32, kF16, kBF16}, 2)}
          .repeats_last_input()
          .repeats_last_output(),
  };
}

}  // namespace oao::standard

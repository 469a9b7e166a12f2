#include "aclnn/lightning_indexer_limits.h"
#include "ort/ops.h"

namespace oao {
namespace {

Ort::Status check_heads_and_k(const char* op, const LightningIndexerShape& s) {
  if (s.n1 >= 1 && s.n1 <= 64 && s.k >= 1 && s.k <= 2048) return Ort::Status(nullptr);
  return op_error(op, "aclnnLightningIndexerGrad takes 1 to 64 query heads and top-k 1 to 2048; got N1 = " +
                          std::to_string(s.n1) + ", K = " + std::to_string(s.k));
}

template <class T>
struct LightningIndexerGradAclnn : LightningIndexerGradSignature<T> {
  explicit LightningIndexerGradAclnn(const OrtKernelInfo* info)
      : LightningIndexerGradSignature<T>(info), allocator(device_allocator(info)) {}

  Ort::Status Compute(const Io& io) const {
    const char* op = this->kName;
    if (auto status = check_lightning_indexer_type<T>(op); !status.IsOK()) return status;
    const auto query = *io.input<T>(0), key = *io.input<T>(1), dy = *io.input<T>(2),
               weights = *io.input<T>(4);
    const auto indices = *io.untyped_input(3);
    if (auto status = check_int32(op, "sparse_indices", indices.type); !status.IsOK()) return status;
    AclnnCall call(op, io, allocator.get());
    const bool tnd = this->layout == "TND";
    HostLengthPair lengths;
    LightningIndexerShape s;
    const acl::Family family = call.cann().family();
    if (auto status = first_error(
            [&] { return lengths.read(op, call, io, 5, tnd); },
            [&] {
              return this->check(query.shape, key.shape, dy.shape, indices.shape, weights.shape,
                                 lengths.query(), lengths.key(), s);
            },
            [&] { return check_lightning_indexer_family(op, family); }, [&] { return check_head_dim(op, s); },
            [&] { return check_heads_and_k(op, s); }, [&] { return check_batches(op, s, s.k); });
        !status.IsOK())
      return status;
    // The vendor kernel reads whatever index it is given; the contract makes a bad one an error,
    // which takes the indices on the host.
    const auto host_indices = call.to_host<int32_t>(indices.data, element_count(indices.shape));
    if (auto status = first_error([&] { return this->check_indices(host_indices.data(), s); },
                                  [&] {
                                    return check_no_skipped_slots(op, host_indices.data(), s,
                                                                  static_cast<int>(this->sparse_mode));
                                  });
        !status.IsOK())
      return status;
    constexpr aclDataType type = acl_type<T>();
    std::string layout = this->layout;  // aclnn takes a char*
    return call.run<acl::LightningIndexerGradPrepare>(
        "aclnnLightningIndexerGrad", call.tensor(query.data, query.shape, type),
        call.tensor(key.data, key.shape, type), call.tensor(dy.data, dy.shape, type),
        call.tensor(indices.data, indices.shape, ACL_INT32), call.tensor(weights.data, weights.shape, type),
        lengths_tensor(call, io, 5, tnd), lengths_tensor(call, io, 6, tnd), *this->head_num, layout.data(),
        this->sparse_mode, this->pre_tokens, this->next_tokens, this->deterministic,
        call.tensor(io.output<T>(0, query.shape), query.shape, type),
        call.tensor(io.output<T>(1, key.shape), key.shape, type),
        call.tensor(io.output<T>(2, weights.shape), weights.shape, type));
  }

  DeviceAllocator allocator;
};

}  // namespace

void add_lightning_indexer_grad_aclnn(OpList& ops) { add_float_types<LightningIndexerGradAclnn>(ops, kAclnnEp); }

}  // namespace oao

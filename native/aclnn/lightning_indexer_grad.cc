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
struct LightningIndexerGradAclnn : LightningIndexerAclnnKernel<LightningIndexerGradSignature<T>> {
  using LightningIndexerAclnnKernel<LightningIndexerGradSignature<T>>::LightningIndexerAclnnKernel;
  using typename LightningIndexerAclnnKernel<LightningIndexerGradSignature<T>>::Args;

  Ort::Status read(const Io& io, Args& a) const {
    this->inputs(io, a);
    if (auto status = check_int32(this->kName, "sparse_indices", a.indices.type); !status.IsOK())
      return status;
    return this->check_on_host(io, a);
  }

  Ort::Status run(const Io& io, Args& a) const {
    const char* op = this->kName;
    AclnnCall& call = *a.call;
    const LightningIndexerShape& s = a.s;
    if (auto status =
            first_error([&] { return this->check_product_and_head_dim(a); },
                        [&] { return check_heads_and_k(op, s); }, [&] { return check_batches(op, s, s.k); });
        !status.IsOK())
      return status;
    // The vendor kernel reads whatever index it is given; the contract makes a bad one an error,
    // which takes the indices on the host.
    const auto host_indices = call.to_host<int32_t>(a.indices.data, element_count(a.indices.shape));
    if (auto status = first_error([&] { return this->check_indices(host_indices.data(), s); },
                                  [&] {
                                    return check_no_skipped_slots(op, host_indices.data(), s,
                                                                  static_cast<int>(this->sparse_mode));
                                  });
        !status.IsOK())
      return status;
    using Schema = schema::LightningIndexerGrad;
    auto* d_query = io.output<T>(Schema::kOutput_d_query, a.query.shape);
    auto* d_key = io.output<T>(Schema::kOutput_d_key, a.key.shape);
    auto* d_weights = io.output<T>(Schema::kOutput_d_weights, a.weights.shape);
    constexpr aclDataType type = acl_type<T>();
    const bool tnd = this->tnd();
    std::string layout = this->layout;  // aclnn takes a char*
    return call.run<acl::LightningIndexerGradPrepare>(
        "aclnnLightningIndexerGrad", call.tensor(a.query.data, a.query.shape, type),
        call.tensor(a.key.data, a.key.shape, type), call.tensor(a.dy.data, a.dy.shape, type),
        call.tensor(a.indices.data, a.indices.shape, ACL_INT32),
        call.tensor(a.weights.data, a.weights.shape, type), lengths_tensor(call, a.query_lengths, tnd),
        lengths_tensor(call, a.key_lengths, tnd), *this->head_num, layout.data(), this->sparse_mode,
        this->pre_tokens, this->next_tokens, this->deterministic, call.tensor(d_query, a.query.shape, type),
        call.tensor(d_key, a.key.shape, type), call.tensor(d_weights, a.weights.shape, type));
  }
};

}  // namespace

void add_lightning_indexer_grad_aclnn(OpList& ops) { add_float_types<LightningIndexerGradAclnn>(ops, kAclnnEp); }

}  // namespace oao

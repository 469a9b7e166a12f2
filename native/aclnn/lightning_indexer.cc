#include <climits>

#include "aclnn/lightning_indexer_limits.h"
#include "ort/ops.h"

namespace oao {
namespace {

// Query heads: at most 64 on Atlas A2/A3; 8, 16, 24, 32 or 64 on Ascend 950.
Ort::Status check_heads(const char* op, acl::Family family, int64_t n1) {
  const bool ok =
      family == acl::Family::k950 ? n1 == 64 || (n1 % 8 == 0 && n1 >= 8 && n1 <= 32) : n1 >= 1 && n1 <= 64;
  if (ok) return Ort::Status(nullptr);
  return op_error(op, std::string("aclnnLightningIndexer takes ") +
                          (family == acl::Family::k950 ? "8, 16, 24, 32 or 64" : "1 to 64") +
                          " query heads on " + acl::family_name(family) + "; query has " +
                          std::to_string(n1));
}

Ort::Status check_sparse_count(const char* op, int64_t k) {
  if ((k >= 1 && k <= 2048) || (k % 1024 == 0 && k > 0 && k <= 8192)) return Ort::Status(nullptr);
  return op_error(op, "attribute 'sparse_count' is " + std::to_string(k) +
                          "; aclnnLightningIndexer takes 1 to 2048, 3072, 4096, 5120, 6144, 7168 or 8192");
}

template <class T>
struct LightningIndexerAclnn : LightningIndexerAclnnKernel<LightningIndexerSignature<T>> {
  using LightningIndexerAclnnKernel<LightningIndexerSignature<T>>::LightningIndexerAclnnKernel;
  using typename LightningIndexerAclnnKernel<LightningIndexerSignature<T>>::Args;

  Ort::Status read(const Io& io, Args& a) const {
    this->inputs(io, a);
    return this->check_on_host(io, a);
  }

  Ort::Status run(const Io& io, Args& a) const {
    const char* op = this->kName;
    AclnnCall& call = *a.call;
    const LightningIndexerShape& s = a.s;
    if (auto status =
            first_error([&] { return this->check_product_and_head_dim(a); },
                        [&] { return check_heads(op, call.cann().family(), s.n1); },
                        [&] { return check_sparse_count(op, s.k); }, [&] { return check_signature(call); });
        !status.IsOK())
      return status;
    const Shape out_shape = this->output_shape(a.query.shape);
    auto* indices = io.output<int32_t>(schema::LightningIndexer::kOutput_sparse_indices, out_shape);
    auto* values = io.output<T>(schema::LightningIndexer::kOutput_sparse_values, out_shape);
    if (s.spans.tokens() == 0) return Ort::Status(nullptr);  // nothing to select; aclnn refuses empty tensors
    if (auto status = check_batches(op, s, 0); !status.IsOK()) return status;
    // aclnn's outputs carry key's head axis (N2 = 1) before K: same memory, one more axis.
    Shape acl_out_shape = out_shape;
    acl_out_shape.insert(acl_out_shape.end() - 1, 1);
    constexpr aclDataType type = acl_type<T>();
    const bool tnd = this->tnd();
    std::string layout = this->layout;  // aclnn takes char*, and two of them
    std::string layout_key = this->layout;
    return call.run<acl::LightningIndexerPrepare>(
        "aclnnLightningIndexer", call.tensor(a.query.data, a.query.shape, type),
        call.tensor(a.key.data, a.key.shape, type), call.tensor(a.weights.data, a.weights.shape, type),
        lengths_tensor(call, a.query_lengths, tnd), lengths_tensor(call, a.key_lengths, tnd), nullptr,
        layout.data(), layout_key.data(), this->sparse_count, this->sparse_mode, int64_t{INT64_MAX},
        int64_t{INT64_MAX}, true, call.tensor(indices, acl_out_shape, ACL_INT32),
        call.tensor(values, acl_out_shape, type));
  }

  // Custom operator packages carried an older aclnnLightningIndexer without pre/next tokens and
  // values; dlsym cannot tell the two apart, so one from such a package is refused.
  static Ort::Status check_signature(const AclnnCall& call) {
    const std::string origin = call.cann().op_origin("aclnnLightningIndexerGetWorkspaceSize");
    if (origin.find("libcust_opapi") == std::string::npos) return Ort::Status(nullptr);
    return Ort::Status(
        ("LightningIndexer: aclnnLightningIndexer comes from the custom operator package " + origin +
         ", whose older signature (no preTokens, nextTokens or sparse values) this library "
         "does not bind; install a CANN whose libopapi ships the op")
            .c_str(),
        ORT_NOT_IMPLEMENTED);
  }
};

}  // namespace

void add_lightning_indexer_aclnn(OpList& ops) { add_float_types<LightningIndexerAclnn>(ops, kAclnnEp); }

}  // namespace oao

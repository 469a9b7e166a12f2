// The slice of CANN's C ABI the aclnn backend uses, declared here because no CANN SDK is needed to
// build the package (values from the vendor's headers, see shared/seeds/ACLNN_ABI.md). Functions
// are resolved at run time (cann.h), so these are pointer types, not prototypes.
#pragma once

#include <cstdint>

extern "C" {

typedef int32_t aclnnStatus;
typedef int aclError;
typedef void* aclrtStream;
typedef struct aclTensor aclTensor;
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclIntArray aclIntArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalar aclScalar;

typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_BF16 = 27,
} aclDataType;

typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NCDHW = 30,
} aclFormat;

}  // extern "C"

namespace oao::acl {

enum : aclnnStatus {
  kSuccess = 0,
  kErrParamNullptr = 161001,
  kErrParamInvalid = 161002,
  kErrRuntime = 361001,
  kErrInner = 561000,
  kErrInferShape = 561001,
  kErrTiling = 561002,
  kErrFindKernel = 561003,
  kErrCreateExecutor = 561101,
  kErrInnerNullptr = 561103,
  kErrOppPathNotFound = 561107,
  kErrOppKernelPkgNotFound = 561112,
};

// libnnopbase
using CreateTensor = aclTensor* (*)(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                                    const int64_t* stride, int64_t offset, aclFormat format,
                                    const int64_t* storage_dims, uint64_t storage_dims_num,
                                    void* tensor_data);
using DestroyTensor = aclnnStatus (*)(const aclTensor* tensor);
using DestroyExecutor = aclnnStatus (*)(aclOpExecutor* executor);
using CreateIntArray = aclIntArray* (*)(const int64_t* value, uint64_t size);
using DestroyIntArray = aclnnStatus (*)(const aclIntArray* array);
// A list owns its tensors: destroying it destroys them.
using CreateTensorList = aclTensorList* (*)(const aclTensor* const* value, uint64_t size);
using DestroyTensorList = aclnnStatus (*)(const aclTensorList* array);
using CreateScalar = aclScalar* (*)(void* value, aclDataType data_type);
using DestroyScalar = aclnnStatus (*)(const aclScalar* scalar);

// libascendcl / libacl_rt
using GetRecentErrMsg = const char* (*)();
using GetSocName = const char* (*)();
using SynchronizeStream = aclError (*)(aclrtStream stream);
using SynchronizeDevice = aclError (*)();
using Memcpy = aclError (*)(void* dst, size_t dest_max, const void* src, size_t count, int kind);
using MemcpyAsync = aclError (*)(void* dst, size_t dest_max, const void* src, size_t count, int kind,
                                 aclrtStream stream);
// aclrtMemcpyKind
inline constexpr int kMemcpyHostToDevice = 1;
inline constexpr int kMemcpyDeviceToHost = 2;
inline constexpr int kMemcpyDeviceToDevice = 3;

// Every op's second phase.
using Launch = aclnnStatus (*)(void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                               aclrtStream stream);

// First phases.
using RmsNormPrepare = aclnnStatus (*)(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                       const aclTensor* y_out, const aclTensor* rstd_out,
                                       uint64_t* workspace_size, aclOpExecutor** executor);
using RmsNormGradPrepare = aclnnStatus (*)(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd,
                                           const aclTensor* gamma, const aclTensor* dx_out,
                                           const aclTensor* dgamma_out, uint64_t* workspace_size,
                                           aclOpExecutor** executor);
using SwiGluPrepare = aclnnStatus (*)(const aclTensor* x, int64_t dim, const aclTensor* out, uint64_t* workspace_size,
                                      aclOpExecutor** executor);
using SwiGluGradPrepare = aclnnStatus (*)(const aclTensor* y_grad, const aclTensor* x, int64_t dim,
                                          const aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor);
using RotaryPositionEmbeddingPrepare = aclnnStatus (*)(const aclTensor* x, const aclTensor* cos, const aclTensor* sin,
                                    int64_t mode, const aclTensor* out, uint64_t* workspace_size,
                                    aclOpExecutor** executor);
using RotaryPositionEmbeddingGradPrepare = aclnnStatus (*)(const aclTensor* dy, const aclTensor* cos, const aclTensor* sin,
                                        const aclTensor* x_optional, int64_t mode, const aclTensor* dx_out,
                                        const aclTensor* dcos_out, const aclTensor* dsin_out,
                                        uint64_t* workspace_size, aclOpExecutor** executor);
using LightningIndexerPrepare =
    aclnnStatus (*)(const aclTensor* query, const aclTensor* key, const aclTensor* weights,
                    const aclTensor* actual_seq_lengths_query, const aclTensor* actual_seq_lengths_key,
                    const aclTensor* block_table, char* layout_query, char* layout_key, int64_t sparse_count,
                    int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens, bool return_values,
                    const aclTensor* sparse_indices_out, const aclTensor* sparse_values_out,
                    uint64_t* workspace_size, aclOpExecutor** executor);
using LightningIndexerGradPrepare = aclnnStatus (*)(
    const aclTensor* query, const aclTensor* key, const aclTensor* dy, const aclTensor* sparse_indices,
    const aclTensor* weights, const aclTensor* actual_seq_lengths_query,
    const aclTensor* actual_seq_lengths_key, int64_t head_num, char* layout, int64_t sparse_mode,
    int64_t pre_tokens, int64_t next_tokens, bool deterministic, const aclTensor* d_query,
    const aclTensor* d_key, const aclTensor* d_weights, uint64_t* workspace_size, aclOpExecutor** executor);
using ApplyAdamWPrepare = aclnnStatus (*)(aclTensor* var_ref, aclTensor* m_ref, aclTensor* v_ref,
                                          aclTensor* max_grad_norm_optional_ref, const aclTensor* grad,
                                          const aclTensor* step, float lr, float beta1, float beta2,
                                          float weight_decay, float eps, bool amsgrad, bool maximize,
                                          uint64_t* workspace_size, aclOpExecutor** executor);

using ForeachNonFiniteCheckAndUnscalePrepare = aclnnStatus (*)(const aclTensorList* scaled_grads,
                                                                const aclTensor* found_inf, const aclTensor* inv_scale,
                                                                uint64_t* workspace_size, aclOpExecutor** executor);

// aclnnGroupedMatmulV4: lists of one tensor each (splitItem 2/3); bias, quantization and
// activation lists are passed NULL.
using GroupedMatmulV4Prepare = aclnnStatus (*)(
    const aclTensorList* x, const aclTensorList* weight, const aclTensorList* bias_optional,
    const aclTensorList* scale_optional, const aclTensorList* offset_optional,
    const aclTensorList* antiquant_scale_optional, const aclTensorList* antiquant_offset_optional,
    const aclTensorList* per_token_scale_optional, const aclTensor* group_list_optional,
    const aclTensorList* activation_input_optional, const aclTensorList* activation_quant_scale_optional,
    const aclTensorList* activation_quant_offset_optional, int64_t split_item, int64_t group_type,
    int64_t group_list_type, int64_t act_type, aclTensorList* out, aclTensorList* activation_feature_out_optional,
    aclTensorList* dyn_quant_scale_out_optional, uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnGroupedMatmulAddV2: y_ref (float32) += x_g^T @ weight_g per group of the shared first axis.
using GroupedMatmulAddV2Prepare = aclnnStatus (*)(const aclTensor* x, const aclTensor* weight,
                                                  const aclTensor* group_list, aclTensor* y_ref, bool transpose_x,
                                                  bool transpose_weight, int64_t group_type, int64_t group_list_type,
                                                  uint64_t* workspace_size, aclOpExecutor** executor);

// aclnnFlashAttentionScore(Grad): realShift / pse, dropMask, paddingMask and prefix are passed NULL.
using FlashAttentionScorePrepare = aclnnStatus (*)(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* real_shift,
    const aclTensor* drop_mask, const aclTensor* padding_mask, const aclTensor* atten_mask,
    const aclIntArray* prefix, double scale_value, double keep_prob, int64_t pre_tokens, int64_t next_tokens,
    int64_t head_num, char* input_layout, int64_t inner_precise, int64_t sparse_mode,
    const aclTensor* softmax_max_out, const aclTensor* softmax_sum_out, const aclTensor* softmax_out_out,
    const aclTensor* attention_out_out, uint64_t* workspace_size, aclOpExecutor** executor);
using FlashAttentionScoreGradPrepare = aclnnStatus (*)(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pse_shift, const aclTensor* drop_mask, const aclTensor* padding_mask,
    const aclTensor* atten_mask, const aclTensor* softmax_max, const aclTensor* softmax_sum,
    const aclTensor* softmax_in, const aclTensor* attention_in, const aclIntArray* prefix, double scale_value,
    double keep_prob, int64_t pre_tokens, int64_t next_tokens, int64_t head_num, char* input_layout,
    int64_t inner_precise, int64_t sparse_mode, const aclTensor* dq_out, const aclTensor* dk_out,
    const aclTensor* dv_out, const aclTensor* dpse_out, uint64_t* workspace_size, aclOpExecutor** executor);
// TND: aclnnFlashAttentionVarLenScore and aclnnFlashAttentionUnpaddingScoreGrad, the same arguments
// with the cumulative lengths as host arrays after prefixOptional.
using FlashAttentionVarLenScorePrepare = aclnnStatus (*)(
    const aclTensor* query, const aclTensor* key, const aclTensor* value,
    const aclTensor* real_shift_optional, const aclTensor* drop_mask_optional,
    const aclTensor* padding_mask_optional, const aclTensor* atten_mask_optional,
    const aclIntArray* prefix_optional, const aclIntArray* actual_seq_q_len_optional,
    const aclIntArray* actual_seq_kv_len_optional, double scale_value, double keep_prob, int64_t pre_tokens,
    int64_t next_tokens, int64_t head_num, char* input_layout, int64_t inner_precise, int64_t sparse_mode,
    const aclTensor* softmax_max_out, const aclTensor* softmax_sum_out, const aclTensor* softmax_out_out,
    const aclTensor* attention_out_out, uint64_t* workspace_size, aclOpExecutor** executor);
using FlashAttentionUnpaddingScoreGradPrepare = aclnnStatus (*)(
    const aclTensor* query, const aclTensor* key_in, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pse_shift_optional, const aclTensor* drop_mask_optional,
    const aclTensor* padding_mask_optional, const aclTensor* atten_mask_optional,
    const aclTensor* softmax_max_optional, const aclTensor* softmax_sum_optional,
    const aclTensor* softmax_in_optional, const aclTensor* attention_in_optional,
    const aclIntArray* prefix_optional, const aclIntArray* actual_seq_q_len_optional,
    const aclIntArray* actual_seq_kv_len_optional, double scale_value, double keep_prob, int64_t pre_tokens,
    int64_t next_tokens, int64_t head_num, char* input_layout, int64_t inner_precise, int64_t sparse_mode,
    const aclTensor* dq_out, const aclTensor* dk_out, const aclTensor* dv_out, const aclTensor* dpse_out,
    uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace oao::acl

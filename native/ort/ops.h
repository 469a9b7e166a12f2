// Each op file adds its kernels (one per supported type combination) for one execution provider:
// native/ort/<op>.cc for the CPU, native/aclnn/<op>.cc for Ascend through aclnn.
#pragma once

#include "ort/glue.h"

namespace oao {

void add_rms_norm_cpu(OpList& ops);
void add_rms_norm_grad_cpu(OpList& ops);
void add_rotary_position_embedding_cpu(OpList& ops);
void add_rotary_position_embedding_grad_cpu(OpList& ops);
void add_lightning_indexer_cpu(OpList& ops);
void add_lightning_indexer_grad_cpu(OpList& ops);

void add_rms_norm_aclnn(OpList& ops);
void add_rms_norm_grad_aclnn(OpList& ops);
void add_rotary_position_embedding_aclnn(OpList& ops);
void add_rotary_position_embedding_grad_aclnn(OpList& ops);
void add_lightning_indexer_aclnn(OpList& ops);
void add_lightning_indexer_grad_aclnn(OpList& ops);

}  // namespace oao

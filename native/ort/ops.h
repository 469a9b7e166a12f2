// Each op file adds its kernels (one per supported type combination) for one execution provider.
#pragma once

#include "ort/glue.h"

namespace oao {

void add_rms_norm_cpu(OpList& ops);
void add_rms_norm_grad_cpu(OpList& ops);
void add_rotary_position_embedding_cpu(OpList& ops);
void add_rotary_position_embedding_grad_cpu(OpList& ops);
void add_lightning_indexer_cpu(OpList& ops);
void add_lightning_indexer_grad_cpu(OpList& ops);

}  // namespace oao

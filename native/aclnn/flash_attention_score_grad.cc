// aclnnFlashAttentionScoreGrad: not bound yet (the emulator has it; the glue follows).
#include "ort/ops.h"

namespace oao {
void add_flash_attention_score_grad_aclnn(OpList&) {}
}  // namespace oao

// Each op file adds its kernels (one per supported type combination) for one execution provider:
// native/ort/<op>.cc for the CPU, native/aclnn/<op>.cc for Ascend through aclnn.
#pragma once

#include "ort/glue.h"
#include "ort/schema.h"

namespace oao {

#define OAO_DECLARE_OP(op)          \
  void add_##op##_cpu(OpList& ops); \
  void add_##op##_aclnn(OpList& ops);
OAO_SCHEMA_OPS(OAO_DECLARE_OP)
#undef OAO_DECLARE_OP

}  // namespace oao

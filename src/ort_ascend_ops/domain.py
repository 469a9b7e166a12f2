"""The operator domain of the library's ops and its version: one fact for every layer (the
schemas in schemas/*.toml name it too, and the loader holds them to it; the native library gets it
generated from them)."""

DOMAIN = "ort_ascend_ops"
VERSION = 1

# ONNX's standard ops as the NPU runs them (cann_ep.aclnn_ops): the same ops, with the standard op
# itself as each one's function, in a domain of their own (native/aclnn/standard/op.h names it too).
ACLNN_DOMAIN = "ort_ascend_ops.aclnn"

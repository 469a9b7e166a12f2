"""The operator domain of the library's ops and its version: one fact for every layer (the
schemas in schemas/*.toml name it too, and the loader holds them to it; the native library gets it
generated from them)."""

DOMAIN = "ort_ascend_ops"
VERSION = 1

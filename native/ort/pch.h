// The glue's precompiled header (CMakeLists.txt: target_precompile_headers): the external headers
// every glue file includes through ort/glue.h, which are most of what each file parses. Only
// headers that do not change with our sources belong here, so that editing the glue never
// rebuilds the PCH. Each glue file still includes what it uses itself.
#pragma once

// As in glue.h: the API pointer is set by RegisterCustomOps (Ort::InitApi), not at static init.
#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

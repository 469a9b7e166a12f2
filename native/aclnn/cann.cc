#include "aclnn/cann.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace oao::acl {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// $ASCEND_HOME_PATH/lib64 first, then the loader's own search (LD_LIBRARY_PATH, as CANN's
// set_env.sh sets it).
bool open_library(const std::string& file, int flags, std::vector<std::pair<std::string, void*>>& into,
                  std::string& tried) {
  std::vector<std::string> paths;
  if (const std::string home = env("ASCEND_HOME_PATH"); !home.empty())
    paths.push_back(home + "/lib64/" + file);
  paths.push_back(file);
  for (const auto& path : paths) {
    if (void* handle = dlopen(path.c_str(), flags)) {
      into.emplace_back(path, handle);
      return true;
    }
    tried += "\n  " + path + ": " + dlerror();
  }
  return false;
}

// Custom operator packages: each ASCEND_CUSTOM_OPP_PATH entry, then the vendors installed in the
// toolkit.
std::vector<std::string> custom_packages() {
  std::vector<std::string> libraries;
  std::istringstream roots(env("ASCEND_CUSTOM_OPP_PATH"));
  for (std::string root; std::getline(roots, root, ':');) {
    if (!root.empty()) libraries.push_back(root + "/op_api/lib/libcust_opapi.so");
  }
  if (const std::string home = env("ASCEND_HOME_PATH"); !home.empty()) {
    glob_t found{};
    if (glob((home + "/opp/vendors/*/op_api/lib/libcust_opapi.so").c_str(), 0, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) libraries.push_back(found.gl_pathv[i]);
    }
    globfree(&found);
  }
  return libraries;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

const char* family_name(Family family) {
  switch (family) {
    case Family::kA2:
      return "Atlas A2";
    case Family::kA3:
      return "Atlas A3";
    case Family::k950:
      return "Ascend 950";
    case Family::kInference:
      return "Atlas inference (310P)";
    case Family::kOther:
      return "this Ascend product";
    case Family::kUnknown:
      break;
  }
  return "an unidentified Ascend product";
}

const Cann& Cann::get() {
  // A failed construction throws and is retried at the next use, each time with the same message.
  static const Cann cann;
  return cann;
}

Cann::Cann() {
  std::vector<std::pair<std::string, void*>> opened;
  std::string tried;
  // RTLD_GLOBAL: the operator libraries find nnopbase's and the runtime's symbols through them.
  const int global = RTLD_NOW | RTLD_GLOBAL;
  if (!open_library("libnnopbase.so", global, opened, tried) ||
      !(open_library("libascendcl.so", global, opened, tried) ||
        open_library("libacl_rt.so", global, opened, tried))) {
    throw std::runtime_error(
        "the CANN runtime is not installed or not on the library path (source CANN's set_env.sh, which "
        "sets ASCEND_HOME_PATH and LD_LIBRARY_PATH); tried:" +
        tried);
  }
  for (auto& [path, handle] : opened) base_.push_back({path, handle});
  opened.clear();
  // The split operator libraries replace libopapi.so and must not be mixed with it.
  const bool nn = open_library("libopapi_nn.so", RTLD_NOW | RTLD_LOCAL, opened, tried);
  const bool transformer = open_library("libopapi_transformer.so", RTLD_NOW | RTLD_LOCAL, opened, tried);
  // The standard ops' functions (aclnnAdd, aclnnMatmul, aclnnPermute, ...).
  const bool math = open_library("libopapi_math.so", RTLD_NOW | RTLD_LOCAL, opened, tried);
  if (!nn && !transformer && !math) open_library("libopapi.so", RTLD_NOW | RTLD_LOCAL, opened, tried);
  for (const auto& path : custom_packages()) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) opened.emplace_back(path, handle);
  }
  for (auto& [path, handle] : opened) ops_.push_back({path, handle});
  opened.clear();
  // Optional: only data parallel's collective nodes need it.
  if (open_library("libhccl.so", RTLD_NOW | RTLD_LOCAL, opened, tried)) hccl_.push_back({opened[0].first, opened[0].second});
}

void* Cann::find_in(const std::vector<Library>& libraries, const char* name, const char* what) {
  for (const auto& library : libraries) {
    if (void* symbol = dlsym(library.handle, name)) return symbol;
  }
  std::string searched;
  for (const auto& library : libraries) searched += (searched.empty() ? "" : ", ") + library.path;
  throw std::runtime_error(std::string("CANN symbol '") + name + "' not found in the " + what + " (" +
                           (searched.empty() ? "none could be opened" : searched) +
                           "); this CANN version may predate the op");
}

void* Cann::find_op(const char* name) const { return find_in(ops_, name, "aclnn operator libraries"); }

void* Cann::find_base(const char* name) const { return find_in(base_, name, "CANN runtime libraries"); }

std::string Cann::op_origin(const char* name) const {
  Dl_info info{};
  if (dladdr(find_op(name), &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

std::string Cann::soc_name() const {
  // Optional: without it the per-product checks are left to the vendor library.
  for (const auto& library : base_) {
    if (auto get_soc = reinterpret_cast<GetSocName>(dlsym(library.handle, "aclrtGetSocName"))) {
      const char* name = get_soc();
      return name ? name : "";
    }
  }
  return "";
}

Family Cann::family() const {
  const std::string soc = soc_name();
  if (soc.empty()) return Family::kUnknown;
  if (starts_with(soc, "Ascend910B") && soc != "Ascend910B") return Family::kA2;  // plain 910B: old 910
  if (starts_with(soc, "Ascend910_93")) return Family::kA3;
  if (starts_with(soc, "Ascend950")) return Family::k950;
  if (starts_with(soc, "Ascend310P")) return Family::kInference;
  return Family::kOther;
}

}  // namespace oao::acl

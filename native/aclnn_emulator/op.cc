#include "op.h"

#include <exception>
#include <memory>

#include "tensor.h"

namespace aclemu {

namespace {

constexpr uint64_t kDefaultWorkspace = 4096;

Range storage(const aclTensor* t) {
  return {t->data, static_cast<size_t>(numel(t->storage_dims)) * element_size(t->dtype)};
}

bool nd_family(aclFormat format) {
  return format == ACL_FORMAT_ND || format == ACL_FORMAT_NCHW || format == ACL_FORMAT_NHWC ||
         format == ACL_FORMAT_NCDHW;
}

std::string dtype_list(std::initializer_list<aclDataType> dtypes) {
  std::string text;
  for (aclDataType d : dtypes) text += (text.empty() ? "" : ", ") + dtype_name(d);
  return text;
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

bool digit_at(const std::string& text, size_t i) {
  return i < text.size() && text[i] >= '0' && text[i] <= '9';
}

void report(const char* symbol, const std::string& message) {
  hooks().set_error(std::string(symbol) + ": " + message);
}

// Runs a phase; a failed check returns its code, anything else thrown returns kErrInner.
template <typename Body>
aclnnStatus guarded(const char* symbol, Body body) {
  try {
    return body();
  } catch (const Error& e) {
    report(symbol, e.message);
    return e.code;
  } catch (const std::exception& e) {
    report(symbol, std::string("internal error: ") + e.what());
    return kErrInner;
  }
}

// Writes the whole workspace, so a too-small or dangling buffer shows up under a memory checker.
void use_workspace(void* workspace, uint64_t size) {
  if (size == 0) return;
  volatile unsigned char* bytes = static_cast<unsigned char*>(workspace);
  for (uint64_t i = 0; i < size; ++i) bytes[i] = 0xA5;
  if (bytes[0] != 0xA5 || bytes[size - 1] != 0xA5) fail(kErrRuntime, "workspace memory is not writable");
}

}  // namespace

const aclTensor& need(const aclTensor* t, const char* name) {
  if (t == nullptr) fail(kErrParamNullptr, std::string(name) + " is NULL");
  if (!hooks().is_live(Kind::kTensor, t))
    fail(kErrParamInvalid, std::string(name) + " is not a live aclTensor");
  if (!nd_family(t->format)) {
    fail(kErrParamInvalid, std::string(name) + " format " + std::to_string(static_cast<int>(t->format)) +
                               " not supported (ND, NCHW, NHWC or NCDHW)");
  }
  if (!view_fits_storage(*t)) {
    fail(kErrParamInvalid, std::string(name) + " view " + shape_text(t->dims) + " at offset " +
                               std::to_string(t->offset) + " reaches past its storage " +
                               shape_text(t->storage_dims));
  }
  if (t->data == nullptr && numel(*t) > 0)
    fail(kErrParamNullptr, std::string(name) + " has elements but no data");
  return *t;
}

void check_dtype(const aclTensor& t, const char* name, std::initializer_list<aclDataType> allowed) {
  for (aclDataType d : allowed) {
    if (t.dtype == d) return;
  }
  fail(kErrParamInvalid,
       std::string(name) + " dtype " + dtype_name(t.dtype) + " not supported (" + dtype_list(allowed) + ")");
}

void check_same_dtype(const aclTensor& t, const char* name, const aclTensor& ref, const char* ref_name) {
  if (t.dtype != ref.dtype) {
    fail(kErrParamInvalid, std::string(name) + " dtype " + dtype_name(t.dtype) + " must equal " + ref_name +
                               " dtype " + dtype_name(ref.dtype));
  }
}

void check_host_read(const aclTensor& t, const char* name) {
  if (const std::string why = hooks().host_read_hazard(t.data, storage(&t).bytes); !why.empty())
    fail(kErrRuntime, std::string(name) + " is read on the host, but " + why);
}

void check_contiguous(const aclTensor& t, const char* name) {
  if (!is_contiguous(t)) fail(kErrParamInvalid, std::string(name) + " must be contiguous");
}

void check_rank(const aclTensor& t, const char* name, size_t lo, size_t hi) {
  const size_t rank = t.dims.size();
  if (rank < lo || rank > hi) {
    fail(kErrTiling, std::string(name) + " rank " + std::to_string(rank) + " outside " + std::to_string(lo) +
                         ".." + std::to_string(hi));
  }
}

void check_shape(const aclTensor& t, const char* name, const std::vector<int64_t>& want,
                 const std::string& rule) {
  if (t.dims != want) {
    fail(kErrTiling, std::string(name) + " shape " + shape_text(t.dims) + " must be " + shape_text(want) +
                         " (" + rule + ")");
  }
}

std::string soc_name() { return hooks().soc(); }

Product product() {
  const std::string soc = soc_name();
  // An unnamed SoC is the runtime's failure to report it; the op libraries still know their part.
  if (soc.empty()) return Product::kA2;
  // "Ascend910B" alone is an old Atlas training part; the A2 names carry a digit after the B.
  if (starts_with(soc, "Ascend910B") && digit_at(soc, 10)) return Product::kA2;
  if (starts_with(soc, "Ascend910_93")) return Product::kA3;
  if (starts_with(soc, "Ascend950")) return Product::k950;
  if (starts_with(soc, "Ascend310P")) return Product::k310P;
  return Product::kOther;
}

void fail_product() { fail(kErrTiling, "not supported on this product (SoC " + soc_name() + ")"); }

aclnnStatus prepare(const char* symbol, const char* launch_symbol, uint64_t* workspace_size,
                    aclOpExecutor** executor, const std::function<Plan()>& check) {
  if (aclnnStatus injected = hooks().enter(symbol)) return injected;
  return guarded(symbol, [&] {
    if (workspace_size == nullptr) fail(kErrParamNullptr, "workspaceSize is NULL");
    if (executor == nullptr) fail(kErrParamNullptr, "executor is NULL");
    Plan plan = check();
    // Counted again under its first input's element type, so that tests can tell which kernel ran.
    if (!plan.inputs.empty() && plan.inputs[0] != nullptr) {
      hooks().enter((std::string(symbol) + "@" + dtype_name(plan.inputs[0]->dtype)).c_str());
    }
    bool has_work = false;
    for (const aclTensor* out : plan.outputs) has_work = has_work || numel(*out) > 0;
    auto made = std::make_unique<aclOpExecutor>();
    made->launch_symbol = launch_symbol;
    const uint64_t forced = hooks().workspace_override();
    // Like the vendor's, an op with nothing to write asks for no workspace.
    made->workspace_size = forced != 0 ? forced : has_work ? kDefaultWorkspace : 0;
    made->inputs = plan.inputs.size();
    made->tensors = std::move(plan.inputs);
    made->tensors.insert(made->tensors.end(), plan.outputs.begin(), plan.outputs.end());
    made->compute = std::move(plan.compute);
    hooks().add_live(Kind::kExecutor, made.get());
    *workspace_size = made->workspace_size;
    *executor = made.release();
    return kSuccess;
  });
}

namespace {

// A launched executor as its stream work holds it: the tensors stay pinned until the work is gone.
struct Launched {
  std::unique_ptr<aclOpExecutor> executor;
  ~Launched() {
    for (const aclTensor* t : executor->tensors) {
      if (t != nullptr && hooks().unpin(t)) delete t;
    }
  }
};

}  // namespace

aclnnStatus launch(const char* symbol, void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                   aclrtStream stream) {
  const aclnnStatus injected = hooks().enter(symbol);
  // Claiming the executor first makes a second launch, or a destroy after this one, an error.
  const bool owned = executor != nullptr && hooks().remove_live(Kind::kExecutor, executor);
  std::unique_ptr<aclOpExecutor> freed_on_return(owned ? executor : nullptr);
  if (injected != 0) return injected;
  return guarded(symbol, [&] {
    if (executor == nullptr) fail(kErrParamNullptr, "executor is NULL");
    if (!owned) fail(kErrParamInvalid, "executor is not live: already launched or destroyed");
    if (executor->launch_symbol != symbol) {
      fail(kErrParamInvalid, "executor was created for " + executor->launch_symbol);
    }
    if (workspace_size != executor->workspace_size) {
      fail(kErrParamInvalid, "workspaceSize " + std::to_string(workspace_size) + " differs from the " +
                                 std::to_string(executor->workspace_size) + " the first phase returned");
    }
    if (workspace == nullptr && workspace_size > 0)
      fail(kErrParamInvalid, "workspace is NULL but workspaceSize > 0");
    for (const aclTensor* t : executor->tensors) {
      if (!hooks().is_live(Kind::kTensor, t))
        fail(kErrParamInvalid, "an aclTensor of this call was destroyed before launch");
    }
    const Range scratch{workspace, workspace_size};
    Work work{symbol, {scratch}, {scratch}, nullptr};
    for (size_t i = 0; i < executor->tensors.size(); ++i) {
      const aclTensor* t = executor->tensors[i];
      if (t == nullptr) continue;  // an optional tensor not given
      (i < executor->inputs ? work.reads : work.writes).push_back(storage(t));
      hooks().pin(t);
    }
    auto launched = std::make_shared<Launched>();
    launched->executor = std::move(freed_on_return);
    work.run = [launched, workspace, workspace_size] {
      use_workspace(workspace, workspace_size);
      launched->executor->compute();
    };
    if (hooks().enqueue(stream, std::move(work)) != 0) fail(kErrRuntime, "stream is not a live aclrtStream");
    return kSuccess;
  });
}

}  // namespace aclemu

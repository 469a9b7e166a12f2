// The runtime half of libascendcl.so (runtime.cc) as the shared state (state.cc) reaches it.
#pragma once

#include <string>

#include "emulator.h"

typedef void* aclrtEvent;

namespace aclemu {

aclError enqueue(aclrtStream stream, Work work);
std::string host_read_hazard(const void* begin, size_t bytes);
// Runs every stream's queued work, so a reset starts from idle streams, and clears the copy
// counters and the memory limit (the peak restarts from the bytes live now).
void reset_runtime();

}  // namespace aclemu

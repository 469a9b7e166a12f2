// libhccl.so's meeting place: the ranks of one communicator, each a process on this machine, share a
// POSIX shared-memory segment named by the root info. It holds who arrived (pid and device per
// rank), the first failure any rank saw, and a data slot per rank through which collectives move
// their data a round at a time. Only lock-free atomics synchronise the processes: a rank killed
// at any point leaves no lock held, and its peers notice it is gone instead of hanging.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "aclnn/hccl_abi.h"
#include "op.h"

namespace aclemu::hccl {

// The bytes of one rank's data slot: a round moves at most this much per rank, so any count works
// with a segment of nRanks slots.
inline constexpr size_t kSlotBytes = size_t{1} << 20;
// The most ranks a group may have: one per emulated device, and ACLEMU_DEVICE_COUNT is at most 64.
inline constexpr uint32_t kMaxRanks = 64;
// The shared-memory names HcclGetRootInfo hands out start with this.
inline constexpr const char* kNamePrefix = "/aclemu-hccl-";

// What a rank says it runs in a round, so that ranks can check they run the same collective.
struct Descriptor {
  uint64_t seq = 0;  // the communicator's collective number
  uint64_t kind = 0, count = 0, dtype = 0, op = 0, root = 0;
};

struct JoinOptions {
  std::string name;  // of the shared-memory segment, from the root info
  uint32_t n_ranks = 0, rank = 0;
  int32_t device = 0;
  int connect_timeout = 0;  // seconds to wait for every rank to arrive
  int exec_timeout = 0;     // seconds a round waits for its peers; 0: no limit
};

// Failures throw aclemu::Error with an HcclResult as the code and a message without the symbol.
class Group {
 public:
  // Maps (creating if this rank is the first) the segment, claims `rank` and waits until every rank
  // arrived; then removes the name, so that nothing is left in /dev/shm whatever happens next.
  static std::unique_ptr<Group> join(const JoinOptions& options);
  ~Group();  // tells waiting peers this rank left, and unmaps
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  uint32_t size() const { return n_ranks_; }
  uint32_t rank() const { return rank_; }

  // The failure that broke the group (this rank's or one a peer posted); empty while it works.
  const std::string& broken() const { return broken_; }
  HcclResult broken_code() const { return broken_code_; }
  // Throws the failure that broke the group, if any.
  void throw_if_broken() const;
  // Breaks the group for every rank with this failure (the first posted wins), and throws it.
  [[noreturn]] void fail(HcclResult code, const std::string& message);

  // One round of a collective: waits until every peer read this rank's slot of the last round,
  // lets `fill` write the slot, publishes it with `mine`, waits until every rank published the same
  // round, then lets `use` read the slots (slot()) and descriptors (descriptor()). `what` names the
  // collective in failures ("HcclAllReduce, the communicator's collective 3").
  void round(const Descriptor& mine, const std::string& what, const std::function<void(char* slot)>& fill,
             const std::function<void()>& use);
  const char* slot(uint32_t rank) const;
  Descriptor descriptor(uint32_t rank) const;
  pid_t pid(uint32_t rank) const;

 private:
  struct Header;
  struct Member;
  Group() = default;
  void adopt_posted_fault();
  // Waits until ready(r) holds for every rank r; fails when a peer is gone or left, when a peer
  // posted a failure, or after `seconds` (0: no limit) naming the ranks missing.
  void wait_all(const std::function<bool(uint32_t)>& ready, int seconds, const char* timeout_env,
                const std::string& where);

  std::string name_;
  uint32_t n_ranks_ = 0, rank_ = 0;
  int exec_timeout_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  Header* header_ = nullptr;
  Member* members_ = nullptr;
  char* slots_ = nullptr;
  bool claimed_ = false;
  uint64_t step_ = 0;  // rounds this rank published
  std::string broken_;
  HcclResult broken_code_ = HCCL_SUCCESS;
};

}  // namespace aclemu::hccl

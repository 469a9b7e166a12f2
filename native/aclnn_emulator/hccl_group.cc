#include "hccl_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace aclemu::hccl {

namespace {

using Clock = std::chrono::steady_clock;
using oao::hccl::kConnectTimeoutEnv;
using oao::hccl::kExecTimeoutEnv;

constexpr size_t kPage = 4096;
constexpr size_t kFaultBytes = 1024;
// How often a wait asks whether the ranks it waits for still live: often enough that a killed
// peer fails the wait at once, rarely enough that the syscalls cost nothing next to the data.
constexpr auto kLivenessPeriod = std::chrono::milliseconds(10);
constexpr uint32_t kFaultPosting = 1, kFaultPosted = 2;

// The segment is shared by processes that may die anywhere, so only atomics that need no lock
// (and so no process-local state) live in it.
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<int32_t>::is_always_lock_free);

[[noreturn]] void throw_error(HcclResult code, std::string message) {
  aclemu::fail(code, std::move(message));
}

std::string errno_text(int error) { return std::strerror(error); }

std::string rank_list(const std::vector<uint32_t>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

// Whether process `pid` is gone: it no longer exists, or it is a zombie its parent has not reaped
// yet (which still answers kill(), as a rank of a test that started its ranks as children does).
bool gone(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* file = std::fopen(path, "r");
  if (file == nullptr) return kill(pid, 0) == -1 && errno == ESRCH;
  char stat[512];
  const size_t n = std::fread(stat, 1, sizeof stat - 1, file);
  std::fclose(file);
  stat[n] = '\0';
  // The state follows the command name, which is in parentheses and may hold anything.
  const char* close = std::strrchr(stat, ')');
  return close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

// Spins briefly for the common case of peers a moment behind, then sleeps longer and longer (up
// to a millisecond) so that ranks waiting for a slow peer leave the cores to it.
void back_off(unsigned& spins) {
  if (++spins < 64) {
    std::this_thread::yield();
    return;
  }
  const unsigned shift = spins - 64 < 7 ? spins - 64 : 7;
  std::this_thread::sleep_for(std::chrono::microseconds(8u << shift));
}

}  // namespace

struct Group::Header {
  // (nRanks << 32) | (rank + 1) of the first rank that arrived: later ranks must agree on nRanks.
  std::atomic<uint64_t> first;
  std::atomic<uint32_t> fault_state;  // 0, kFaultPosting, kFaultPosted
  std::atomic<int32_t> fault_code;
  char fault[kFaultBytes];  // written once, by the rank that moved fault_state from 0
};

struct alignas(64) Group::Member {
  std::atomic<int32_t> pid;  // 0: no process claimed the rank yet
  std::atomic<int32_t> device;
  std::atomic<uint32_t> arrived;  // pid and device are set
  std::atomic<uint32_t> left;     // the rank destroyed its communicator
  // Rounds: `posted` is the last round whose data and descriptor are in the slot, `consumed` the
  // last round whose slots this rank finished reading.
  std::atomic<uint64_t> posted, consumed;
  std::atomic<uint64_t> seq, kind, count, dtype, op, root;
};

namespace {

constexpr size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

std::unique_ptr<Group> Group::join(const JoinOptions& o) {
  std::unique_ptr<Group> g(new Group);
  g->name_ = o.name;
  g->n_ranks_ = o.n_ranks;
  g->rank_ = o.rank;
  g->exec_timeout_ = o.exec_timeout;
  // Header, members, slots: a fixed size for nRanks, the slots on pages of their own.
  const size_t members = round_up(sizeof(Header), alignof(Member));
  const size_t control = round_up(members + o.n_ranks * sizeof(Member), kPage);
  g->bytes_ = control + o.n_ranks * kSlotBytes;

  // Any rank may come first: all open with O_CREAT, and a fresh segment reads as zeros, which is
  // every field's initial state.
  const int fd = shm_open(o.name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) throw_error(HCCL_E_SYSCALL, "shm_open(" + o.name + ") failed: " + errno_text(errno));
  // posix_fallocate, not ftruncate: it only ever grows the segment, so a rank that asks for fewer
  // ranks (refused below) cannot shrink it under the mapping of one that asked for more; and a full
  // /dev/shm fails here, not as SIGBUS at the first touch of a slot.
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(g->bytes_)); error != 0) {
    close(fd);
    shm_unlink(o.name.c_str());
    throw_error(HCCL_E_MEMORY, "cannot size the shared memory " + o.name + " to " +
                                   std::to_string(g->bytes_) +
                                   " bytes (is /dev/shm full?): " + errno_text(error));
  }
  void* base = mmap(nullptr, g->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_error = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(o.name.c_str());
    throw_error(HCCL_E_MEMORY, "mmap of the shared memory " + o.name + " failed: " + errno_text(map_error));
  }
  g->base_ = base;
  g->header_ = static_cast<Header*>(base);
  g->members_ = reinterpret_cast<Member*>(static_cast<char*>(base) + members);
  g->slots_ = static_cast<char*>(base) + control;

  // From here the segment's name goes with any failure: a later rank then starts afresh rather
  // than meeting a dead group.
  try {
    const uint64_t mine = uint64_t{o.n_ranks} << 32 | (o.rank + 1);
    uint64_t first = 0;
    if (!g->header_->first.compare_exchange_strong(first, mine) && first >> 32 != o.n_ranks) {
      g->fail(HCCL_E_PARA, "rank " + std::to_string(o.rank) + " was given nRanks " +
                               std::to_string(o.n_ranks) + ", rank " +
                               std::to_string((first & 0xFFFFFFFFu) - 1) + " nRanks " +
                               std::to_string(first >> 32) + ": every rank must pass the same nRanks");
    }
    Member& me = g->members_[o.rank];
    int32_t holder = 0;
    if (!me.pid.compare_exchange_strong(holder, static_cast<int32_t>(getpid()))) {
      g->fail(HCCL_E_PARA, "rank " + std::to_string(o.rank) + " is claimed by two processes: pid " +
                               std::to_string(holder) + " and pid " + std::to_string(getpid()));
    }
    g->claimed_ = true;
    me.device.store(o.device, std::memory_order_relaxed);
    me.arrived.store(1, std::memory_order_release);
    g->wait_all([&g](uint32_t r) { return g->members_[r].arrived.load(std::memory_order_acquire) == 1; },
                o.connect_timeout, kConnectTimeoutEnv, "");
  } catch (...) {
    shm_unlink(o.name.c_str());
    throw;
  }
  // Every rank has mapped the segment: the name is no longer needed, by anyone.
  shm_unlink(o.name.c_str());
  for (uint32_t a = 0; a < o.n_ranks; ++a) {
    for (uint32_t b = a + 1; b < o.n_ranks; ++b) {
      const int32_t device = g->members_[a].device.load(std::memory_order_relaxed);
      if (device == g->members_[b].device.load(std::memory_order_relaxed)) {
        throw_error(HCCL_E_PARA, "ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                     " both use device " + std::to_string(device) +
                                     ": each rank needs a device of its own (aclrtSetDevice before "
                                     "HcclCommInitRootInfo)");
      }
    }
  }
  return g;
}

Group::~Group() {
  if (base_ == nullptr) return;
  if (claimed_) members_[rank_].left.store(1, std::memory_order_release);
  munmap(base_, bytes_);
}

void Group::throw_if_broken() const {
  if (!broken_.empty()) throw_error(broken_code_, broken_);
}

void Group::fail(HcclResult code, const std::string& message) {
  uint32_t state = 0;
  if (header_->fault_state.compare_exchange_strong(state, kFaultPosting)) {
    const size_t n = std::min(message.size(), kFaultBytes - 1);
    std::memcpy(header_->fault, message.data(), n);
    header_->fault[n] = '\0';
    header_->fault_code.store(code, std::memory_order_relaxed);
    header_->fault_state.store(kFaultPosted, std::memory_order_release);
  }
  broken_ = message;
  broken_code_ = code;
  throw_error(code, message);
}

// A failure a peer posted breaks this rank's group too, with the same words.
void Group::adopt_posted_fault() {
  if (header_->fault_state.load(std::memory_order_acquire) != kFaultPosted) return;
  broken_ = header_->fault;
  broken_code_ = static_cast<HcclResult>(header_->fault_code.load(std::memory_order_relaxed));
  throw_error(broken_code_, broken_);
}

void Group::wait_all(const std::function<bool(uint32_t)>& ready, int seconds, const char* timeout_env,
                     const std::string& where) {
  const Clock::time_point start = Clock::now();
  Clock::time_point next_check = start;
  unsigned spins = 0;
  for (;;) {
    adopt_posted_fault();
    std::vector<uint32_t> missing;
    for (uint32_t r = 0; r < n_ranks_; ++r) {
      if (!ready(r)) missing.push_back(r);
    }
    if (missing.empty()) return;
    const Clock::time_point now = Clock::now();
    if (now >= next_check) {
      for (uint32_t r : missing) {
        const pid_t p = members_[r].pid.load(std::memory_order_relaxed);
        if (p == 0) continue;  // not arrived: nobody to ask
        const std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(p) + ")";
        if (members_[r].left.load(std::memory_order_acquire) == 1)
          fail(HCCL_E_REMOTE,
               who + " destroyed its communicator" + (where.empty() ? "" : " before " + where));
        if (gone(p))
          fail(HCCL_E_REMOTE, who + " is gone" + (where.empty() ? "" : ", waited for in " + where));
      }
      next_check = now + kLivenessPeriod;
    }
    if (seconds > 0 && now - start >= std::chrono::seconds(seconds)) {
      fail(HCCL_E_TIMEOUT, rank_list(missing) + " did not arrive" + (where.empty() ? "" : " at " + where) +
                               " within " + std::to_string(seconds) + " s (" + timeout_env + "); " +
                               std::to_string(n_ranks_ - missing.size()) + " of " + std::to_string(n_ranks_) +
                               " ranks did");
    }
    back_off(spins);
  }
}

void Group::round(const Descriptor& mine, const std::string& what, const std::function<void(char*)>& fill,
                  const std::function<void()>& use) {
  throw_if_broken();
  const uint64_t step = step_ + 1;
  // The slot still holds the last round until every peer has read it.
  wait_all(
      [this, step](uint32_t r) { return members_[r].consumed.load(std::memory_order_acquire) >= step - 1; },
      exec_timeout_, kExecTimeoutEnv, what);
  Member& me = members_[rank_];
  fill(slots_ + rank_ * kSlotBytes);
  me.seq.store(mine.seq, std::memory_order_relaxed);
  me.kind.store(mine.kind, std::memory_order_relaxed);
  me.count.store(mine.count, std::memory_order_relaxed);
  me.dtype.store(mine.dtype, std::memory_order_relaxed);
  me.op.store(mine.op, std::memory_order_relaxed);
  me.root.store(mine.root, std::memory_order_relaxed);
  me.posted.store(step, std::memory_order_release);
  step_ = step;
  wait_all([this, step](uint32_t r) { return members_[r].posted.load(std::memory_order_acquire) >= step; },
           exec_timeout_, kExecTimeoutEnv, what);
  use();
  me.consumed.store(step, std::memory_order_release);
}

const char* Group::slot(uint32_t rank) const { return slots_ + rank * kSlotBytes; }

Descriptor Group::descriptor(uint32_t rank) const {
  const Member& m = members_[rank];
  constexpr auto kRelaxed = std::memory_order_relaxed;
  return {m.seq.load(kRelaxed),   m.kind.load(kRelaxed), m.count.load(kRelaxed),
          m.dtype.load(kRelaxed), m.op.load(kRelaxed),   m.root.load(kRelaxed)};
}

pid_t Group::pid(uint32_t rank) const { return members_[rank].pid.load(std::memory_order_relaxed); }

}  // namespace aclemu::hccl

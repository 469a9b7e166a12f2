// libhccl.so: HCCL's collectives between the processes of one machine, one rank per process and
// emulated device (ACLEMU_DEVICE_COUNT), meeting in shared memory (hccl_group.h). A collective
// checks its arguments at the call and queues its work on the stream, as every launch in this
// emulator does; the data moves when the host waits for the stream. The k-th collective each rank
// runs on a communicator meets the k-th of every other rank, and must be the same collective.
// Reductions run in rank order on every rank (rank 0's value, then rank 1's combined in, ...),
// float16 and bfloat16 through float32 and rounded once, so every rank gets the same bits.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "elements.h"
#include "hccl_group.h"

// libascendcl.so's, which the vendor's HCCL calls too.
extern "C" aclError aclrtGetDevice(int32_t* device_id);
extern "C" const char* aclGetRecentErrMsg(void);

namespace {

using aclemu::fail;
using aclemu::hooks;
using aclemu::Range;
using aclemu::hccl::Descriptor;
using aclemu::hccl::Group;
using aclemu::hccl::kSlotBytes;

enum Collective : uint64_t { kAllReduce = 1, kBroadcast, kReduceScatter, kAllGather, kBarrier };

constexpr const char* kCollectiveNames[] = {
    "", "HcclAllReduce", "HcclBroadcast", "HcclReduceScatter", "HcclAllGather", "HcclBarrier"};
// What each collective calls its count.
constexpr const char* kCountNames[] = {"", "count", "count", "recvCount", "sendCount", "count"};
constexpr const char* kTypeNames[] = {"INT8",   "INT16", "INT32",  "FP16",   "FP32", "INT64",
                                      "UINT64", "UINT8", "UINT16", "UINT32", "FP64", "BFP16"};
constexpr size_t kItemBytes[] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};
constexpr const char* kOpNames[] = {"SUM", "PROD", "MAX", "MIN"};
// A timeout past this is a typo, not a wish.
constexpr long kMostSeconds = 24L * 3600 * 365;

struct Comm {
  std::unique_ptr<Group> group;
  std::mutex run;    // one collective of a communicator at a time
  uint64_t ran = 0;  // collectives run (under `run`): the next one's number
  std::atomic<int64_t> queued{0};
  std::mutex state;  // guards the two below, which calls read while a collective runs
  std::string broken;
  HcclResult broken_code = HCCL_SUCCESS;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, std::shared_ptr<Comm>> live;
};

// Leaked on purpose, like the runtime's state: queued work may run while the process exits.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

HcclResult report(const char* symbol, HcclResult code, const std::string& message) {
  hooks().set_error(std::string(symbol) + ": " + message);
  return code;
}

// Runs an entry point's body; a failed check returns its code with "<symbol>: <message>" set.
template <typename Body>
HcclResult guarded(const char* symbol, Body body) {
  try {
    return body();
  } catch (const aclemu::Error& e) {
    return report(symbol, static_cast<HcclResult>(e.code), e.message);
  } catch (const std::exception& e) {
    return report(symbol, HCCL_E_INTERNAL, std::string("internal error: ") + e.what());
  }
}

std::shared_ptr<Comm> live_comm(HcclComm handle) {
  if (handle == nullptr) fail(HCCL_E_PTR, "comm is NULL");
  std::lock_guard<std::mutex> lock(registry().mu);
  const auto it = registry().live.find(handle);
  if (it == registry().live.end())
    fail(HCCL_E_PARA, "comm is not a live HcclComm (never made, or destroyed)");
  return it->second;
}

// Seconds from `env`, `fallback` when unset. The vendor's lower bounds are not applied, so that
// tests can give up after a second.
int seconds_from_env(const char* env, int fallback, long least) {
  const char* text = std::getenv(env);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < least || value > kMostSeconds) {
    fail(HCCL_E_PARA, std::string(env) + "=" + text + " is not a whole number of seconds in " +
                          std::to_string(least) + ".." + std::to_string(kMostSeconds));
  }
  return static_cast<int>(value);
}

std::string group_name(const HcclRootInfo& info) {
  const size_t length = strnlen(info.internal, 256);
  const std::string name(info.internal, length);
  const size_t prefix = std::strlen(aclemu::hccl::kNamePrefix);
  bool ours = length < 256 && length > prefix && name.compare(0, prefix, aclemu::hccl::kNamePrefix) == 0;
  for (size_t i = prefix; ours && i < length; ++i)
    ours = (name[i] >= '0' && name[i] <= '9') || name[i] == '-';
  if (!ours) fail(HCCL_E_PARA, "rootInfo was not made by HcclGetRootInfo (it names no emulated group)");
  return name;
}

int32_t current_device() {
  int32_t device = -1;
  if (const aclError code = aclrtGetDevice(&device); code != 0) {
    const char* why = aclGetRecentErrMsg();
    fail(HCCL_E_RUNTIME,
         "no device set on this thread: call aclrtSetDevice first (aclrtGetDevice failed with " +
             std::to_string(code) + (why != nullptr ? std::string(": ") + why : "") + ")");
  }
  return device;
}

// ---- Reductions -----------------------------------------------------------------------------

template <typename T, typename A>
struct Plain {
  using Acc = A;
  static constexpr size_t kBytes = sizeof(T);
  static A load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<A>(v);
  }
  static void store(char* p, A a) {
    const T v = static_cast<T>(a);
    std::memcpy(p, &v, sizeof v);
  }
};

// float16 and bfloat16 combine in float32 and round once, to nearest even.
template <float (*kWiden)(uint16_t), uint16_t (*kNarrow)(float)>
struct Half {
  using Acc = float;
  static constexpr size_t kBytes = 2;
  static float load(const char* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return kWiden(h);
  }
  static void store(char* p, float a) {
    const uint16_t h = kNarrow(a);
    std::memcpy(p, &h, sizeof h);
  }
};

template <HcclReduceOp kOp, typename A>
A combine(A a, A b) {
  if constexpr (kOp == HCCL_REDUCE_MAX || kOp == HCCL_REDUCE_MIN) {
    if constexpr (std::is_floating_point_v<A>) {  // NaN wins, as in NumPy's maximum
      if (a != a) return a;
      if (b != b) return b;
    }
    return (kOp == HCCL_REDUCE_MAX ? b > a : b < a) ? b : a;
  } else if constexpr (std::is_integral_v<A>) {
    // Integers wrap, as the device's do (Acc is 32 or 64 bits, so no promotion to int).
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(kOp == HCCL_REDUCE_SUM ? U(a) + U(b) : U(a) * U(b));
  } else {
    return kOp == HCCL_REDUCE_SUM ? a + b : a * b;
  }
}

// out[i] = from[0][i] combined with from[1][i], then from[2][i], ... in that order.
template <typename Codec, HcclReduceOp kOp>
void reduce(const std::vector<const char*>& from, char* out, size_t len) {
  using A = typename Codec::Acc;
  constexpr size_t kBlock = 512;
  constexpr size_t kItem = Codec::kBytes;
  A acc[kBlock];
  for (size_t i0 = 0; i0 < len; i0 += kBlock) {
    const size_t m = std::min(kBlock, len - i0);
    for (size_t i = 0; i < m; ++i) acc[i] = Codec::load(from[0] + (i0 + i) * kItem);
    for (size_t k = 1; k < from.size(); ++k) {
      for (size_t i = 0; i < m; ++i) acc[i] = combine<kOp>(acc[i], Codec::load(from[k] + (i0 + i) * kItem));
    }
    for (size_t i = 0; i < m; ++i) Codec::store(out + (i0 + i) * kItem, acc[i]);
  }
}

template <typename Codec>
void reduce_with(HcclReduceOp op, const std::vector<const char*>& from, char* out, size_t len) {
  switch (op) {
    case HCCL_REDUCE_SUM:
      return reduce<Codec, HCCL_REDUCE_SUM>(from, out, len);
    case HCCL_REDUCE_PROD:
      return reduce<Codec, HCCL_REDUCE_PROD>(from, out, len);
    case HCCL_REDUCE_MAX:
      return reduce<Codec, HCCL_REDUCE_MAX>(from, out, len);
    case HCCL_REDUCE_MIN:
      return reduce<Codec, HCCL_REDUCE_MIN>(from, out, len);
  }
}

void reduce_any(HcclDataType dtype, HcclReduceOp op, const std::vector<const char*>& from, char* out,
                size_t len) {
  using aclemu::bf16_to_float, aclemu::f16_to_float, aclemu::float_to_bf16, aclemu::float_to_f16;
  switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
      return reduce_with<Plain<int8_t, int32_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_INT16:
      return reduce_with<Plain<int16_t, int32_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_INT32:
      return reduce_with<Plain<int32_t, int32_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_FP16:
      return reduce_with<Half<f16_to_float, float_to_f16>>(op, from, out, len);
    case HCCL_DATA_TYPE_FP32:
      return reduce_with<Plain<float, float>>(op, from, out, len);
    case HCCL_DATA_TYPE_INT64:
      return reduce_with<Plain<int64_t, int64_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_UINT64:
      return reduce_with<Plain<uint64_t, uint64_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_UINT8:
      return reduce_with<Plain<uint8_t, uint32_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_UINT16:
      return reduce_with<Plain<uint16_t, uint32_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_UINT32:
      return reduce_with<Plain<uint32_t, uint32_t>>(op, from, out, len);
    case HCCL_DATA_TYPE_FP64:
      return reduce_with<Plain<double, double>>(op, from, out, len);
    case HCCL_DATA_TYPE_BFP16:
      return reduce_with<Half<bf16_to_float, float_to_bf16>>(op, from, out, len);
  }
}

// ---- Collectives ----------------------------------------------------------------------------

struct Request {
  Collective kind;
  uint64_t count;  // per rank: count, recvCount or sendCount
  HcclDataType dtype;
  HcclReduceOp op;
  uint32_t root;
  const char* send;
  char* recv;  // Broadcast's buf
};

void copy(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

// Every rank compares every rank's descriptor with rank 0's, so all post the same words.
void check_same(Group& g) {
  const Descriptor base = g.descriptor(0);
  for (uint32_t r = 1; r < g.size(); ++r) {
    const Descriptor d = g.descriptor(r);
    const std::string rank = "rank " + std::to_string(r);
    std::string differs;
    if (d.kind != base.kind) {
      differs = rank + " runs " + kCollectiveNames[d.kind] + ", rank 0 " + kCollectiveNames[base.kind];
    } else if (d.count != base.count) {
      differs = rank + " passed " + kCountNames[d.kind] + " " + std::to_string(d.count) + ", rank 0 " +
                kCountNames[d.kind] + " " + std::to_string(base.count);
    } else if (d.dtype != base.dtype) {
      differs =
          rank + " passed dataType " + kTypeNames[d.dtype] + ", rank 0 dataType " + kTypeNames[base.dtype];
    } else if (d.op != base.op) {
      differs = rank + " passed op " + kOpNames[d.op] + ", rank 0 op " + kOpNames[base.op];
    } else if (d.root != base.root) {
      differs =
          rank + " passed root " + std::to_string(d.root) + ", rank 0 root " + std::to_string(base.root);
    }
    if (!differs.empty()) {
      g.fail(HCCL_E_PARA, std::string(kCollectiveNames[base.kind]) + " (the communicator's collective " +
                              std::to_string(base.seq) + ") does not match across ranks: " + differs);
    }
  }
}

// Moves the data a slot at a time: each round every rank publishes its part, then reads all.
void exchange(Group& g, const Request& r, uint64_t seq) {
  const std::string what =
      std::string(kCollectiveNames[r.kind]) + " (the communicator's collective " + std::to_string(seq) + ")";
  const size_t item = kItemBytes[r.dtype];
  const uint32_t n = g.size(), me = g.rank();
  // ReduceScatter publishes a piece of every block in one slot.
  const uint64_t per_round = r.kind == kReduceScatter ? kSlotBytes / (item * n) : kSlotBytes / item;
  const uint64_t rounds = r.count == 0 ? 1 : (r.count + per_round - 1) / per_round;
  const Descriptor mine{seq,   r.kind, r.count, static_cast<uint64_t>(r.dtype), static_cast<uint64_t>(r.op),
                        r.root};
  std::vector<const char*> from(n);
  for (uint64_t i = 0; i < rounds; ++i) {
    const uint64_t first = i * per_round;
    const size_t len = static_cast<size_t>(std::min(per_round, r.count - first));
    const size_t bytes = len * item, at = first * item;
    const auto fill = [&](char* slot) {
      if (r.kind == kReduceScatter) {
        for (uint32_t b = 0; b < n; ++b) copy(slot + b * bytes, r.send + (b * r.count + first) * item, bytes);
      } else if (r.kind == kAllReduce || r.kind == kAllGather || (r.kind == kBroadcast && me == r.root)) {
        copy(slot, r.send + at, bytes);
      }
    };
    const auto use = [&] {
      check_same(g);
      if (r.kind == kAllReduce || r.kind == kReduceScatter) {
        const size_t offset = r.kind == kReduceScatter ? me * bytes : 0;
        for (uint32_t k = 0; k < n; ++k) from[k] = g.slot(k) + offset;
        if (len > 0) reduce_any(r.dtype, r.op, from, r.recv + at, len);
      } else if (r.kind == kAllGather) {
        for (uint32_t k = 0; k < n; ++k) copy(r.recv + (k * r.count + first) * item, g.slot(k), bytes);
      } else if (r.kind == kBroadcast && me != r.root) {
        copy(r.recv + at, g.slot(r.root), bytes);
      }
    };
    g.round(mine, what, fill, use);
  }
}

// The stream's work: the k-th to run on a communicator is its collective k.
void run(Comm& c, const Request& r) {
  std::lock_guard<std::mutex> lock(c.run);
  struct Done {
    Comm& c;
    ~Done() { --c.queued; }
  } done{c};
  const uint64_t seq = c.ran++;
  {
    std::lock_guard<std::mutex> state(c.state);
    if (!c.broken.empty()) fail(c.broken_code, "the communicator is broken: " + c.broken);
  }
  try {
    exchange(*c.group, r, seq);
  } catch (const aclemu::Error& e) {
    std::lock_guard<std::mutex> state(c.state);
    if (c.broken.empty()) {
      c.broken = e.message;
      c.broken_code = static_cast<HcclResult>(e.code);
    }
    throw;
  }
}

size_t item_bytes(HcclDataType dtype) {
  if (dtype < HCCL_DATA_TYPE_INT8 || dtype > HCCL_DATA_TYPE_BFP16) {
    fail(HCCL_E_PARA, "dataType " + std::to_string(static_cast<int>(dtype)) +
                          " is not an HcclDataType (0 INT8 .. 11 BFP16)");
  }
  return kItemBytes[dtype];
}

void check_op(HcclReduceOp op) {
  if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN)
    fail(HCCL_E_PARA,
         "op " + std::to_string(static_cast<int>(op)) + " is not an HcclReduceOp (0 SUM .. 3 MIN)");
}

std::string range_text(const void* p, size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "[%p, +%zu)", p, bytes);
  return text;
}

// The smaller buffer may lie on a block boundary of the larger (in place; AllReduce: the same
// start), since a round writes only bytes that round already read; any other overlap would read
// what the collective itself wrote.
void check_overlap(const char* small_name, const void* small, size_t block, const char* large_name,
                   const void* large, uint32_t blocks) {
  const auto* s = static_cast<const char*>(small);
  const auto* l = static_cast<const char*>(large);
  const size_t large_bytes = block * blocks;
  if (s + block <= l || l + large_bytes <= s) return;
  if (s >= l && (s - l) % block == 0) return;
  fail(HCCL_E_PARA,
       std::string(small_name) + " " + range_text(small, block) + " overlaps " + large_name + " " +
           range_text(large, large_bytes) + " other than in place (" + small_name + " at the start of " +
           (blocks == 1 ? std::string("it") : "one of its " + std::to_string(blocks) + " blocks") + ")");
}

// Checks what every collective shares and queues `r` on `stream`; `bytes` is what this rank hands
// in, for aclemu_collective_bytes.
HcclResult submit(const char* symbol, HcclComm handle, aclrtStream stream, Request r) {
  const std::shared_ptr<Comm> c = live_comm(handle);
  const uint32_t n = c->group->size();
  const size_t item = r.kind == kBarrier ? 1 : item_bytes(r.dtype);
  if (r.kind == kAllReduce || r.kind == kReduceScatter) check_op(r.op);
  const uint32_t blocks = r.kind == kReduceScatter || r.kind == kAllGather ? n : 1;
  if (r.count > SIZE_MAX / item / blocks)
    fail(HCCL_E_PARA, std::string(kCountNames[r.kind]) + " " + std::to_string(r.count) + " is too large");
  const size_t block = r.count * item;
  if (r.kind == kBroadcast && r.root >= n) {
    fail(HCCL_E_PARA, "root " + std::to_string(r.root) + " is not below the communicator's " +
                          std::to_string(n) + " ranks");
  }
  std::vector<Range> reads, writes;
  if (r.count > 0) {
    if (r.kind == kBroadcast) {
      if (r.recv == nullptr) fail(HCCL_E_PTR, "buf is NULL");
      (c->group->rank() == r.root ? reads : writes).push_back({r.recv, block});
    } else {
      if (r.send == nullptr) fail(HCCL_E_PTR, "sendBuf is NULL");
      if (r.recv == nullptr) fail(HCCL_E_PTR, "recvBuf is NULL");
      if (r.kind == kAllGather)
        check_overlap("sendBuf", r.send, block, "recvBuf", r.recv, n);
      else
        check_overlap("recvBuf", r.recv, block, "sendBuf", r.send, blocks);
      reads.push_back({r.send, r.kind == kReduceScatter ? block * n : block});
      writes.push_back({r.recv, r.kind == kAllGather ? block * n : block});
    }
  }
  {
    std::lock_guard<std::mutex> state(c->state);
    if (!c->broken.empty()) fail(c->broken_code, "the communicator is broken: " + c->broken);
  }
  ++c->queued;
  // The enqueue hook refuses a stream that is not live, naming the symbol.
  if (hooks().enqueue(stream, aclemu::Work{symbol, reads, writes, [c, r] { run(*c, r); }}) != 0) {
    --c->queued;
    return HCCL_E_PARA;
  }
  const uint64_t handed = r.kind == kBarrier ? 0 : r.kind == kReduceScatter ? block * n : block;
  hooks().add_collective_bytes(symbol, handed);
  return HCCL_SUCCESS;
}

}  // namespace

ACLEMU_API HcclResult HcclGetRootInfo(HcclRootInfo* root_info) {
  constexpr const char* kSymbol = "HcclGetRootInfo";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  if (root_info == nullptr) return report(kSymbol, HCCL_E_PTR, "rootInfo is NULL");
  // Unique on this machine: no other process has this pid now, and this one counts its calls.
  static std::atomic<uint64_t> made{0};
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  std::memset(root_info, 0, sizeof *root_info);
  std::snprintf(root_info->internal, sizeof root_info->internal, "%s%d-%lld%09ld-%llu",
                aclemu::hccl::kNamePrefix, static_cast<int>(getpid()), static_cast<long long>(now.tv_sec),
                now.tv_nsec, static_cast<unsigned long long>(made++));
  return HCCL_SUCCESS;
}

ACLEMU_API HcclResult HcclCommInitRootInfo(uint32_t n_ranks, const HcclRootInfo* root_info, uint32_t rank,
                                           HcclComm* comm) {
  constexpr const char* kSymbol = "HcclCommInitRootInfo";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    if (root_info == nullptr) fail(HCCL_E_PTR, "rootInfo is NULL");
    if (comm == nullptr) fail(HCCL_E_PTR, "comm is NULL");
    if (n_ranks == 0) fail(HCCL_E_PARA, "nRanks is 0");
    if (n_ranks > aclemu::hccl::kMaxRanks) {
      fail(HCCL_E_PARA, "nRanks " + std::to_string(n_ranks) + " exceeds " +
                            std::to_string(aclemu::hccl::kMaxRanks) + ", the most devices the emulator has");
    }
    if (rank >= n_ranks)
      fail(HCCL_E_PARA, "rank " + std::to_string(rank) + " is not below nRanks " + std::to_string(n_ranks));
    aclemu::hccl::JoinOptions options;
    options.name = group_name(*root_info);
    options.n_ranks = n_ranks;
    options.rank = rank;
    options.device = current_device();
    options.connect_timeout =
        seconds_from_env(oao::hccl::kConnectTimeoutEnv, oao::hccl::kDefaultConnectTimeout, 1);
    options.exec_timeout = seconds_from_env(oao::hccl::kExecTimeoutEnv, oao::hccl::kDefaultExecTimeout, 0);
    auto made = std::make_shared<Comm>();
    made->group = Group::join(options);
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().live[made.get()] = made;
    *comm = made.get();
    return HCCL_SUCCESS;
  });
}

// A communicator whose collectives have not all run is kept, as aclrtFree keeps memory queued work
// uses: the caller must synchronize their streams first (destroying the stream runs its work too).
ACLEMU_API HcclResult HcclCommDestroy(HcclComm comm) {
  constexpr const char* kSymbol = "HcclCommDestroy";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    const std::shared_ptr<Comm> c = live_comm(comm);
    std::lock_guard<std::mutex> lock(registry().mu);
    if (const int64_t queued = c->queued.load(); queued > 0) {
      fail(HCCL_E_INTERNAL, std::to_string(queued) +
                                (queued == 1 ? " collective queued on this communicator has"
                                             : " collectives queued on this communicator have") +
                                " not run: synchronize their stream first");
    }
    registry().live.erase(comm);
    return HCCL_SUCCESS;
  });
}

ACLEMU_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rank_size) {
  constexpr const char* kSymbol = "HcclGetRankSize";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    const std::shared_ptr<Comm> c = live_comm(comm);
    if (rank_size == nullptr) fail(HCCL_E_PTR, "rankSize is NULL");
    *rank_size = c->group->size();
    return HCCL_SUCCESS;
  });
}

ACLEMU_API HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
  constexpr const char* kSymbol = "HcclGetRankId";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    const std::shared_ptr<Comm> c = live_comm(comm);
    if (rank == nullptr) fail(HCCL_E_PTR, "rank is NULL");
    *rank = c->group->rank();
    return HCCL_SUCCESS;
  });
}

ACLEMU_API HcclResult HcclAllReduce(void* send_buf, void* recv_buf, uint64_t count, HcclDataType data_type,
                                    HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  constexpr const char* kSymbol = "HcclAllReduce";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    return submit(kSymbol, comm, stream,
                  {kAllReduce, count, data_type, op, 0, static_cast<const char*>(send_buf),
                   static_cast<char*>(recv_buf)});
  });
}

ACLEMU_API HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType data_type, uint32_t root,
                                    HcclComm comm, aclrtStream stream) {
  constexpr const char* kSymbol = "HcclBroadcast";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    return submit(kSymbol, comm, stream,
                  {kBroadcast, count, data_type, HCCL_REDUCE_SUM, root, static_cast<const char*>(buf),
                   static_cast<char*>(buf)});
  });
}

ACLEMU_API HcclResult HcclReduceScatter(void* send_buf, void* recv_buf, uint64_t recv_count,
                                        HcclDataType data_type, HcclReduceOp op, HcclComm comm,
                                        aclrtStream stream) {
  constexpr const char* kSymbol = "HcclReduceScatter";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    return submit(kSymbol, comm, stream,
                  {kReduceScatter, recv_count, data_type, op, 0, static_cast<const char*>(send_buf),
                   static_cast<char*>(recv_buf)});
  });
}

ACLEMU_API HcclResult HcclAllGather(void* send_buf, void* recv_buf, uint64_t send_count,
                                    HcclDataType data_type, HcclComm comm, aclrtStream stream) {
  constexpr const char* kSymbol = "HcclAllGather";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    return submit(kSymbol, comm, stream,
                  {kAllGather, send_count, data_type, HCCL_REDUCE_SUM, 0, static_cast<const char*>(send_buf),
                   static_cast<char*>(recv_buf)});
  });
}

ACLEMU_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
  constexpr const char* kSymbol = "HcclBarrier";
  if (const aclnnStatus injected = hooks().enter(kSymbol)) return static_cast<HcclResult>(injected);
  return guarded(kSymbol, [&] {
    return submit(kSymbol, comm, stream,
                  {kBarrier, 0, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 0, nullptr, nullptr});
  });
}

// The definitions above must keep the ABI callers bind.
static_assert(std::is_same_v<decltype(&HcclGetRootInfo), oao::hccl::GetRootInfo>);
static_assert(std::is_same_v<decltype(&HcclCommInitRootInfo), oao::hccl::CommInitRootInfo>);
static_assert(std::is_same_v<decltype(&HcclCommDestroy), oao::hccl::CommDestroy>);
static_assert(std::is_same_v<decltype(&HcclGetRankSize), oao::hccl::GetRankSize>);
static_assert(std::is_same_v<decltype(&HcclGetRankId), oao::hccl::GetRankId>);
static_assert(std::is_same_v<decltype(&HcclAllReduce), oao::hccl::AllReduce>);
static_assert(std::is_same_v<decltype(&HcclBroadcast), oao::hccl::Broadcast>);
static_assert(std::is_same_v<decltype(&HcclReduceScatter), oao::hccl::ReduceScatter>);
static_assert(std::is_same_v<decltype(&HcclAllGather), oao::hccl::AllGather>);
static_assert(std::is_same_v<decltype(&HcclBarrier), oao::hccl::Barrier>);

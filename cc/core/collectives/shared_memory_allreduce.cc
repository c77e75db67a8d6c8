#include "cc/core/collectives/shared_memory_allreduce.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "cc/core/numeric/convert.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/transport/polite_wait.h"

namespace tfdist {

namespace {

constexpr size_t kCacheLine = 64;

// How long a wait trusts a silent peer before it asks whether its process
// still exists, and how often it asks again.
constexpr auto kCheckPeerAfter = std::chrono::seconds(1);
constexpr auto kCheckPeerEvery = std::chrono::milliseconds(100);

bool ProcessExists(int64_t pid) {
  if (pid <= 0) return true;  // not written yet: the peer has not started
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

}  // namespace

// The counters sit on cache lines of their own: each is written by its rank
// alone and read by the others, and sharing a line would make every write
// invalidate the readers' copies of the other.
struct SharedMemoryAllreduce::Control {
  alignas(kCacheLine) std::atomic<uint64_t> arrived;
  alignas(kCacheLine) std::atomic<uint64_t> reduced;
  alignas(kCacheLine) std::atomic<int64_t> pid;
};

static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "the counters are shared between processes: they must be plain lock-free words");

size_t SharedMemoryAllreduce::RegionBytes(size_t slot_bytes) {
  return sizeof(Control) + 2 * slot_bytes;
}

SharedMemoryAllreduce::SharedMemoryAllreduce(int rank, std::vector<char*> regions,
                                             size_t slot_bytes, bool oversubscribed,
                                             int64_t process_id)
    : rank_(rank),
      regions_(std::move(regions)),
      slot_bytes_(slot_bytes),
      oversubscribed_(oversubscribed) {
  // Zeroed memory holds zero counters; placement-new makes them atomics
  // without touching the peers' view of them.
  Control* mine = new (regions_[rank_]) Control;
  mine->pid.store(process_id != 0 ? process_id : static_cast<int64_t>(getpid()),
                  std::memory_order_relaxed);
}

SharedMemoryAllreduce::Control& SharedMemoryAllreduce::control(int q) const {
  return *reinterpret_cast<Control*>(regions_[q]);
}

bool SharedMemoryAllreduce::PeersVisible() const {
  for (int q = 0; q < size(); ++q) {
    const int64_t pid = control(q).pid.load(std::memory_order_relaxed);
    if (q != rank_ && (pid <= 0 || !ProcessExists(pid))) return false;
  }
  return true;
}

char* SharedMemoryAllreduce::slot(int q, uint64_t round) const {
  return regions_[q] + sizeof(Control) + (round & 1) * slot_bytes_;
}

Status SharedMemoryAllreduce::WaitForPeers(std::atomic<uint64_t> Control::*counter,
                                           uint64_t round, const char* step) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_check = start + kCheckPeerAfter;
  int dead_peer = -1;
  int waiting_for = 0;
  auto poll = [&]() -> std::optional<bool> {
    for (; waiting_for < size(); ++waiting_for) {
      if (waiting_for == rank_) continue;
      if ((control(waiting_for).*counter).load(std::memory_order_acquire) < round) break;
    }
    if (waiting_for == size()) return true;
    const auto now = Clock::now();
    if (now >= next_check) {
      next_check = now + kCheckPeerEvery;
      if (!ProcessExists(control(waiting_for).pid.load(std::memory_order_relaxed))) {
        dead_peer = waiting_for;
        return false;
      }
    }
    return std::nullopt;
  };
  if (WaitPolitely(poll, [](bool ok) { return ok; }, WaitKind::kTransfer, oversubscribed_)) {
    return Status::OK();
  }
  return Status::Internal("shared-memory allreduce: rank " + std::to_string(dead_peer) +
                          "'s process ended while rank " + std::to_string(rank_) +
                          " waited for it to " + step);
}

Status SharedMemoryAllreduce::Allreduce(const void* input, void* output, size_t count,
                                        DataType dtype, ReduceOp op, double result_scale) {
  const size_t element = DataTypeSize(dtype);
  const int p = size();
  if (p == 1) {
    ConvertScaled(input, dtype, output, dtype, count, result_scale);
    return Status::OK();
  }
  const size_t chunk_elements = slot_bytes_ / element;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  for (size_t done = 0; done < count; done += chunk_elements) {
    const size_t n = std::min(chunk_elements, count - done);
    const uint64_t round = ++round_;
    auto part_begin = [n, p](int q) { return n * static_cast<size_t>(q) / p; };
    const size_t chunk_offset = done * element;
    // Step 1: the parts the peers reduce. The slot last held round − 2,
    // which every peer has copied out once it arrives in round − 1.
    TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::arrived, round - 1, "start a chunk"));
    char* mine = slot(rank_, round);
    for (int q = 0; q < p; ++q) {
      if (q == rank_) continue;
      const size_t begin = part_begin(q) * element;
      std::memcpy(mine + begin, in + chunk_offset + begin,
                  (part_begin(q + 1) - part_begin(q)) * element);
    }
    control(rank_).arrived.store(round, std::memory_order_release);

    // Step 2: this rank's part, from its input and every peer's slot.
    TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::arrived, round, "fill its slot"));
    const size_t begin = part_begin(rank_) * element;
    const size_t part = part_begin(rank_ + 1) - part_begin(rank_);
    for (int step = 1; step < p; ++step) {
      const int q = (rank_ + step) % p;
      const char* theirs = slot(q, round) + begin;
      const double factor = step == p - 1 ? result_scale : 1.0;
      if (step == 1) {
        ReduceOutOfPlace(mine + begin, in + chunk_offset + begin, theirs, part, dtype, op,
                         factor);
      } else if (factor != 1.0) {
        ReduceIntoScaled(mine + begin, theirs, part, dtype, op, factor);
      } else {
        ReduceInto(mine + begin, theirs, part, dtype, op);
      }
    }
    control(rank_).reduced.store(round, std::memory_order_release);

    // Step 3: every rank's reduced part into the output.
    TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::reduced, round, "reduce its part"));
    for (int step = 0; step < p; ++step) {
      const int q = (rank_ + step) % p;
      const size_t from = part_begin(q) * element;
      std::memcpy(out + chunk_offset + from, slot(q, round) + from,
                  (part_begin(q + 1) - part_begin(q)) * element);
    }
  }
  return Status::OK();
}

}  // namespace tfdist

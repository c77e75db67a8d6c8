#include "cc/core/collectives/shared_memory_allreduce.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
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
  if (WaitPolitely(poll, [](bool ok) { return ok; }, WaitKind::kTransfer, oversubscribed_,
                   PollsProgress::kNo)) {
    return Status::OK();
  }
  return Status::Internal("shared-memory allreduce: rank " + std::to_string(dead_peer) +
                          "'s process ended while rank " + std::to_string(rank_) +
                          " waited for it to " + step);
}

Status SharedMemoryAllreduce::Allreduce(const void* input, void* output, size_t count,
                                        DataType dtype, ReduceOp op, double result_scale) {
  const RingSpan span{count * DataTypeSize(dtype), static_cast<unsigned char*>(output),
                      input == output ? nullptr : static_cast<const unsigned char*>(input)};
  return AllreduceSpans({span}, dtype, op, result_scale);
}

namespace {

// Calls visit(span, offset in it, bytes, offset in the whole) for each piece
// of the bytes [begin, end) of the spans taken as one vector.
template <typename Visit>
void ForEachPiece(const std::vector<RingSpan>& spans, size_t begin, size_t end, Visit visit) {
  size_t span_start = 0;
  for (const RingSpan& span : spans) {
    const size_t span_end = span_start + span.bytes;
    const size_t from = std::max(begin, span_start);
    const size_t to = std::min(end, span_end);
    if (from < to) visit(span, from - span_start, to - from, from);
    if (span_end >= end) return;
    span_start = span_end;
  }
}

const unsigned char* SourceOf(const RingSpan& span) {
  return span.source != nullptr ? span.source : span.data;
}

}  // namespace

Status SharedMemoryAllreduce::AllreduceSpans(const std::vector<RingSpan>& spans, DataType dtype,
                                             ReduceOp op, double result_scale) {
  const size_t element = DataTypeSize(dtype);
  const int p = size();
  size_t total = 0;
  for (const RingSpan& span : spans) total += span.bytes;
  if (p == 1) {
    for (const RingSpan& span : spans) {
      ConvertScaled(SourceOf(span), dtype, span.data, dtype, span.bytes / element, result_scale);
    }
    return Status::OK();
  }
  const size_t chunk_bytes = slot_bytes_ / element * element;
  for (size_t done = 0; done < total; done += chunk_bytes) {
    const size_t n = std::min(chunk_bytes, total - done) / element;
    const uint64_t round = ++round_;
    // Byte offsets of rank q's part within the chunk.
    auto part_begin = [n, p, element](int q) { return n * static_cast<size_t>(q) / p * element; };
    // Step 1: the parts the peers reduce. The slot last held round - 2,
    // which every peer has copied out once it arrives in round - 1.
    TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::arrived, round - 1, "start a chunk"));
    char* mine = slot(rank_, round);
    for (int q = 0; q < p; ++q) {
      if (q == rank_) continue;
      ForEachPiece(spans, done + part_begin(q), done + part_begin(q + 1),
                   [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                     std::memcpy(mine + (at - done), SourceOf(span) + offset, bytes);
                   });
    }
    control(rank_).arrived.store(round, std::memory_order_release);

    // Step 2: this rank's part, from its input and every peer's slot.
    TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::arrived, round, "fill its slot"));
    const size_t begin = part_begin(rank_);
    const size_t part = (part_begin(rank_ + 1) - begin) / element;
    for (int step = 1; step < p; ++step) {
      const int q = (rank_ + step) % p;
      const char* theirs = slot(q, round);
      const double factor = step == p - 1 ? result_scale : 1.0;
      if (step == 1) {
        ForEachPiece(spans, done + begin, done + begin + part * element,
                     [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                       ReduceOutOfPlace(mine + (at - done), SourceOf(span) + offset,
                                        theirs + (at - done), bytes / element, dtype, op,
                                        factor);
                     });
      } else if (factor != 1.0) {
        ReduceIntoScaled(mine + begin, theirs + begin, part, dtype, op, factor);
      } else {
        ReduceInto(mine + begin, theirs + begin, part, dtype, op);
      }
    }
    control(rank_).reduced.store(round, std::memory_order_release);

    // Step 3: every rank's reduced part into the output.
    TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::reduced, round, "reduce its part"));
    for (int step = 0; step < p; ++step) {
      const int q = (rank_ + step) % p;
      const char* reduced = slot(q, round);
      ForEachPiece(spans, done + part_begin(q), done + part_begin(q + 1),
                   [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                     std::memcpy(span.data + offset, reduced + (at - done), bytes);
                   });
    }
  }
  return Status::OK();
}

}  // namespace tfdist

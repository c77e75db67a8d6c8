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

#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/collectives/side_thread.h"
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
  alignas(kCacheLine) std::atomic<uint64_t> copied;
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

size_t SharedMemoryAllreduce::PartBegin(size_t n, int q) const {
  return ChunkBegin(n, size(), q);
}

// Step 1: the parts the peers reduce. The slot last held round - 2, which
// every peer has copied out once its `copied` counter says so.
Status SharedMemoryAllreduce::FillSlot(const std::vector<RingSpan>& spans, const Chunk& chunk) {
  const uint64_t refilled = chunk.round >= 2 ? chunk.round - 2 : 0;
  TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::copied, refilled, "copy a chunk out"));
  char* mine = slot(rank_, chunk.round);
  for (int q = 0; q < size(); ++q) {
    if (q == rank_) continue;
    ForEachPiece(spans, chunk.done + PartBegin(chunk.n, q) * chunk.element,
                 chunk.done + PartBegin(chunk.n, q + 1) * chunk.element,
                 [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                   std::memcpy(mine + (at - chunk.done), SourceOf(span) + offset, bytes);
                 });
  }
  control(rank_).arrived.store(chunk.round, std::memory_order_release);
  return Status::OK();
}

// Step 2: this rank's part, from its input and every peer's slot, into its
// own slot, the last reduction scaled by `factor`.
Status SharedMemoryAllreduce::ReducePart(const std::vector<RingSpan>& spans, const Chunk& chunk,
                                         DataType dtype, ReduceOp op, double factor) {
  TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::arrived, chunk.round, "fill its slot"));
  const int p = size();
  const size_t element = chunk.element;
  char* mine = slot(rank_, chunk.round);
  const size_t begin = PartBegin(chunk.n, rank_) * element;
  const size_t part = PartBegin(chunk.n, rank_ + 1) - PartBegin(chunk.n, rank_);
  if (p == 1) {  // a host of one rank across hosts: its part is its input
    ForEachPiece(spans, chunk.done, chunk.done + part * element,
                 [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                   ConvertScaled(SourceOf(span) + offset, dtype, mine + (at - chunk.done), dtype,
                                 bytes / element, factor);
                 });
  }
  for (int step = 1; step < p; ++step) {
    const int q = (rank_ + step) % p;
    const char* theirs = slot(q, chunk.round);
    const double step_factor = step == p - 1 ? factor : 1.0;
    if (step == 1) {
      ForEachPiece(spans, chunk.done + begin, chunk.done + begin + part * element,
                   [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                     ReduceOutOfPlace(mine + (at - chunk.done), SourceOf(span) + offset,
                                      theirs + (at - chunk.done), bytes / element, dtype, op,
                                      step_factor);
                   });
    } else if (step_factor != 1.0) {
      ReduceIntoScaled(mine + begin, theirs + begin, part, dtype, op, step_factor);
    } else {
      ReduceInto(mine + begin, theirs + begin, part, dtype, op);
    }
  }
  return Status::OK();
}

// Step 3: every rank's final part into the output, scaled by `factor`.
Status SharedMemoryAllreduce::CopyOut(const std::vector<RingSpan>& spans, const Chunk& chunk,
                                      DataType dtype, double factor) {
  TFDIST_RETURN_IF_ERROR(WaitForPeers(&Control::reduced, chunk.round, "reduce its part"));
  for (int step = 0; step < size(); ++step) {
    const int q = (rank_ + step) % size();
    const char* reduced = slot(q, chunk.round);
    ForEachPiece(spans, chunk.done + PartBegin(chunk.n, q) * chunk.element,
                 chunk.done + PartBegin(chunk.n, q + 1) * chunk.element,
                 [&](const RingSpan& span, size_t offset, size_t bytes, size_t at) {
                   ConvertScaled(reduced + (at - chunk.done), dtype, span.data + offset, dtype,
                                 bytes / chunk.element, factor);
                 });
  }
  control(rank_).copied.store(chunk.round, std::memory_order_release);
  return Status::OK();
}

Status SharedMemoryAllreduce::AllreduceSpans(const std::vector<RingSpan>& spans, DataType dtype,
                                             ReduceOp op, double result_scale) {
  const size_t element = DataTypeSize(dtype);
  size_t total = 0;
  for (const RingSpan& span : spans) total += span.bytes;
  if (size() == 1) {
    for (const RingSpan& span : spans) {
      ConvertScaled(SourceOf(span), dtype, span.data, dtype, span.bytes / element, result_scale);
    }
    return Status::OK();
  }
  const size_t chunk_bytes = slot_bytes_ / element * element;
  for (size_t done = 0; done < total; done += chunk_bytes) {
    const Chunk chunk{++round_, done, std::min(chunk_bytes, total - done) / element, element};
    TFDIST_RETURN_IF_ERROR(FillSlot(spans, chunk));
    TFDIST_RETURN_IF_ERROR(ReducePart(spans, chunk, dtype, op, result_scale));
    control(rank_).reduced.store(chunk.round, std::memory_order_release);
    TFDIST_RETURN_IF_ERROR(CopyOut(spans, chunk, dtype, 1.0));
  }
  return Status::OK();
}

Status SharedMemoryAllreduce::AllreduceSpansAcrossHosts(const std::vector<RingSpan>& spans,
                                                        DataType dtype, ReduceOp op,
                                                        double result_scale,
                                                        size_t chunk_bytes,
                                                        const CrossPhase& cross) {
  const size_t element = DataTypeSize(dtype);
  size_t total = 0;
  for (const RingSpan& span : spans) total += span.bytes;
  chunk_bytes = std::clamp(chunk_bytes / element * element, element, slot_bytes_ / element * element);
  SideThread& side = CallersSideThread();
  // Chunk c's phase across hosts runs on the side thread while this thread
  // fills and reduces chunk c + 1; then this thread copies chunk c out. Two
  // slots are enough: chunk c + 2 refills chunk c's slot only once every
  // rank of the host has copied chunk c out (FillSlot).
  struct InFlight {
    Chunk chunk;
    std::future<Status> crossed;
  };
  std::vector<InFlight> in_flight;
  Status result;
  auto finish = [&](InFlight& chunk) -> Status {
    const Status crossed = chunk.crossed.get();
    TFDIST_RETURN_IF_ERROR(crossed);
    return CopyOut(spans, chunk.chunk, dtype, result_scale);
  };
  for (size_t done = 0; done < total && result.ok(); done += chunk_bytes) {
    const Chunk chunk{++round_, done, std::min(chunk_bytes, total - done) / element, element};
    result = FillSlot(spans, chunk);
    if (result.ok()) result = ReducePart(spans, chunk, dtype, op, 1.0);
    if (!result.ok()) break;
    char* part = slot(rank_, chunk.round) + PartBegin(chunk.n, rank_) * element;
    const size_t part_count = PartBegin(chunk.n, rank_ + 1) - PartBegin(chunk.n, rank_);
    Control& mine = control(rank_);
    in_flight.push_back({chunk, side.Submit([&cross, &mine, part, part_count, round = chunk.round] {
                           TFDIST_RETURN_IF_ERROR(cross(part, part_count));
                           mine.reduced.store(round, std::memory_order_release);
                           return Status::OK();
                         })});
    if (in_flight.size() >= 2) result = finish(in_flight[in_flight.size() - 2]);
  }
  if (result.ok() && !in_flight.empty()) result = finish(in_flight.back());
  // Even after a failure, no task may outlive the buffers it works on.
  for (InFlight& chunk : in_flight) {
    if (!chunk.crossed.valid()) continue;
    const Status status = chunk.crossed.get();
    if (result.ok()) result = status;
  }
  return result;
}

}  // namespace tfdist

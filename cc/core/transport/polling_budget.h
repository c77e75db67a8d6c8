// How long a wait for another rank should poll before it goes to sleep,
// learned from how long recent waits of the same kind took.
//
// Polling answers within a microsecond but burns the core; sleeping is free
// but answers 50-100 µs late. Which is right depends on the workload: in a
// tight loop of small eager collectives the peer answers within tens of
// microseconds, so polling through that time halves the latency; in
// training, a rank that reaches a collective first usually waits
// milliseconds for the others, and polling all that time takes the core
// from TensorFlow (on 2 cores, MPI's busy wait cost Horovod a third of its
// throughput). So the budget follows a running estimate of the typical wait:
// poll for about four times that while it is short, and only briefly once waits
// are typically longer than polling could ever pay for.
#ifndef TFDIST_CORE_TRANSPORT_POLLING_BUDGET_H_
#define TFDIST_CORE_TRANSPORT_POLLING_BUDGET_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tfdist {

class PollingBudget {
 public:
  using Duration = std::chrono::nanoseconds;

  // Polling never stops sooner than this: a peer that is already there
  // answers within it.
  static constexpr Duration kMinimum = std::chrono::microseconds(20);

  // `maximum`: the longest a wait may poll, for waits that are typically
  // shorter than that.
  explicit PollingBudget(Duration maximum);

  // How long the next wait should poll before sleeping.
  Duration PollFor() const;

  // Reports how long a finished wait took. Safe from several threads.
  void Record(Duration waited);

  // The running estimate PollFor is based on (for tests and logs).
  Duration typical() const { return Duration(typical_ns_.load(std::memory_order_relaxed)); }

 private:
  const Duration maximum_;
  std::atomic<int64_t> typical_ns_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_POLLING_BUDGET_H_

// How long a wait for another rank should poll before it goes to sleep,
// learned from how recent waits of the same kind went.
//
// Polling answers within a microsecond but burns the core; sleeping is free
// but answers a scheduler wake-up late, tens of µs or more. Which is right depends on the workload: in a
// tight loop of eager collectives, or inside a collective every rank has
// entered, the peer answers within the polling limit, and sleeping would
// double the latency; in training, a rank that reaches a negotiation round
// first usually waits milliseconds for the others, and polling all that
// time takes the core from TensorFlow (with few cores, a busy wait like
// MPI's costs training a large share of its throughput). So a wait polls up to the limit while
// most recent waits (over 4 in 5) ended within it, and only briefly
// otherwise. A score, not an average: wait times are heavy-tailed, and one
// wait of milliseconds must not switch polling off for waits of microseconds.
//
// When the cores are oversubscribed (more ranks on the node than cores), a
// wait always polls to its oversubscribed limit, yielding: a sleeping rank
// must wait for the scheduler to wake it, while yielding hands the core
// straight to the peer that it is waiting for.
#ifndef TFDIST_CORE_TRANSPORT_POLLING_BUDGET_H_
#define TFDIST_CORE_TRANSPORT_POLLING_BUDGET_H_

#include <atomic>
#include <chrono>

namespace tfdist {

class PollingBudget {
 public:
  using Duration = std::chrono::nanoseconds;

  // What a wait polls when recent waits were mostly long: a peer that is
  // already there answers within it.
  static constexpr Duration kMinimum = std::chrono::microseconds(20);

  // `limit`: the longest a wait polls; `oversubscribed_limit` (by default
  // the same) when the cores are oversubscribed. Waits are judged short or
  // long against `limit` either way.
  explicit PollingBudget(Duration limit);
  PollingBudget(Duration limit, Duration oversubscribed_limit);

  // How long the next wait should poll before sleeping.
  Duration PollFor(bool oversubscribed) const;

  // Reports how long a finished wait took. Safe from several threads.
  void Record(Duration waited);

 private:
  static constexpr int kMaxScore = 16;
  static constexpr int kPollAtScore = 8;
  // A long wait costs this many short ones: polling continues only while
  // over 4 in 5 waits are short.
  static constexpr int kLongWaitPenalty = 4;

  const Duration limit_;
  const Duration oversubscribed_limit_;
  std::atomic<int> score_{kMaxScore};
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_POLLING_BUDGET_H_

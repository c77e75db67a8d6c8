// Waiting for other ranks without stealing the CPU from TensorFlow.
//
// A busy wait (MPI_Wait's, or a spin on shared memory) takes the core for
// as long as it lasts: where a rank's TensorFlow threads have few cores, the
// spinning rank takes a large share of their throughput. So a wait polls for
// a budget learned from recent waits of the same kind (polling_budget.h):
// spinning first (where that can help: PollsProgress), then yielding the
// core between polls; then it sleeps with a growing interval (20 µs
// doubling to 250 µs, 1 ms once the wait is older than 10 ms). Yielding
// keeps polling (MPI's progress engine needs both sides to keep testing for
// a large message's fragments to move) yet gives the core to any TensorFlow
// thread that wants it; sleeping starts once the peer is evidently busy
// elsewhere.
#ifndef TFDIST_CORE_TRANSPORT_POLITE_WAIT_H_
#define TFDIST_CORE_TRANSPORT_POLITE_WAIT_H_

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "cc/core/transport/polling_budget.h"
#include "cc/core/transport/wait_kind.h"

namespace tfdist {

// This thread's polling budget for waits of `kind`; null for kIdle, whose
// waits poll only briefly and are never recorded (wait_kind.h). Per thread
// and kind: the background thread's idle rounds wait long for the peers'
// idle rounds, while a thread driving eager collectives meets peers doing
// the same.
PollingBudget* PollingBudgetFor(WaitKind kind);

namespace polite_wait_internal {
// The first part of the polling budget spins; the rest yields the core
// between polls.
constexpr auto kSpinFor = std::chrono::microseconds(50);
// Sleeps start short and double: a peer that is nearly there is noticed
// soon, one that is far away costs few wake-ups.
constexpr auto kFirstSleep = std::chrono::microseconds(20);
// The longest sleep while the wait is young: it is also how late a rank may
// notice the last peer arriving, which in training is on the critical path.
constexpr auto kMaxSleep = std::chrono::microseconds(250);
// Waits older than this are for a peer that is far behind (a slow rank, a
// barrier at the end of an epoch); they sleep up to kMaxLongSleep.
constexpr auto kLongWait = std::chrono::milliseconds(10);
constexpr auto kMaxLongSleep = std::chrono::milliseconds(1);
}  // namespace polite_wait_internal

// Whether a wait's own polls move it on. MPI's progress engine moves a
// message only while its ranks test for it, so an MPI wait spins before it
// yields, even where ranks outnumber cores (without the spin the butterfly's
// 1 MiB call at np 4 on two cores took twice as long). Shared-memory
// counters are moved on by the peers alone: where a peer may have no core,
// a spin only keeps the core from it (a 4-byte "shm" call at np 3 on two
// cores paid the whole 50 µs spin in each of its two waits, 104 µs against
// 4 µs without it).
enum class PollsProgress { kYes, kNo };

// How long a wait polls without yielding before it yields between polls.
inline std::chrono::microseconds SpinBeforeYielding(bool oversubscribed,
                                                    PollsProgress progress) {
  return oversubscribed && progress == PollsProgress::kNo ? std::chrono::microseconds(0)
                                                          : polite_wait_internal::kSpinFor;
}

// Calls `poll` until it returns a value, and returns that value. `poll`
// returns std::nullopt while the wait goes on; its value ends the wait, and
// is recorded in the budget as a finished wait when `succeeded(value)`.
// `oversubscribed`: the ranks waited for outnumber the node's cores; the
// wait then polls to the budget's oversubscribed limit, yielding, and
// spins first only where `progress` says its polls move it on.
template <typename Poll, typename Succeeded>
auto WaitPolitely(Poll&& poll, Succeeded&& succeeded, WaitKind kind, bool oversubscribed,
                  PollsProgress progress) -> typename decltype(poll())::value_type {
  namespace w = polite_wait_internal;
  using Clock = std::chrono::steady_clock;
  PollingBudget* budget = PollingBudgetFor(kind);
  const auto poll_for = budget != nullptr ? budget->PollFor(oversubscribed)
                                          : std::chrono::nanoseconds(PollingBudget::kMinimum);
  const auto spin_for = SpinBeforeYielding(oversubscribed, progress);
  const auto start = Clock::now();
  std::chrono::microseconds sleep = w::kFirstSleep;
  while (true) {
    auto outcome = poll();
    const auto waited = Clock::now() - start;
    if (outcome.has_value()) {
      if (budget != nullptr && succeeded(*outcome)) budget->Record(waited);
      return *outcome;
    }
    if (waited < spin_for && waited < poll_for) continue;
    if (waited < poll_for) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(sleep);
    const auto cap = waited < w::kLongWait ? w::kMaxSleep
                                           : std::chrono::microseconds(w::kMaxLongSleep);
    sleep = std::min(2 * sleep, cap);
  }
}

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_POLITE_WAIT_H_

#include "cc/core/transport/polling_budget.h"

#include <algorithm>

namespace tfdist {

PollingBudget::PollingBudget(Duration limit) : PollingBudget(limit, limit) {}

PollingBudget::PollingBudget(Duration limit, Duration oversubscribed_limit)
    : limit_(std::max(limit, kMinimum)),
      oversubscribed_limit_(std::max(oversubscribed_limit, kMinimum)) {}

PollingBudget::Duration PollingBudget::PollFor(bool oversubscribed) const {
  if (oversubscribed) return oversubscribed_limit_;
  return score_.load(std::memory_order_relaxed) >= kPollAtScore ? limit_ : kMinimum;
}

void PollingBudget::Record(Duration waited) {
  const int score = score_.load(std::memory_order_relaxed);
  const int next = waited <= limit_ ? std::min(score + 1, kMaxScore)
                                    : std::max(score - kLongWaitPenalty, 0);
  // A lost update between threads only drops one sample; no loop needed.
  score_.store(next, std::memory_order_relaxed);
}

}  // namespace tfdist

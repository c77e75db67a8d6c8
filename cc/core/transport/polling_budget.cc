#include "cc/core/transport/polling_budget.h"

#include <algorithm>

namespace tfdist {

namespace {
// Each wait moves the estimate 1/8 of the way: a few waits of a new kind
// of workload change the policy, one odd wait does not.
constexpr int64_t kSmoothing = 8;
}  // namespace

PollingBudget::PollingBudget(Duration maximum)
    : maximum_(std::max(maximum, kMinimum)), typical_ns_(kMinimum.count()) {}

PollingBudget::Duration PollingBudget::PollFor() const {
  const Duration typical = this->typical();
  if (typical > maximum_) return kMinimum;
  return std::min(maximum_, 4 * typical + kMinimum);
}

void PollingBudget::Record(Duration waited) {
  // Clipped, so that one wait of seconds does not take as many waits to
  // forget as it lasted.
  const int64_t sample = std::min<int64_t>(waited.count(), 4 * maximum_.count());
  int64_t typical = typical_ns_.load(std::memory_order_relaxed);
  // Lost updates between threads only drop a sample; no loop needed.
  typical_ns_.store(typical + (sample - typical) / kSmoothing, std::memory_order_relaxed);
}

}  // namespace tfdist

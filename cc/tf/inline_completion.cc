#include "cc/tf/inline_completion.h"

#include <sched.h>

namespace tfdist {

void InlineCompletion::Deliver(const Status& status) {
  status_ = status;
  int expected = kPending;
  if (state_.compare_exchange_strong(expected, kDelivered, std::memory_order_acq_rel)) {
    return;  // the enqueuing thread is still polling and will finish the op
  }
  finish_(status_);  // it gave up waiting: finish here
}

bool InlineCompletion::WaitBriefly(std::chrono::microseconds budget,
                                   const std::function<bool()>& help) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  do {
    if (state_.load(std::memory_order_acquire) == kDelivered) {
      finish_(status_);
      return true;
    }
    if (!help()) sched_yield();
  } while (std::chrono::steady_clock::now() < deadline);
  int expected = kPending;
  if (state_.compare_exchange_strong(expected, kAbandoned, std::memory_order_acq_rel)) {
    return false;  // the runtime's thread finishes the op
  }
  finish_(status_);  // delivered between the last poll and now
  return true;
}

}  // namespace tfdist

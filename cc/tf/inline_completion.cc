#include "cc/tf/inline_completion.h"

#include <sched.h>

namespace tfdist {

namespace {
// How long an eager op polls for its result on the calling thread before it
// lets the runtime's thread finish it: long enough for a small collective,
// short enough that a large one loses nothing worth mentioning.
constexpr std::chrono::microseconds kEagerInlineWait{200};
}  // namespace

void RunEagerRequest(Runtime& runtime, Request request, InlineCompletion::Finish finish) {
  auto completion = std::make_shared<InlineCompletion>(finish);
  request.done = completion->RuntimeCallback();
  Status enqueued = runtime.Enqueue(std::move(request), /*wake_background=*/false);
  if (!enqueued.ok()) {
    finish(enqueued);
    return;
  }
  if (!completion->WaitBriefly(kEagerInlineWait,
                               [&runtime] { return runtime.TryRunRoundInline(); })) {
    runtime.WakeBackground();
  }
}

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

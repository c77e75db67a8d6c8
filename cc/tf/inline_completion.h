// Finishing an eager collective on the thread that enqueued it.
//
// An eager op blocks its Python thread until the kernel calls `done`. If the
// runtime's thread called it, the Python thread would be woken through a
// futex, which is slow on a virtual machine, as is waking the runtime's
// thread in the first place: together more than the collective itself for
// a small tensor. So the enqueuing thread drives the runtime
// itself for a short while (running negotiation rounds when no other thread
// is) and, if its result arrives in time, finishes the op itself; if not,
// it leaves, and the runtime's thread finishes the op when the result comes.
// Exactly one of the two ever runs `finish`.
#ifndef TFDIST_TF_INLINE_COMPLETION_H_
#define TFDIST_TF_INLINE_COMPLETION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "cc/core/runtime/request.h"
#include "cc/core/runtime/runtime.h"
#include "cc/core/base/status.h"

namespace tfdist {

class InlineCompletion : public std::enable_shared_from_this<InlineCompletion> {
 public:
  using Finish = std::function<void(const Status&)>;

  explicit InlineCompletion(Finish finish) : finish_(std::move(finish)) {}

  // The callback to give the runtime as Request::done.
  std::function<void(const Status&)> RuntimeCallback() {
    auto self = shared_from_this();
    return [self](const Status& status) { self->Deliver(status); };
  }

  // Called by the enqueuing thread once the request is queued: polls for up
  // to `budget`. Between polls it calls `help`, which may run a round of the
  // runtime on this thread (Runtime::TryRunRoundInline) and returns whether
  // it did; when it did not, the core is yielded.
  // Returns false when it left the request to the runtime's thread.
  bool WaitBriefly(std::chrono::microseconds budget, const std::function<bool()>& help);

 private:
  enum State : int { kPending = 0, kDelivered = 1, kAbandoned = 2 };

  void Deliver(const Status& status);

  Finish finish_;
  Status status_;
  std::atomic<int> state_{kPending};
};

// Enqueues an eager collective and drives the runtime on this thread for a
// short while (InlineCompletion); `finish` runs exactly once, here or on the
// runtime's thread. Used by the eager kernels and the eager fast path.
void RunEagerRequest(Runtime& runtime, Request request, InlineCompletion::Finish finish);

}  // namespace tfdist

#endif  // TFDIST_TF_INLINE_COMPLETION_H_

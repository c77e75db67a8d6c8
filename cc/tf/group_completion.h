// Finishing a grouped op: each member is its own request and completes on
// its own; the op finishes once, when the last member has, with the first
// error any member saw.
#ifndef TFDIST_TF_GROUP_COMPLETION_H_
#define TFDIST_TF_GROUP_COMPLETION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "cc/core/base/status.h"

namespace tfdist {

class GroupCompletion {
 public:
  using Finish = std::function<void(const Status&)>;

  GroupCompletion(int64_t members, Finish finish)
      : state_(std::make_shared<State>(members, std::move(finish))) {}

  // The Request::done of one member.
  std::function<void(const Status&)> MemberDone() const {
    std::shared_ptr<State> state = state_;
    return [state](const Status& status) { state->Deliver(status); };
  }

 private:
  struct State {
    State(int64_t members, Finish finish) : remaining(members), finish(std::move(finish)) {}

    void Deliver(const Status& status) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (!status.ok() && first_error.ok()) first_error = status;
        if (--remaining != 0) return;
      }
      finish(first_error);
    }

    std::mutex mutex;
    int64_t remaining;
    Status first_error;
    Finish finish;
  };
  std::shared_ptr<State> state_;
};

}  // namespace tfdist

#endif  // TFDIST_TF_GROUP_COMPLETION_H_

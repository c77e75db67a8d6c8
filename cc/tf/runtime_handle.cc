#include "cc/tf/runtime_handle.h"

#include <mutex>

namespace tfdist {

namespace {

std::mutex& HandleMutex() {
  static std::mutex mutex;
  return mutex;
}

RuntimeHandle& Handle() {
  static RuntimeHandle handle;
  return handle;
}

}  // namespace

RuntimeHandle CurrentRuntime() {
  std::lock_guard<std::mutex> lock(HandleMutex());
  return Handle();
}

Status NotInitializedError(const std::string& what) {
  return Status::FailedPrecondition(
      "tfdist is not initialized: call tfdist.init() before using tfdist collectives (" +
      what + ")");
}

void SetCurrentRuntime(RuntimeHandle handle) {
  if (handle.runtime && !handle.compression_state) {
    handle.compression_state = std::make_shared<StateStore>();
  }
  std::lock_guard<std::mutex> lock(HandleMutex());
  Handle() = std::move(handle);
}

}  // namespace tfdist

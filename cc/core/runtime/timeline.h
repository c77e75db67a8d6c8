// A Chrome trace (JSON array format, opened by Perfetto and chrome://tracing)
// of what the runtime did with each tensor: waiting for other ranks,
// negotiation, fusion copies and the collective with its algorithm and size.
// One row per tensor name, one process per rank. Disabled when no path is
// given, and then every call is a cheap no-op.
#ifndef TFDIST_CORE_RUNTIME_TIMELINE_H_
#define TFDIST_CORE_RUNTIME_TIMELINE_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "cc/core/base/status.h"

namespace tfdist {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts writing to `path` (with ".<rank>" appended when size > 1 so ranks
  // never share a file). An empty path leaves the timeline disabled.
  Status Open(const std::string& path, int rank, int size);
  void Close();
  bool enabled() const { return file_ != nullptr; }

  int64_t NowMicros() const;
  // One finished phase of `tensor`, from start_us to now.
  void Complete(const std::string& tensor, const char* phase, int64_t start_us,
                size_t tensors, size_t bytes, const char* algorithm);

 private:
  int RowOf(const std::string& tensor);

  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  int rank_ = 0;
  std::map<std::string, int> rows_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_TIMELINE_H_

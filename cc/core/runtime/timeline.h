// A Chrome trace (JSON array format, opened by Perfetto and chrome://tracing)
// of what the runtime did with each tensor: waiting for other ranks,
// negotiation, fusion copies and the collective with its algorithm and size.
// One row per tensor name, one process per rank. Disabled when no path is
// given, and then every call is a cheap no-op. A phase the runtime runs is a
// TimelineSpan, recorded when it goes out of scope.
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
  // One finished phase of `tensor`, from start_us to now. For a phase known
  // only after it ended (a wait measured from when a tensor was announced);
  // a phase the caller runs is a TimelineSpan.
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

// One phase of `tensor` (a copy, a collective), recorded from construction to
// destruction, so that every way out of the scope it covers, errors
// included, ends it. `tensor` must outlive the span.
class TimelineSpan {
 public:
  TimelineSpan(Timeline& timeline, const std::string& tensor, const char* phase,
               size_t tensors, size_t bytes, const char* algorithm = "")
      : timeline_(timeline),
        tensor_(tensor),
        phase_(phase),
        tensors_(tensors),
        bytes_(bytes),
        algorithm_(algorithm),
        start_us_(timeline.NowMicros()) {}
  ~TimelineSpan() {
    timeline_.Complete(tensor_, phase_, start_us_, tensors_, bytes_, algorithm_);
  }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  Timeline& timeline_;
  const std::string& tensor_;
  const char* phase_;
  size_t tensors_;
  size_t bytes_;
  const char* algorithm_;
  int64_t start_us_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_TIMELINE_H_

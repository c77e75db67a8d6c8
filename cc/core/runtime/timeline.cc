#include "cc/core/runtime/timeline.h"

namespace tfdist {

namespace {

// Tensor names come from users: keep the JSON valid whatever they contain.
std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Timeline::~Timeline() { Close(); }

Status Timeline::Open(const std::string& path, int rank, int size) {
  if (path.empty()) return Status::OK();
  const std::string file = size > 1 ? path + "." + std::to_string(rank) : path;
  std::lock_guard<std::mutex> lock(mutex_);
  file_ = std::fopen(file.c_str(), "w");
  if (file_ == nullptr) {
    return Status::InvalidArgument("tfdist: cannot write the timeline to " + file);
  }
  rank_ = rank;
  std::fprintf(file_, "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
               "\"args\":{\"name\":\"tfdist rank %d\"}}", rank_, rank_);
  return Status::OK();
}

void Timeline::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  std::fprintf(file_, "\n]\n");
  std::fclose(file_);
  file_ = nullptr;
}

int64_t Timeline::NowMicros() const {
  if (file_ == nullptr) return 0;
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - origin_)
      .count();
}

int Timeline::RowOf(const std::string& tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) return it->second;
  const int row = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(tensor, row);
  std::fprintf(file_, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"name\":\"%s\"}}", rank_, row, JsonEscape(tensor).c_str());
  return row;
}

void Timeline::Complete(const std::string& tensor, const char* phase, int64_t start_us,
                        size_t tensors, size_t bytes, const char* algorithm) {
  if (file_ == nullptr) return;
  const int64_t end_us = NowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  const int row = RowOf(tensor);
  std::fprintf(file_, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
               "\"ts\":%lld,\"dur\":%lld,\"args\":{\"tensors\":%zu,\"bytes\":%zu"
               ",\"algorithm\":\"%s\"}}",
               phase, rank_, row, static_cast<long long>(start_us),
               static_cast<long long>(end_us - start_us), tensors, bytes, algorithm);
}

}  // namespace tfdist

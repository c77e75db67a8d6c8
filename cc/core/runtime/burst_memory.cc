#include "cc/core/runtime/burst_memory.h"

#include "cc/core/runtime/request.h"

namespace tfdist {

size_t BurstMemory::Expected(const std::string& first) const {
  const auto it = sizes_.find(first);
  return it == sizes_.end() ? 0 : it->second;
}

void BurstMemory::Taken(const std::string& first, size_t size, Clock::time_point began,
                        Clock::time_point taken) {
  const bool continues =
      last_size_ > 0 && began >= last_taken_ && began - last_taken_ < continuation_;
  if (continues) {
    last_size_ += size;
    Remember(last_first_, last_size_);
  } else {
    last_first_ = first;
    last_size_ = size;
    Remember(first, size);
  }
  last_taken_ = taken;
}

void BurstMemory::Remember(const std::string& first, size_t size) {
  if (IsSequenceName(first)) return;
  if (sizes_.size() >= kCapacity && sizes_.count(first) == 0) sizes_.clear();
  sizes_[first] = size;
}

}  // namespace tfdist

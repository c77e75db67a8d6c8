#include "cc/core/runtime/burst_memory.h"

#include "cc/core/runtime/request.h"

namespace tfdist {

size_t BurstMemory::Expected(const std::string& first) const {
  const auto it = sizes_.find(first);
  return it == sizes_.end() ? 0 : it->second;
}

void BurstMemory::Remember(const std::string& first, size_t size) {
  if (IsSequenceName(first)) return;
  if (sizes_.size() >= kCapacity && sizes_.count(first) == 0) sizes_.clear();
  sizes_[first] = size;
}

}  // namespace tfdist

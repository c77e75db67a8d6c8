#include "cc/tf/eager_names.h"

#include <atomic>
#include <cstdint>

namespace tfdist {

std::string NextEagerName(const std::string& op_type) {
  static std::atomic<uint64_t> sequence{0};
  return op_type + ".eager." + std::to_string(sequence++);
}

}  // namespace tfdist

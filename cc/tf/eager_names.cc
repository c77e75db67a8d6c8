#include "cc/tf/eager_names.h"

#include <atomic>
#include <cstdint>

#include "cc/core/runtime/request.h"

namespace tfdist {

std::string NextEagerName(const std::string& op_type) {
  static std::atomic<uint64_t> sequence{0};
  return SequenceName(op_type, sequence++);
}

}  // namespace tfdist

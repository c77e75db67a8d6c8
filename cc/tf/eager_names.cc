#include "cc/tf/eager_names.h"

#include <atomic>
#include <cstdint>

#include "cc/core/runtime/request.h"

namespace tfdist {

namespace {
std::atomic<uint64_t> sequence{0};
}  // namespace

std::string NextEagerName(const std::string& op_type) {
  return SequenceName(op_type, sequence++);
}

void RestartEagerNames() { sequence = 0; }

}  // namespace tfdist

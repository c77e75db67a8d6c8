// BurstMemory: the size of the last burst that began with a request, bounded.
#include <string>

#include "cc/core/runtime/burst_memory.h"
#include "cc/core/runtime/request.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

TFDIST_TEST(BurstMemoryRecallsTheLastBurstOfEachFirstRequest) {
  BurstMemory memory;
  CHECK(memory.Expected("grad.0") == 0);
  memory.Remember("grad.0", 100);
  memory.Remember("stats.0", 2);
  CHECK(memory.Expected("grad.0") == 100);
  CHECK(memory.Expected("stats.0") == 2);
  CHECK(memory.Expected("grad.1") == 0);
  // Later bursts replace earlier ones: the program may have changed.
  memory.Remember("grad.0", 99);
  CHECK(memory.Expected("grad.0") == 99);
}

TFDIST_TEST(BurstMemoryIgnoresSequenceNames) {
  BurstMemory memory;
  const std::string unnamed = SequenceName("allreduce", 7);
  memory.Remember(unnamed, 3);
  CHECK(memory.Expected(unnamed) == 0);
  CHECK(memory.size() == 0);
}

TFDIST_TEST(BurstMemoryStaysBounded) {
  BurstMemory memory;
  for (size_t i = 0; i < 3 * BurstMemory::kCapacity; ++i) {
    memory.Remember("tensor." + std::to_string(i), 1);
    CHECK(memory.size() <= BurstMemory::kCapacity);
  }
  // What is known survives a full memory being rewritten in place.
  memory.Remember("tensor.0", 5);
  memory.Remember("tensor.0", 6);
  CHECK(memory.Expected("tensor.0") == 6);
}

}  // namespace
}  // namespace tfdist

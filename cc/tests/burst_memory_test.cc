// BurstMemory: the size of the last burst that began with a request, grown
// when a burst turns out to have been split, and bounded.
#include <chrono>
#include <string>

#include "cc/core/runtime/burst_memory.h"
#include "cc/core/runtime/request.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

using std::chrono::microseconds;
using Clock = BurstMemory::Clock;

constexpr microseconds kContinuation(100);

// Records bursts one after another, each queued for 50 µs and taken `gap`
// after the previous one was taken.
class Bursts {
 public:
  explicit Bursts(BurstMemory& memory) : memory_(memory) {}
  void Add(const std::string& first, size_t size, microseconds gap) {
    const Clock::time_point began = now_ + gap;
    now_ = began + microseconds(50);
    memory_.Taken(first, size, began, now_);
  }

 private:
  BurstMemory& memory_;
  Clock::time_point now_ = Clock::now();
};

TFDIST_TEST(BurstMemoryRecallsTheLastBurstOfEachFirstRequest) {
  BurstMemory memory(kContinuation);
  Bursts bursts(memory);
  CHECK(memory.Expected("grad.0") == 0);
  bursts.Add("grad.0", 100, microseconds(5000));
  bursts.Add("stats.0", 2, microseconds(5000));
  CHECK(memory.Expected("grad.0") == 100);
  CHECK(memory.Expected("stats.0") == 2);
  CHECK(memory.Expected("grad.1") == 0);
  // Later bursts replace earlier ones: the program may have changed.
  bursts.Add("grad.0", 99, microseconds(5000));
  CHECK(memory.Expected("grad.0") == 99);
}

TFDIST_TEST(BurstMemoryGrowsABurstThatWasSplit) {
  BurstMemory memory(kContinuation);
  Bursts bursts(memory);
  // A hiccup split a burst of 100: the rest began 300 µs after the first
  // part was taken, too late to count as its continuation.
  bursts.Add("grad.0", 60, microseconds(5000));
  bursts.Add("grad.60", 40, microseconds(300));
  CHECK(memory.Expected("grad.0") == 60);
  // Next step the round starts after 60 (the size remembered); the rest
  // arrives right after it was taken and is counted with it.
  bursts.Add("grad.0", 60, microseconds(5000));
  bursts.Add("grad.60", 40, microseconds(10));
  CHECK(memory.Expected("grad.0") == 100);
  // A separate burst, well after, stays separate.
  bursts.Add("stats.0", 2, microseconds(2000));
  CHECK(memory.Expected("stats.0") == 2);
  CHECK(memory.Expected("grad.0") == 100);
}

TFDIST_TEST(BurstMemoryIgnoresSequenceNames) {
  BurstMemory memory(kContinuation);
  Bursts bursts(memory);
  const std::string unnamed = SequenceName("allreduce", 7);
  bursts.Add(unnamed, 3, microseconds(5000));
  CHECK(memory.Expected(unnamed) == 0);
  CHECK(memory.size() == 0);
}

TFDIST_TEST(BurstMemoryStaysBounded) {
  BurstMemory memory(kContinuation);
  Bursts bursts(memory);
  for (size_t i = 0; i < 3 * BurstMemory::kCapacity; ++i) {
    bursts.Add("tensor." + std::to_string(i), 1, microseconds(5000));
    CHECK(memory.size() <= BurstMemory::kCapacity);
  }
  // What is known survives a full memory being rewritten in place.
  bursts.Add("tensor.0", 5, microseconds(5000));
  bursts.Add("tensor.0", 6, microseconds(5000));
  CHECK(memory.Expected("tensor.0") == 6);
}

}  // namespace
}  // namespace tfdist

// Heap memory standing in for a shared segment (cc/core/control/shared_segment.h)
// in tests that run ranks as threads of one process.
#ifndef TFDIST_TESTS_FAKE_SEGMENT_H_
#define TFDIST_TESTS_FAKE_SEGMENT_H_

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cc/core/collectives/shared_memory_allreduce.h"

namespace tfdist_test {

// Zeroed, 64-byte aligned regions for `size` ranks, as SharedSegment maps.
class FakeSegment {
 public:
  FakeSegment(int size, size_t slot_bytes)
      : stride_((tfdist::SharedMemoryAllreduce::RegionBytes(slot_bytes) + 63) / 64 * 64),
        memory_(static_cast<char*>(std::aligned_alloc(64, stride_ * size))) {
    std::memset(memory_.get(), 0, stride_ * size);
    for (int q = 0; q < size; ++q) regions_.push_back(memory_.get() + q * stride_);
  }
  const std::vector<char*>& regions() const { return regions_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  size_t stride_;
  std::unique_ptr<char, Free> memory_;
  std::vector<char*> regions_;
};

}  // namespace tfdist_test

#endif  // TFDIST_TESTS_FAKE_SEGMENT_H_

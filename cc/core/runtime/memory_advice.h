// Advice to the kernel about buffers the runtime reduces.
#ifndef TFDIST_CORE_RUNTIME_MEMORY_ADVICE_H_
#define TFDIST_CORE_RUNTIME_MEMORY_ADVICE_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace tfdist {

// Asks for transparent huge pages on the 2 MiB-aligned part of a large,
// freshly allocated output. TensorFlow allocates a new output per call; for
// large tensors glibc maps fresh pages every time, and touching them one
// 4 KiB page at a time can cost more than MPI's whole allreduce of the
// tensor, several times what the same touches cost on huge pages. No effect
// where THP is disabled, on small buffers, or on pages already present.
void AdviseHugePages(void* data, size_t bytes);

// Moves buffers that the other ranks read straight from this process (MPI's
// single-copy transfers between processes on one host pin the sender's pages
// one by one for every message) onto huge pages that are already present,
// with MADV_COLLAPSE (Linux 6.1). The MLP's gradients are reused from step to
// step, and on 4 KiB pages the pinning was a fifth of the ring's time.
//
// A collapse copies up to 2 MiB, so it is worth it only for memory that is
// used again: a 2 MiB region is collapsed the second time a buffer in it is
// reduced, and never tried again after that, whether the kernel collapsed it
// or refused (THP off, a kernel before 6.1, a region that is not all
// private anonymous memory).
class HugePageCollapser {
 public:
  void Collapse(const void* data, size_t bytes);
  // Regions collapsed so far (for tests).
  size_t collapsed() const { return collapsed_count_; }

 private:
  // Bounded: a workload whose buffers move every step starts over.
  static constexpr size_t kMaxRegions = 4096;

  // Times each 2 MiB region was seen, up to 2 (the time it was tried).
  std::unordered_map<uintptr_t, uint8_t> sightings_;
  size_t collapsed_count_ = 0;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_MEMORY_ADVICE_H_

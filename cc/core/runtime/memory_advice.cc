#include "cc/core/runtime/memory_advice.h"

#include <sys/mman.h>

// glibc 2.36's headers predate it; the value is the kernel's ABI.
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace tfdist {

namespace {
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
}  // namespace

void AdviseHugePages(void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end > begin) {
    // Advice only: a failure changes nothing but speed.
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#else
  (void)data;
  (void)bytes;
#endif
}

void HugePageCollapser::Collapse(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (sightings_.size() > kMaxRegions) sightings_.clear();
  // Every 2 MiB region the buffer touches, the partial ones at its ends
  // included: the pages pinned are the buffer's, wherever they lie.
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) & ~(kHugePage - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(data) + bytes - 1) & ~(kHugePage - 1);
  for (uintptr_t region = first; region <= last; region += kHugePage) {
    uint8_t& sightings = sightings_[region];
    if (sightings >= 2) continue;    // tried already, whatever the outcome
    if (++sightings < 2) continue;   // first sighting: maybe never reused
    // The kernel copies the region into a huge page while holding off other
    // accesses to it; contents are kept. It refuses (and nothing changes)
    // where THP is off, on kernels before 6.1, for shared memory, and for a
    // region that reaches past the buffer's mapping (a large allocation
    // glibc mapped on its own): those regions are simply not tried again.
    if (madvise(reinterpret_cast<void*>(region), kHugePage, MADV_COLLAPSE) == 0) {
      ++collapsed_count_;
    }
  }
}

}  // namespace tfdist

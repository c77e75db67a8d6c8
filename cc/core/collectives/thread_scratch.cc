#include "cc/core/collectives/thread_scratch.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tfdist {
namespace {

// max_align_t-sized elements keep the storage aligned for double and int64.
using ScratchWord = std::max_align_t;

}  // namespace

unsigned char* ThreadScratch(size_t bytes) {
  thread_local std::vector<ScratchWord> storage;
  const size_t words = (bytes + sizeof(ScratchWord) - 1) / sizeof(ScratchWord);
  if (words > storage.size()) {
    // Grow by at least doubling so that slowly increasing requests do not
    // reallocate (and re-zero) every time. The old contents are not needed,
    // so free them first instead of letting resize copy them.
    const size_t new_size = std::max(words, 2 * storage.size());
    storage = std::vector<ScratchWord>();
    storage.resize(new_size);
  }
  return reinterpret_cast<unsigned char*>(storage.data());
}

}  // namespace tfdist

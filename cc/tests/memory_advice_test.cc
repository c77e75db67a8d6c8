// HugePageCollapser: collapses a 2 MiB region only the second time a buffer
// in it is reduced, once, and never changes what the memory holds. Whether
// the kernel grants huge pages depends on the machine (THP may be off), so
// the counts are checked as bounds that hold either way.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "cc/core/runtime/memory_advice.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

struct FreeDeleter {
  void operator()(unsigned char* p) const { std::free(p); }
};

std::unique_ptr<unsigned char, FreeDeleter> AlignedBlock(size_t bytes) {
  return std::unique_ptr<unsigned char, FreeDeleter>(
      static_cast<unsigned char*>(std::aligned_alloc(kHugePage, bytes)));
}

void Fill(unsigned char* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
}

bool Unchanged(const unsigned char* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    if (data[i] != static_cast<unsigned char>(i * 131 + 7)) return false;
  }
  return true;
}

TFDIST_TEST(HugePageCollapserCollapsesReusedRegionsOnceAndKeepsTheirContents) {
  const size_t bytes = 4 * kHugePage;
  auto block = AlignedBlock(bytes);
  CHECK(block != nullptr);
  Fill(block.get(), bytes);
  // A buffer of 3.5 MiB starting 1 MiB in: it covers half of region 0, all
  // of region 1 and a quarter of region 2 (partial regions count).
  unsigned char* buffer = block.get() + (size_t{1} << 20);
  const size_t buffer_bytes = size_t{7} << 19;

  HugePageCollapser collapser;
  collapser.Collapse(buffer, buffer_bytes);
  CHECK_EQ(collapser.collapsed(), size_t{0});  // seen once: perhaps never reused
  Fill(block.get(), bytes);  // written between reductions, as gradients are
  collapser.Collapse(buffer, buffer_bytes);
  const size_t after_reuse = collapser.collapsed();
  CHECK(after_reuse <= 3);  // regions 0-2 (none where THP is unavailable)
  collapser.Collapse(buffer, buffer_bytes);
  collapser.Collapse(buffer + 1, 10);
  CHECK_EQ(collapser.collapsed(), after_reuse);  // never twice
  CHECK(Unchanged(block.get(), bytes));

  collapser.Collapse(buffer, 0);  // nothing to do
  CHECK(Unchanged(block.get(), bytes));
}

}  // namespace
}  // namespace tfdist

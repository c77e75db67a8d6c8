// Single memory passes of the np=2 64 MiB ring, per rank: the copies and sum of
// the uncompressed ring against the float16 copies, sum, rounding and widening
// of the compressed one (docs/compression.md, "Where it pays"). One core, fastest
// of 15. Not part of any library; from the repository root:
//
//   g++ -std=c++17 -O3 -I. -o /tmp/half_bulk_passes
//       benchmarks/half_bulk_passes.cc cc/core/numeric/half_bulk.cc && /tmp/half_bulk_passes
// (one command line).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>
#include "cc/core/numeric/half_bulk.h"
using namespace tfdist;
template <typename F> double best_ms(F f) {
  double best = 1e9;
  for (int r = 0; r < 15; ++r) {
    auto t = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}
int main() {
  const size_t n = size_t{8} << 20;  // 8 M elements: 32 MiB of float32, 16 MiB of halves
  std::vector<float> a(n, 1.5f), b(n, 0.25f), c(n);
  std::vector<uint16_t> h(n), g(n);
  FloatsToHalves(a.data(), g.data(), n, 1.0f);
  printf("memcpy 32 MiB float32:              %.2f ms\n", best_ms([&] { std::memcpy(c.data(), a.data(), n * 4); }));
  printf("memcpy 16 MiB halves:               %.2f ms\n", best_ms([&] { std::memcpy(h.data(), g.data(), n * 2); }));
  printf("float32 sum into (32 MiB + 32 MiB): %.2f ms\n", best_ms([&] { for (size_t i = 0; i < n; ++i) c[i] += b[i]; }));
  printf("FloatsToHalves 32 MiB -> 16 MiB:    %.2f ms\n", best_ms([&] { FloatsToHalves(a.data(), h.data(), n, 0.5f); }));
  printf("HalvesToFloats 16 MiB -> 32 MiB:    %.2f ms\n", best_ms([&] { HalvesToFloats(g.data(), c.data(), n, 1.0f); }));
  printf("SumHalvesInto 16 MiB + 16 MiB:      %.2f ms\n", best_ms([&] { SumHalvesInto(h.data(), g.data(), n); }));
  return 0;
}

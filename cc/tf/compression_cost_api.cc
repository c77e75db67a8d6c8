// What the wire casts of fp16/bf16 compression cost on this rank, for
// Compression.auto (tfdist/compression/auto.py): the runtime rounds every
// float32 it sends to 16 bits and widens every 16-bit result (half_bulk.h),
// and auto weighs that against the bytes it saves on the link.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "cc/core/numeric/half_bulk.h"

extern "C" {

// Seconds this rank takes, with the runtime's own loops, to round `bytes` of
// float32 (a multiple of 4) to 16 bits, add a second 16-bit buffer into them
// (widened, summed in float32, rounded: what reducing on the wire costs more
// than a float32 sum) and widen the result back: cast_code 1 float16, 2
// bfloat16 (WireCompression, cc/core/runtime/request.h). The
// fastest of `repetitions` (>= 1) tries, after one untimed pass that pages
// the buffers in; on a shared machine other work only adds time. -1 for a
// bad argument. Needs no runtime: it touches nothing but its own buffers.
double tfdist_wire_cast_seconds(int cast_code, uint64_t bytes, int repetitions) {
  if ((cast_code != 1 && cast_code != 2) || bytes == 0 || bytes % 4 != 0 || repetitions < 1) {
    return -1.0;
  }
  const size_t count = static_cast<size_t>(bytes / 4);
  std::vector<float> floats(count);
  for (size_t i = 0; i < count; ++i) floats[i] = 1.0f + static_cast<float>(i % 1024) * 1e-3f;
  std::vector<uint16_t> halves(count);
  std::vector<uint16_t> incoming(count);
  if (cast_code == 1) {
    tfdist::FloatsToHalves(floats.data(), incoming.data(), count, 1.0f);
  } else {
    tfdist::FloatsToBFloat16s(floats.data(), incoming.data(), count, 1.0f);
  }
  double best = std::numeric_limits<double>::infinity();
  for (int attempt = 0; attempt <= repetitions; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    if (cast_code == 1) {
      tfdist::FloatsToHalves(floats.data(), halves.data(), count, 1.0f);
      tfdist::SumHalvesInto(halves.data(), incoming.data(), count);
      tfdist::HalvesToFloats(halves.data(), floats.data(), count, 0.5f);  // stays in range
    } else {
      tfdist::FloatsToBFloat16s(floats.data(), halves.data(), count, 1.0f);
      tfdist::SumBFloat16sInto(halves.data(), incoming.data(), count);
      tfdist::BFloat16sToFloats(halves.data(), floats.data(), count, 0.5f);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (attempt > 0) best = std::min(best, seconds);  // attempt 0 pages the buffers in
  }
  return best;
}

}  // extern "C"

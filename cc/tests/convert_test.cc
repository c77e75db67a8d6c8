// ConvertScaled: float32 scaled by a factor that float32 holds exactly takes a
// float32 path; its bits must equal those of the double-precision definition.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cc/core/numeric/convert.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

std::vector<float> AwkwardFloats() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -3.5f, 1e-45f, -1e-44f,
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity()};
  std::mt19937 random(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  while (values.size() < 5003) {  // not a multiple of the vector width
    const uint32_t bits = any_bits(random);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isnan(x)) values.push_back(x);
  }
  return values;
}

TFDIST_TEST(ConvertScaledFloatMatchesDoublePrecision) {
  const std::vector<float> input = AwkwardFloats();
  for (double factor : {0.5, 0.25, 0.125, 1.0 / 1024, 2.0, 1024.0, std::ldexp(1.0, -140),
                        std::ldexp(1.0, 100), 3.0, 0.75, 1.0 / 3, 0.1, 1.0 + 1e-12}) {
    std::vector<float> out(input.size());
    ConvertScaled(input.data(), DataType::kFloat32, out.data(), DataType::kFloat32,
                  input.size(), factor);
    for (size_t i = 0; i < input.size(); ++i) {
      const float expected = static_cast<float>(static_cast<double>(input[i]) * factor);
      CHECK(Bits(out[i]) == Bits(expected));
    }
    // In place, as the ring scales a reduced chunk.
    std::vector<float> in_place = input;
    ConvertScaled(in_place.data(), DataType::kFloat32, in_place.data(), DataType::kFloat32,
                  in_place.size(), factor);
    CHECK(std::memcmp(in_place.data(), out.data(), out.size() * sizeof(float)) == 0);
  }
}

TFDIST_TEST(ConvertScaledFloatNaNStaysNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float out = 0;
  ConvertScaled(&nan, DataType::kFloat32, &out, DataType::kFloat32, 1, 0.5);
  CHECK(std::isnan(out));
}

}  // namespace
}  // namespace tfdist
